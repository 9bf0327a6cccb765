package taskdb

import (
	"bytes"

	"github.com/capsulegate/capsulegate/taskstore"
)

// A task's blobs live under its key in the "blobs" bucket, so DeleteTask and the
// evictions remove them with the task.

// PutBlob stores data as the blob (capsule, taskID, id), replacing one of the same id.
func (db *DB) PutBlob(capsule, taskID, id string, data []byte) <-chan error {
	if err := taskstore.CheckItemIDs(capsule, taskID, "blob id", id); err != nil {
		return taskstore.Failed(err)
	}
	key, v := itemKey(capsule, taskID, id), bytes.Clone(data)
	if v == nil {
		v = []byte{} // an empty blob is a blob
	}
	return db.enqueue(func(w *view) error { w.put(bBlob, key, v); return nil })
}

// Blob returns the blob (capsule, taskID, id) and whether the store holds it.
func (db *DB) Blob(capsule, taskID, id string) ([]byte, bool, error) {
	if err := taskstore.CheckItemIDs(capsule, taskID, "blob id", id); err != nil {
		return nil, false, err
	}
	var out []byte
	found := false
	err := db.view(func(r *view) error {
		if v := r.get(bBlob, itemKey(capsule, taskID, id)); v != nil {
			out, found = bytes.Clone(v), true
		}
		return nil
	})
	return out, found, err
}
