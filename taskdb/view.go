package taskdb

import (
	"bytes"
	"strings"

	"github.com/google/btree"
	bolt "go.etcd.io/bbolt"
)

// The store keeps its newest writes in memory (mem), durable in the log, and moves them
// into the bbolt file at each checkpoint. Every read and every write's apply goes through
// a view: the writes in memory laid over one bbolt read transaction.

// bucket numbers the buckets in memory and in the log.
type bucket uint8

const (
	bTasks bucket = iota
	bEvents
	bTurns
	bHeads
	bPush
	bBlob
	bPins
	bBudgets
	nBuckets
)

var bucketNames = [nBuckets][]byte{bucketTasks, bucketEvents, bucketTurns, bucketHeads, bucketPush, bucketBlob, bucketPins, bucketBudgets}

// entry is a key's newest value since the last checkpoint, or its removal (del).
type entry struct {
	key string
	val []byte
	del bool
}

func lessEntry(a, b entry) bool { return a.key < b.key }

// mem holds the writes since the last checkpoint, one ordered tree per bucket. A mem a
// reader holds is never written again: the committer writes its own clone, whose shared
// nodes are copied on write.
type mem struct {
	trees [nBuckets]*btree.BTreeG[entry]
	bytes int // the log bytes that hold these writes
	n     int // entries
}

// memDegree is the trees' B-tree degree: nodes of up to 63 entries.
const memDegree = 32

func newMem() *mem {
	m := &mem{}
	for i := range m.trees {
		m.trees[i] = btree.NewG(memDegree, lessEntry)
	}
	return m
}

// clone is O(1): both copies share the trees' nodes until one of them writes.
func (m *mem) clone() *mem {
	c := &mem{bytes: m.bytes, n: m.n}
	for i, t := range m.trees {
		c.trees[i] = t.Clone()
	}
	return c
}

func (m *mem) set(b bucket, e entry) {
	if _, had := m.trees[b].ReplaceOrInsert(e); !had {
		m.n++
	}
}

// view reads the writes in m over the bbolt transaction tx; a view of the committer also
// writes (into m, recording each write in rec for the log).
type view struct {
	tx  *bolt.Tx
	m   *mem
	rec *record // nil: a reader's view
}

// get returns the value of k, nil if absent. The bytes are valid while the view is.
func (v *view) get(b bucket, k []byte) []byte {
	if e, ok := v.m.trees[b].Get(entry{key: string(k)}); ok {
		if e.del {
			return nil
		}
		return e.val
	}
	if bk := v.tx.Bucket(bucketNames[b]); bk != nil {
		return bk.Get(k)
	}
	return nil // a store from before the bucket, read-only
}

// put sets k to val in memory and in the batch's log record. Memory keeps val itself:
// every write hands over a value it encoded for this write and never changes.
func (v *view) put(b bucket, k, val []byte) {
	v.rec.put(b, k, val)
	v.m.set(b, entry{key: string(k), val: val})
}

// del removes k, in memory and in the batch's log record.
func (v *view) del(b bucket, k []byte) {
	v.rec.del(b, k)
	v.m.set(b, entry{key: string(k), del: true})
}

// scan calls fn for every key under prefix from the first at or after from (nil: the
// prefix itself), in key order, until fn returns false or an error. from must begin with
// prefix.
func (v *view) scan(b bucket, from, prefix []byte, fn func(k, v []byte) (bool, error)) error {
	if from == nil {
		from = prefix
	}
	var mine []entry
	v.m.trees[b].AscendGreaterOrEqual(entry{key: string(from)}, func(e entry) bool {
		if !strings.HasPrefix(e.key, string(prefix)) {
			return false
		}
		mine = append(mine, e)
		return true
	})
	var k, val []byte
	var c *bolt.Cursor
	if bk := v.tx.Bucket(bucketNames[b]); bk != nil {
		c = bk.Cursor()
		if len(from) == 0 {
			k, val = c.First()
		} else {
			k, val = c.Seek(from)
		}
	}
	i := 0
	for {
		onDisk := k != nil && bytes.HasPrefix(k, prefix)
		if !onDisk && i == len(mine) {
			return nil
		}
		var more bool
		var err error
		if i < len(mine) && (!onDisk || mine[i].key <= string(k)) {
			e := mine[i]
			i++
			if onDisk && e.key == string(k) {
				k, val = c.Next() // the newer value in memory hides the file's
			}
			if e.del {
				continue
			}
			more, err = fn([]byte(e.key), e.val)
		} else {
			more, err = fn(k, val)
			k, val = c.Next()
		}
		if err != nil || !more {
			return err
		}
	}
}

// keys returns a copy of every key under prefix, in order.
func (v *view) keys(b bucket, prefix []byte) ([][]byte, error) {
	var keys [][]byte
	err := v.scan(b, nil, prefix, func(k, _ []byte) (bool, error) {
		keys = append(keys, bytes.Clone(k))
		return true, nil
	})
	return keys, err
}

// deletePrefix removes every key under prefix.
func (v *view) deletePrefix(b bucket, prefix []byte) error {
	keys, err := v.keys(b, prefix)
	if err != nil {
		return err
	}
	for _, k := range keys {
		v.del(b, k)
	}
	return nil
}
