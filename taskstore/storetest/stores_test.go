package storetest_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/capsulegate/capsulegate/internal/testkit/pgtest"
	"github.com/capsulegate/capsulegate/pgstore"
	"github.com/capsulegate/capsulegate/taskdb"
	"github.com/capsulegate/capsulegate/taskstore"
	"github.com/capsulegate/capsulegate/taskstore/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.CloseShared()
	os.Exit(code)
}

// testKey is the store_key of the PostgreSQL stores.
const testKey = "0123456789abcdef0123456789abcdef-test"

// TestConformance runs the one conformance table against both stores the gateway
// ships: the embedded bbolt file (taskdb) and PostgreSQL (pgstore, on a real server this
// test starts; under CI=true a missing PostgreSQL fails it).
func TestConformance(t *testing.T) {
	for _, b := range []struct {
		name    string
		backend func(t *testing.T) storetest.Backend
	}{
		{"bbolt", bboltBackend},
		{"postgres", postgresBackend},
	} {
		t.Run(b.name, func(t *testing.T) { storetest.Run(t, b.backend(t)) })
	}
}

func bboltBackend(*testing.T) storetest.Backend {
	file := func(place string) string { return filepath.Join(place, "tasks.db") }
	return storetest.Backend{
		Open:  func(place string) (taskstore.Store, error) { return taskdb.Open(file(place), taskdb.Options{}) },
		Close: func(s taskstore.Store) error { return s.(*taskdb.DB).Close() },
		Damage: func(t *testing.T, place string) {
			f, err := os.OpenFile(file(place), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			junk := make([]byte, 8192) // both of bbolt's meta pages
			for i := range junk {
				junk[i] = byte(i * 7)
			}
			if _, err := f.WriteAt(junk, 0); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// postgresBackend keeps each place's store in a database of its own on the shared cluster.
func postgresBackend(t *testing.T) storetest.Backend {
	pgtest.Shared(t)
	var mu sync.Mutex
	dsns := map[string]string{}
	dsn := func(place string) string {
		mu.Lock()
		defer mu.Unlock()
		if d, ok := dsns[place]; ok {
			return d
		}
		d := pgtest.NewDatabase(t)
		dsns[place] = d
		return d
	}
	return storetest.Backend{
		Open: func(place string) (taskstore.Store, error) {
			return pgstore.Open(context.Background(), dsn(place), pgstore.Options{PushKey: testKey})
		},
		Close: func(s taskstore.Store) error { return s.(*pgstore.Store).Close() },
		// Another program's table under the store's marker table's name.
		Damage: func(t *testing.T, place string) {
			conn, err := pgx.Connect(context.Background(), dsn(place))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(context.Background(), `DROP TABLE capsulegate_meta; CREATE TABLE capsulegate_meta (k int, v bytea); INSERT INTO capsulegate_meta VALUES (1, '\x00ff')`); err != nil {
				t.Fatal(err)
			}
		},
	}
}
