package registry

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/capsulegate/capsulegate/internal/atomicfile"
	"github.com/capsulegate/capsulegate/internal/digest"
)

// DefaultCacheBytes bounds an artifact cache when no size is configured.
const DefaultCacheBytes = 2 << 30

// Cache keeps a remote registry's archives on disk by their sha256, so that a gateway
// whose lock pins them stages — and restarts — with the registry down
// (docs/operators.md "The artifact cache").
//
// Only bytes already checked against the lock (or, when a lock is being written,
// against the registry's stated digest) are put in, and every read hashes the file
// again, so a damaged or altered entry is dropped rather than served. The folder holds
// at most Max bytes: putting an entry evicts the least recently used ones first, never
// one that a live process holds (Hold) for a capsule it has staged. An entry that
// would fit only by evicting held ones is not kept. Several processes may share a
// folder: eviction runs under an exclusive lock of it, and each process's holds are
// in pins/<pid>, ignored once that process is gone.
type Cache struct {
	dir string
	max int64
	mu  sync.Mutex
	// held counts this process's holds per sha256.
	held map[string]int
}

// caches are the process's caches by folder: one per folder, so that the holds of
// every config a reload leaves running count together.
var caches = struct {
	sync.Mutex
	m map[string]*Cache
}{m: map[string]*Cache{}}

// OpenCache opens (creating) the cache folder dir, bounded at maxBytes (≤ 0 means
// DefaultCacheBytes). Opening a folder again returns the same Cache, with the new bound.
func OpenCache(dir string, maxBytes int64) (*Cache, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	caches.Lock()
	defer caches.Unlock()
	if c := caches.m[dir]; c != nil {
		c.mu.Lock()
		c.max = maxBytes
		c.mu.Unlock()
		return c, nil
	}
	c := &Cache{dir: dir, max: maxBytes, held: map[string]int{}}
	if err := c.mkdirs(); err != nil {
		return nil, err
	}
	caches.m[dir] = c
	return c, nil
}

// mkdirs creates the cache's folders when they are missing.
func (c *Cache) mkdirs() error {
	for _, d := range []string{c.blobDir(), c.pinDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return c.err(err, "cannot create "+d)
		}
	}
	return nil
}

// Dir returns the cache's folder.
func (c *Cache) Dir() string { return c.dir }

// Max returns the cache's bound in bytes.
func (c *Cache) Max() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.max
}

func (c *Cache) blobDir() string { return filepath.Join(c.dir, "sha256") }
func (c *Cache) pinDir() string  { return filepath.Join(c.dir, "pins") }

func (c *Cache) path(sum string) string { return filepath.Join(c.blobDir(), sum) }

func (c *Cache) err(err error, what string) error {
	return refuseWrap(err, CodeCache, fmt.Sprintf("artifact cache %s: %s", c.dir, what),
		"check that the folder is writable and has space, or point the app's registry_cache elsewhere (the commands use <caddy data dir>/capsule/cache/artifacts)")
}

// Get returns the bytes cached under sum, after hashing them again; an entry whose
// bytes no longer hash to its name is removed and reported as a miss.
func (c *Cache) Get(sum string) ([]byte, bool) {
	if !digest.Valid(sum) {
		return nil, false
	}
	p := c.path(sum)
	// os.ReadFile sizes its buffer from the file's size: one allocation for a large
	// archive. Entries are never larger than an archive may be (Put).
	data, err := os.ReadFile(p)
	if err != nil || int64(len(data)) > MaxArchiveFileBytes {
		return nil, false
	}
	if digest.Hex(data) != sum {
		os.Remove(p)
		return nil, false
	}
	now := time.Now()
	os.Chtimes(p, now, now) // the entry's last use, for eviction
	return data, true
}

// Has reports whether an entry for sum exists, without reading it.
func (c *Cache) Has(sum string) bool {
	return digest.Valid(sum) && fileExists(c.path(sum))
}

