// Package filesum remembers the sha256 of files by their identity (device, inode, size,
// modification and change times), as git's index does, so a file unchanged since it
// was hashed need not be read again: a gateway starting thousands of capsules finds
// their modules' sums without reading them.
//
// A sum is recorded only for a file whose times are older than when its reading began
// by more than Margin: a later write then changes its change time (which no one can
// set back), so a changed file is never taken for the one hashed.
package filesum

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Margin is how much older than its reading a file must be for its sum to be recorded;
// far above the granularity of file times.
const Margin = 100 * time.Millisecond

// id is what identifies a file's content without reading it.
type id struct {
	dev, ino, size, mtime, ctime int64
}

type entry struct {
	id  id
	sum string
}

// Cache maps file paths to the sums of their content, by identity. Its zero value is
// not usable: call New or Open.
type Cache struct {
	mu   sync.Mutex
	m    map[string]entry
	file *os.File // where new entries are appended; nil for a memory-only cache
}

// New returns a cache kept in memory only.
func New() *Cache { return &Cache{m: map[string]entry{}} }

// Open returns a cache kept in the file at path too: its entries are loaded (a line it
// cannot read is skipped) and new ones appended.
func Open(path string) (*Cache, error) {
	c := New()
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 64<<10)
		for sc.Scan() {
			if p, e, ok := parseLine(sc.Text()); ok {
				c.m[p] = e
			}
		}
		f.Close()
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("filesum: %w", err)
	}
	c.file = f
	return c, nil
}

// Close closes the cache's file.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.file == nil {
		return nil
	}
	err := c.file.Close()
	c.file = nil
	return err
}

// Lookup returns the recorded sum of the file at path if the file is the one it was
// recorded for.
func (c *Cache) Lookup(path string) (string, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", false
	}
	fid, ok := idOf(fi)
	if !ok {
		return "", false
	}
	c.mu.Lock()
	e, found := c.m[path]
	c.mu.Unlock()
	if !found || e.id != fid {
		return "", false
	}
	return e.sum, true
}

// Record notes that the file at path, read from since on, hashes to sum, unless it may
// have changed since since-Margin (then it will simply be read again next time).
func (c *Cache) Record(path, sum string, since time.Time) {
	fi, err := os.Stat(path)
	if err != nil || strings.ContainsAny(path, "\n\r") {
		return
	}
	fid, ok := idOf(fi)
	limit := since.Add(-Margin).UnixNano()
	if !ok || fid.mtime >= limit || fid.ctime >= limit {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, found := c.m[path]; found && e == (entry{fid, sum}) {
		return
	}
	c.m[path] = entry{fid, sum}
	if c.file != nil {
		fmt.Fprintf(c.file, "%s %d %d %d %d %d %s\n", sum, fid.dev, fid.ino, fid.size, fid.mtime, fid.ctime, path)
	}
}

// parseLine reads "<sum> <dev> <ino> <size> <mtime> <ctime> <path>".
func parseLine(line string) (string, entry, bool) {
	f := strings.SplitN(line, " ", 7)
	if len(f) != 7 || len(f[0]) != 64 || f[6] == "" {
		return "", entry{}, false
	}
	var n [5]int64
	for i := range n {
		v, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return "", entry{}, false
		}
		n[i] = v
	}
	return f[6], entry{id: id{n[0], n[1], n[2], n[3], n[4]}, sum: f[0]}, true
}
