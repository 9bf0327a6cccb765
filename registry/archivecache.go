package registry

import (
	"container/list"
	"sync"
)

// openedArchives remembers recently opened archives by the sha256 of their bytes. An
// Archive never changes once open, so the same bytes need not be inflated and checked
// again when a capsule is staged anew (a reload, another session).
var openedArchives = newArchiveCache(64)

type archiveCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of string keys, most recent first
	items map[string]*list.Element
	arcs  map[string]*Archive
}

func newArchiveCache(max int) *archiveCache {
	return &archiveCache{max: max, order: list.New(), items: map[string]*list.Element{}, arcs: map[string]*Archive{}}
}

// open returns the archive for data, whose sha256 is sum, opening it only on a miss.
// Refusals are not remembered: they are cheap to find again and rare.
func (c *archiveCache) open(data []byte, sum string) (*Archive, error) {
	c.mu.Lock()
	if el, ok := c.items[sum]; ok {
		c.order.MoveToFront(el)
		a := c.arcs[sum]
		c.mu.Unlock()
		return a, nil
	}
	c.mu.Unlock()
	a, err := OpenArchive(data)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[sum]; !ok {
		c.items[sum] = c.order.PushFront(sum)
		c.arcs[sum] = a
		for c.order.Len() > c.max {
			old := c.order.Remove(c.order.Back()).(string)
			delete(c.items, old)
			delete(c.arcs, old)
		}
	}
	return a, nil
}
