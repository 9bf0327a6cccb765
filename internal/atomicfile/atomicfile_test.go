package atomicfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestWriteReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := Write(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Hammer: concurrent writers of distinct full contents; a reader never sees a mix.
	const n = 16
	contents := make([][]byte, n)
	for i := range contents {
		contents[i] = bytes.Repeat([]byte{byte('a' + i)}, 64<<10)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			if err := Write(p, contents[i], 0o644); err != nil {
				t.Error(err)
			}
		}(i)
	}
	close(start)
	wg.Wait()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	whole := false
	for _, c := range contents {
		if bytes.Equal(got, c) {
			whole = true
		}
	}
	if !whole {
		t.Fatalf("final file is not one writer's content (len %d)", len(got))
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temp files left behind: %v", entries)
	}
}

func TestWriteFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	err := Write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o644)
	if err == nil {
		t.Fatal("write into a missing folder succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatal(fmt.Sprint("left behind: ", entries))
	}
}
