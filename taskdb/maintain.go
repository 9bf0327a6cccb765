package taskdb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/atomicfile"
	"github.com/capsulegate/capsulegate/taskstore"
)

// Report counts what a store holds; Check and Compact return it.
type Report struct {
	File          string `json:"file"`
	Bytes         int64  `json:"bytes"` // the file's size on disk
	Capsules      int    `json:"capsules"`
	Tasks         int    `json:"tasks"`
	Events        int    `json:"events"`
	Conversations int    `json:"conversations"`
	Turns         int    `json:"turns"`
	Pushes        int    `json:"pushes"` // push notification configs
	Pins          int    `json:"pins"`   // runtime pins (pins.go)
}

// sameRecords reports whether r and o count the same records.
func (r Report) sameRecords(o Report) bool {
	return r.Capsules == o.Capsules && r.Tasks == o.Tasks && r.Events == o.Events &&
		r.Conversations == o.Conversations && r.Turns == o.Turns && r.Pushes == o.Pushes && r.Pins == o.Pins
}

// Check walks the whole file in one read transaction: bbolt's page-level consistency
// check, then every capsule, task, journal, turn, push and runtime pin record decoded as
// Open does, every index entry and push config checked to belong to a task, and every
// pin to sit under its own key. A damaged store is refused with E-STORE-001 naming the
// file.
func (db *DB) Check() (Report, error) {
	rep := Report{File: db.path}
	err := db.view(func(r *view) error {
		var first error
		for err := range r.tx.Check() { // drain: the check reads pages until it closes the channel
			if first == nil {
				first = err
			}
		}
		if first != nil {
			return first
		}
		if err := verify(r); err != nil {
			return err
		}
		capsules := map[string]bool{}
		count := func(b bucket, n *int, each func(k []byte)) error {
			return r.scan(b, nil, nil, func(k, _ []byte) (bool, error) {
				c, ok := keyCapsule(k)
				if !ok {
					return false, fmt.Errorf("bucket %q: a key %x that names no capsule", bucketNames[b], k)
				}
				capsules[c] = true
				*n++
				if each != nil {
					each(k)
				}
				return true, nil
			})
		}
		convs := map[string]bool{}
		if err := count(bTasks, &rep.Tasks, nil); err != nil {
			return err
		}
		if r.tx.Bucket(bucketHeads) != nil {
			heads := 0
			if err := r.scan(bHeads, nil, nil, func(k, _ []byte) (bool, error) {
				heads++
				if r.get(bTasks, k) == nil {
					return false, fmt.Errorf("bucket %q: an entry %x for no task", bucketHeads, k)
				}
				return true, nil
			}); err != nil {
				return err
			}
			if heads != rep.Tasks {
				return fmt.Errorf("bucket %q: %d entries for %d tasks", bucketHeads, heads, rep.Tasks)
			}
		}
		if err := count(bEvents, &rep.Events, nil); err != nil {
			return err
		}
		if err := count(bTurns, &rep.Turns, func(k []byte) {
			if len(k) >= 8 {
				convs[string(k[:len(k)-8])] = true
			}
		}); err != nil {
			return err
		}
		if err := r.scan(bPush, nil, nil, func(k, v []byte) (bool, error) {
			p, err := decodePush(v)
			if err != nil {
				return false, err
			}
			c, _ := keyCapsule(k)
			if !bytes.Equal(k, itemKey(c, p.TaskID, p.ID)) {
				return false, fmt.Errorf("bucket %q: key %x holds the config of another key", bucketPush, k)
			}
			if r.get(bTasks, taskKey(c, p.TaskID)) == nil {
				return false, fmt.Errorf("bucket %q: a config %x for no task", bucketPush, k)
			}
			capsules[c] = true
			rep.Pushes++
			return true, nil
		}); err != nil {
			return err
		}
		if err := checkPins(r, capsules, &rep.Pins); err != nil {
			return err
		}
		rep.Capsules, rep.Conversations = len(capsules), len(convs)
		return nil
	})
	if err != nil {
		return rep, notAStore(db.path, err)
	}
	info, err := os.Stat(db.path)
	if err != nil {
		return rep, cannotOpen(db.path, err)
	}
	rep.Bytes = info.Size()
	return rep, nil
}

// keyCapsule reads the length-prefixed capsule name that starts every key.
func keyCapsule(k []byte) (string, bool) {
	n, w := binary.Uvarint(k)
	if w <= 0 || n == 0 || n > taskstore.MaxIDLen || uint64(len(k)-w) < n {
		return "", false
	}
	return string(k[w : w+int(n)]), true
}

// compactTxBytes bounds one transaction of the copy, so a large store is not copied in memory at once.
const compactTxBytes = 64 << 20

// Compact rewrites the store at path without its free pages: it takes the store's lock
// (E-STORE-002 while a gateway holds it), checks it, copies its records into a temporary
// file beside it, checks the copy holds the same records, and renames the copy over the
// original. On any failure the temporary file is removed and the original is untouched
// (E-STORE-010). It returns the reports of the file before and after.
func Compact(path string, opts Options) (before, after Report, err error) {
	if _, err := os.Stat(path); err != nil { // Open would create it
		return before, after, cannotOpen(path, err)
	}
	opts.ReadOnly = false
	src, err := Open(path, opts)
	if err != nil {
		return before, after, err
	}
	defer src.Close()
	if before, err = src.Check(); err != nil {
		return before, after, err
	}
	info, err := os.Stat(path)
	if err != nil {
		return before, after, cannotOpen(path, err)
	}
	failed := func(what string, cause error) error {
		return errs.Wrap(cause, CodeCompacting, part, "compacting the task store failed ("+what+"); the original file is untouched",
			"check free disk space and that the folder is writable, then run compact again").At(path, "")
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".compact-*")
	if err != nil {
		return before, after, failed("creating the copy", err)
	}
	tmp := f.Name()
	_ = f.Close()
	done := false
	defer func() {
		if !done {
			_ = os.Remove(tmp)
		}
	}()
	dst, err := bolt.Open(tmp, info.Mode().Perm(), &bolt.Options{Timeout: opts.LockTimeout})
	if err != nil {
		return before, after, failed("opening the copy", err)
	}
	err = guard(func() error { return bolt.Compact(dst, src.bolt, compactTxBytes) })
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return before, after, failed("writing the copy", err)
	}
	if err := os.Chmod(tmp, info.Mode().Perm()); err != nil {
		return before, after, failed("setting the copy's mode", err)
	}
	cp, err := Open(tmp, Options{ReadOnly: true, LockTimeout: opts.LockTimeout})
	if err != nil {
		return before, after, failed("the copy does not open", err)
	}
	after, err = cp.Check()
	_ = cp.Close()
	if err != nil {
		return before, after, failed("the copy does not check", err)
	}
	if !after.sameRecords(before) {
		return before, after, failed(fmt.Sprintf("the copy holds %+v, the original %+v", after, before), errors.New("record counts differ"))
	}
	if err := os.Rename(tmp, path); err != nil {
		return before, after, failed("replacing the original", err)
	}
	done = true
	_ = atomicfile.SyncDir(filepath.Dir(path)) // make the rename durable
	after.File = path
	return before, after, nil
}
