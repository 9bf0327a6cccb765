package filesum

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCache(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.wasm")
	os.WriteFile(path, []byte("one"), 0o644)
	store := filepath.Join(dir, "sums")
	c, err := Open(store)
	if err != nil {
		t.Fatal(err)
	}
	// Written just now: too fresh to be recorded.
	c.Record(path, "aa", time.Now())
	if _, ok := c.Lookup(path); ok {
		t.Fatal("a file written within Margin of its reading was recorded")
	}
	// Old enough: recorded, and found again by a cache opened on the same file.
	old := time.Now().Add(-time.Hour)
	os.Chtimes(path, old, old)
	sum := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	c.Record(path, sum, time.Now().Add(2*Margin)) // ctime is now: read from later on
	if got, ok := c.Lookup(path); !ok || got != sum {
		t.Fatalf("Lookup = %q, %v", got, ok)
	}
	c.Close()
	c2, err := Open(store)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, ok := c2.Lookup(path); !ok || got != sum {
		t.Fatalf("reopened Lookup = %q, %v", got, ok)
	}
	// Replaced by a file of the same size and modification time: its identity tells.
	repl := filepath.Join(dir, "new")
	os.WriteFile(repl, []byte("two"), 0o644)
	os.Chtimes(repl, old, old)
	os.Rename(repl, path)
	if _, ok := c2.Lookup(path); ok {
		t.Fatal("a rewritten file was taken for the one recorded")
	}
}
