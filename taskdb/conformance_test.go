package taskdb_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/capsulegate/capsulegate/taskdb"
	"github.com/capsulegate/capsulegate/taskstore"
	"github.com/capsulegate/capsulegate/taskstore/storetest"
)

// TestConformance runs the taskstore conformance table against the bbolt store.
func TestConformance(t *testing.T) {
	file := func(place string) string { return filepath.Join(place, "tasks.db") }
	storetest.Run(t, storetest.Backend{
		Open:  func(place string) (taskstore.Store, error) { return taskdb.Open(file(place), taskdb.Options{}) },
		Close: func(s taskstore.Store) error { return s.(*taskdb.DB).Close() },
		// Both meta pages (bbolt's first two 4 KiB pages) overwritten, as another
		// program writing over the file would.
		Damage: func(t *testing.T, place string) {
			f, err := os.OpenFile(file(place), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			junk := make([]byte, 8192)
			for i := range junk {
				junk[i] = byte(i * 7)
			}
			if _, err := f.WriteAt(junk, 0); err != nil {
				t.Fatal(err)
			}
		},
	})
}
