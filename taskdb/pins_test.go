package taskdb

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/capsulegate/capsulegate/taskstore"
)

func runtimePin(capsule, name, version string) taskstore.RuntimePin {
	return taskstore.RuntimePin{Capsule: capsule, Name: name, Version: version, SHA256: strings.Repeat("ab", 32),
		Registry: "hub", Role: "tool", Implementation: "wasm", Origin: taskstore.OriginRuntime, Pulled: t0, By: "t-1"}
}

func putPin(t *testing.T, db *DB, p taskstore.RuntimePin) {
	t.Helper()
	if err := db.PutRuntimePin(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

func pinList(t *testing.T, db *DB, capsule string) string {
	t.Helper()
	ps, err := db.RuntimePins(context.Background(), capsule)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range ps {
		out = append(out, p.Name+"@"+p.Version)
	}
	return strings.Join(out, " ")
}

// TestPinsCrashCopy: a pin is durable when PutRuntimePin returns — in the log before its
// checkpoint, in the file after — and a copy taken then, what a crash leaves, holds it.
func TestPinsCrashCopy(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"in the log", Options{CheckpointEvery: time.Hour}},
		{"checkpointed", Options{CheckpointBytes: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db := open(t, filepath.Join(dir, "tasks.db"), tc.opts)
			putPin(t, db, runtimePin("hello", "jq", "1.7.1"))
			putPin(t, db, runtimePin("hello", "gone", "1.0.0"))
			if had, err := db.DeleteRuntimePin(context.Background(), "hello", "gone"); !had || err != nil {
				t.Fatalf("DeleteRuntimePin: %v, %v", had, err)
			}
			must(t, db.enqueue(func(*view) error { return nil })) // no checkpoint while copying
			cp := filepath.Join(dir, "copy.db")
			copyFile(t, db.Path(), cp)
			copyFile(t, db.Path()+logSuffix, cp+logSuffix)
			ro := open(t, cp, Options{ReadOnly: true})
			if got := pinList(t, ro, "hello"); got != "jq@1.7.1" {
				t.Fatalf("read-only copy: %q", got)
			}
			if r, err := ro.Check(); err != nil || r.Pins != 1 {
				t.Fatalf("Check of the copy: %+v, %v", r, err)
			}
			_ = ro.Close()
			if got := pinList(t, open(t, cp, Options{}), "hello"); got != "jq@1.7.1" {
				t.Fatalf("copy opened writable: %q", got)
			}
		})
	}
}

// TestPinsOutliveTasks: pins belong to no task; deleting or evicting every task leaves
// them, Check counts them (and their capsules) and Compact keeps them.
func TestPinsOutliveTasks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	fill(t, path, 3)
	db := open(t, path, Options{})
	putPin(t, db, runtimePin("hello", "jq", "1.7.1"))
	putPin(t, db, runtimePin("pins-only", "rg", "14.0.0"))
	must(t, db.DeleteTask("hello", "a0"))
	if _, err := db.Evict("hello", t0.Add(time.Hour), 0, nil); err != nil {
		t.Fatal(err)
	}
	if got := pinList(t, db, "hello"); got != "jq@1.7.1" {
		t.Fatalf("pins after the tasks went: %q", got)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, after, err := Compact(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if before.Pins != 2 || after.Pins != 2 || before.Capsules != 3 {
		t.Fatalf("Compact: before %+v, after %+v; want 2 pins, 3 capsules (hello, other, pins-only)", before, after)
	}
	ro := open(t, path, Options{ReadOnly: true})
	if got := pinList(t, ro, "pins-only"); got != "rg@14.0.0" {
		t.Fatalf("pins after Compact: %q", got)
	}
	wantCode(t, ro.PutRuntimePin(context.Background(), runtimePin("hello", "x", "1")), CodeReadOnly)
	_, err = ro.DeleteRuntimePin(context.Background(), "hello", "jq")
	wantCode(t, err, CodeReadOnly)
}

// TestStoreBeforePins: a store written before runtime pins (no "pins" bucket) reads
// read-only as holding none and checks clean; a writable open adds the bucket.
func TestStoreBeforePins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	fill(t, path, 1)
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketPins) })
	_ = bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	ro := open(t, path, Options{ReadOnly: true})
	if got := pinList(t, ro, "hello"); got != "" {
		t.Fatalf("pins of a store without the bucket: %q", got)
	}
	if r, err := ro.Check(); err != nil || r.Pins != 0 || r.Tasks != 2 {
		t.Fatalf("Check of a store without the bucket: %+v, %v", r, err)
	}
	_ = ro.Close()
	db := open(t, path, Options{})
	putPin(t, db, runtimePin("hello", "jq", "1.7.1"))
	if got := pinList(t, db, "hello"); got != "jq@1.7.1" {
		t.Fatalf("pins once the bucket was added: %q", got)
	}
}

// TestCheckFindsAStrayPin: a pin under another pin's key, or one that does not decode,
// is damage Check (and Open) reports.
func TestCheckFindsAStrayPin(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  []byte
		val  []byte
	}{
		{"under another key", pinKey("hello", "jq"), encodePin(runtimePin("hello", "rg", "1"))},
		{"of a later version", pinKey("hello", "jq"), append([]byte{pinVersion + 1}, encodePin(runtimePin("hello", "jq", "1"))[1:]...)},
		{"cut short", pinKey("hello", "jq"), encodePin(runtimePin("hello", "jq", "1"))[:10]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tasks.db")
			db := open(t, path, Options{})
			must(t, db.PutTask(task("a", 0)))
			_ = db.Close()
			bdb, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = bdb.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketPins).Put(tc.key, tc.val) })
			_ = bdb.Close()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := decodePin(tc.val); err == nil {
				ro := open(t, path, Options{ReadOnly: true})
				_, err = ro.Check()
				wantCode(t, err, taskstore.CodeNotAStore)
				return
			}
			_, err = Open(path, Options{ReadOnly: true})
			wantCode(t, err, taskstore.CodeNotAStore)
		})
	}
}

// TestPinsContext: a write or read whose context is done returns its error, wrapped.
func TestPinsContext(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := db.PutRuntimePin(ctx, runtimePin("hello", "jq", "1")); !errors.Is(err, context.Canceled) {
		t.Errorf("PutRuntimePin with a done context: %v", err)
	}
	if _, err := db.RuntimePins(ctx, "hello"); !errors.Is(err, context.Canceled) {
		t.Errorf("RuntimePins with a done context: %v", err)
	}
	if _, err := db.DeleteRuntimePin(ctx, "hello", "jq"); !errors.Is(err, context.Canceled) {
		t.Errorf("DeleteRuntimePin with a done context: %v", err)
	}
}

// FuzzDecodePin: the pin decoder never panics, and what it accepts encodes back to the
// same bytes.
func FuzzDecodePin(f *testing.F) {
	f.Add(encodePin(runtimePin("hello", "jq", "1.7.1")))
	f.Add(encodePin(taskstore.RuntimePin{}))
	f.Add([]byte{pinVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePin(b)
		if err != nil {
			return
		}
		if again := encodePin(p); !bytes.Equal(again, b) {
			t.Fatalf("pin %x decoded to %+v, encodes as %x", b, p, again)
		}
	})
}
