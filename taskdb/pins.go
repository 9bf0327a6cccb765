package taskdb

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/capsulegate/capsulegate/taskstore"
)

// Runtime pins (taskstore.Pins) live in the "pins" bucket, keyed enc(capsule)+enc(name)
// like a task, so a capsule's pins sit together. They belong to no task: DeleteTask and
// Evict leave them. Their writes go through the committer like every write, and a method
// returns once the commit holding its write is on disk.

// pinVersion is the layout of a pin record.
const pinVersion = 1

func pinKey(capsule, name string) []byte { return taskKey(capsule, name) }

// encodePin writes every field but the capsule, which the key holds.
func encodePin(p taskstore.RuntimePin) []byte {
	b := []byte{pinVersion}
	for _, s := range []string{p.Name, p.Version, p.SHA256, p.Registry, p.Role, p.Implementation, p.Platform, p.Origin} {
		b = appendString(b, s)
	}
	b = appendTime(b, p.Pulled)
	return appendString(b, p.By)
}

// decodePin reads a value written by encodePin; the capsule is the caller's to fill.
func decodePin(b []byte) (taskstore.RuntimePin, error) {
	r := &reader{b: b}
	r.version(pinVersion)
	var p taskstore.RuntimePin
	p.Name, p.Version, p.SHA256, p.Registry = r.id(), r.id(), r.id(), r.id()
	p.Role, p.Implementation, p.Platform, p.Origin = r.id(), r.id(), r.id(), r.id()
	p.Pulled = r.time()
	p.By = r.id()
	if err := r.end(); err != nil {
		return taskstore.RuntimePin{}, err
	}
	return p, nil
}

// RuntimePins returns the capsule's runtime pins in name order.
func (db *DB) RuntimePins(ctx context.Context, capsule string) ([]taskstore.RuntimePin, error) {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("taskdb: reading the runtime pins of %s: %w", capsule, err)
	}
	var out []taskstore.RuntimePin
	err := db.view(func(r *view) error {
		return r.scan(bPins, nil, appendString(nil, capsule), func(_, v []byte) (bool, error) {
			p, err := decodePin(v)
			p.Capsule = capsule
			out = append(out, p)
			return err == nil, err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("taskdb: reading the runtime pins of %s: %w", capsule, err)
	}
	// Keys put shorter names first (their length leads); callers get name order.
	slices.SortFunc(out, func(a, b taskstore.RuntimePin) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// PutRuntimePin creates or replaces the pin (p.Capsule, p.Name), once
// taskstore.CheckRuntimePin passes it, and returns once it is on disk.
func (db *DB) PutRuntimePin(ctx context.Context, p taskstore.RuntimePin) error {
	if err := taskstore.CheckRuntimePin(p); err != nil {
		return err
	}
	key, v := pinKey(p.Capsule, p.Name), encodePin(p)
	if err := db.wait(ctx, func(w *view) error { w.put(bPins, key, v); return nil }); err != nil {
		return fmt.Errorf("taskdb: writing runtime pin %s/%s: %w", p.Capsule, p.Name, err)
	}
	return nil
}

// DeleteRuntimePin removes the pin (capsule, name), reporting whether there was one, and
// returns once the removal is on disk.
func (db *DB) DeleteRuntimePin(ctx context.Context, capsule, name string) (bool, error) {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return false, err
	}
	if err := taskstore.CheckPinName(name); err != nil {
		return false, err
	}
	key := pinKey(capsule, name)
	had := false
	err := db.wait(ctx, func(w *view) error {
		if had = w.get(bPins, key) != nil; had {
			w.del(bPins, key)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("taskdb: deleting runtime pin %s/%s: %w", capsule, name, err)
	}
	return had, nil
}

// wait queues apply, hurries the committer and waits for the commit, or for ctx: a write
// ctx gave up on may still be committed.
func (db *DB) wait(ctx context.Context, apply func(*view) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ch := db.enqueue(apply)
	db.Hurry()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkPins counts the pins Check walks, each decoded and under its own key, adding their
// capsules to capsules.
func checkPins(r *view, capsules map[string]bool, n *int) error {
	return r.scan(bPins, nil, nil, func(k, v []byte) (bool, error) {
		p, err := decodePin(v)
		if err != nil {
			return false, fmt.Errorf("bucket %q key %x: %w", bucketPins, k, err)
		}
		c, ok := keyCapsule(k)
		if !ok || !bytes.Equal(k, pinKey(c, p.Name)) {
			return false, fmt.Errorf("bucket %q: key %x holds the pin of another key", bucketPins, k)
		}
		capsules[c] = true
		*n++
		return true, nil
	})
}

var _ taskstore.Pins = (*DB)(nil)