// Put keeps data, whose sha256 is sum, checked by the caller. It reports whether the
// entry is now in the cache: false when it is larger than the bound or fits only by
// evicting held entries.
func (c *Cache) Put(sum string, data []byte) (bool, error) {
	if digest.Valid(sum) && c.Has(sum) {
		// Kept already (content-addressed: the same bytes): a use, nothing to hash.
		now := time.Now()
		os.Chtimes(c.path(sum), now, now)
		return true, nil
	}
	if !digest.Valid(sum) || digest.Hex(data) != sum {
		return false, refuse(CodeCache, fmt.Sprintf("artifact cache %s: refused to keep bytes under sha256 %q that hash to %s", c.dir, sum, digest.Hex(data)),
			"this is a bug in the caller: report it")
	}
	size, max := int64(len(data)), c.Max()
	if size > max {
		return false, nil
	}
	// The folder may have been removed since it was opened (deleting it is allowed).
	if err := c.mkdirs(); err != nil {
		return false, err
	}
	unlock, err := atomicfile.LockDir(c.dir)
	if err != nil {
		return false, c.err(err, "cannot lock the folder")
	}
	defer unlock()
	if fileExists(c.path(sum)) {
		now := time.Now()
		os.Chtimes(c.path(sum), now, now)
		return true, nil
	}
	entries, total, err := c.scan()
	if err != nil {
		return false, err
	}
	pinned := c.pinned()
	// Oldest use first; evict until the new entry fits.
	sort.Slice(entries, func(i, j int) bool { return entries[i].used.Before(entries[j].used) })
	var victims []cacheEntry
	need := total + size - max
	for _, e := range entries {
		if need <= 0 {
			break
		}
		if pinned[e.sum] {
			continue
		}
		victims = append(victims, e)
		need -= e.size
	}
	if need > 0 {
		return false, nil // only held entries are left to evict: keep them, not this one
	}
	for _, e := range victims {
		if err := os.Remove(c.path(e.sum)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, c.err(err, "cannot evict "+e.sum)
		}
	}
	if err := atomicfile.Write(c.path(sum), data, 0o644); err != nil {
		return false, c.err(err, "cannot write "+sum)
	}
	return true, nil
}

type cacheEntry struct {
	sum  string
	size int64
	used time.Time
}

// scan lists the entries and their total size; leftover temporary files count too,
// as they take space.
func (c *Cache) scan() ([]cacheEntry, int64, error) {
	ents, err := os.ReadDir(c.blobDir())
	if err != nil {
		return nil, 0, c.err(err, "cannot list the entries")
	}
	var out []cacheEntry
	var total int64
	for _, d := range ents {
		fi, err := d.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		total += fi.Size()
		if digest.Valid(d.Name()) {
			out = append(out, cacheEntry{sum: d.Name(), size: fi.Size(), used: fi.ModTime()})
		}
	}
	return out, total, nil
}

// Usage returns the bytes and entries the cache holds now.
func (c *Cache) Usage() (int64, int, error) {
	ents, total, err := c.scan()
	return total, len(ents), err
}

// Hold keeps the entries named by sums from eviction until the returned release is
// called (a gateway holds a staged capsule's artifacts for as long as it serves it).
func (c *Cache) Hold(sums []string) (release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range sums {
		c.held[s]++
	}
	if err := c.writePinsLocked(); err != nil {
		c.dropLocked(sums)
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.dropLocked(sums)
			c.writePinsLocked() // a stale pin only keeps an entry longer
		})
	}, nil
}

func (c *Cache) dropLocked(sums []string) {
	for _, s := range sums {
		if c.held[s]--; c.held[s] <= 0 {
			delete(c.held, s)
		}
	}
}

// writePinsLocked records this process's holds in pins/<pid> for other processes
// sharing the folder; with none, the file is removed.
func (c *Cache) writePinsLocked() error {
	p := filepath.Join(c.pinDir(), strconv.Itoa(os.Getpid()))
	if len(c.held) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return c.err(err, "cannot remove "+p)
		}
		return nil
	}
	if err := c.mkdirs(); err != nil {
		return err
	}
	var b bytes.Buffer
	sums := make([]string, 0, len(c.held))
	for s := range c.held {
		sums = append(sums, s)
	}
	sort.Strings(sums)
	for _, s := range sums {
		b.WriteString(s + "\n")
	}
	if err := atomicfile.Write(p, b.Bytes(), 0o644); err != nil {
		return c.err(err, "cannot write "+p)
	}
	return nil
}

// pinned returns every sum held by a live process sharing the folder; the pin files of
// processes that are gone are removed.
func (c *Cache) pinned() map[string]bool {
	out := map[string]bool{}
	c.mu.Lock()
	for s := range c.held {
		out[s] = true
	}
	c.mu.Unlock()
	ents, _ := os.ReadDir(c.pinDir())
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		p := filepath.Join(c.pinDir(), d.Name())
		if !alive(pid) {
			os.Remove(p)
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if s := strings.TrimSpace(sc.Text()); digest.Valid(s) {
				out[s] = true
			}
		}
		f.Close()
	}
	return out
}
