// Package taskdb keeps A2A tasks (with the principal that created each), each task's event
// journal, its push notification configs and the turns of threaded conversations in one
// file per gateway, so that tasks outlive a restart.
//
// It is built on bbolt: pure Go with no cgo, one file, one writer with readers that see a
// consistent snapshot (MVCC) and never block it, crash-safe because a commit writes new
// copy-on-write pages and fsyncs them before the meta page that points at them, and a
// small, well-kept codebase (etcd's). bbolt pays two fsyncs and a write per dirty page for
// every write transaction, so a commit here is instead one record appended to a log beside
// the file (log.go: one write, one fsync), and one committer goroutine gathers the writes
// of many callers into each record (group commit). The committed writes stay in memory,
// laid over the file for every read (view.go), until a checkpoint writes them into the
// file in one bbolt transaction and empties the log.
//
// Writes (PutTask, Append, AddTurn, DeleteTask, PutPush, SetDelivered, DeletePush) return
// at once with a channel that receives exactly one value: nil once the commit holding the
// write is on disk, or the error that failed that commit, which every write of the batch
// receives; PutPush alone may instead receive its own refusal (E-STORE-011, the task is
// not in the store), which writes nothing and fails no other write. Receiving is
// optional; a caller that must not answer a client before the write is durable receives
// first. Ids are checked before anything is queued. Reads see every write whose channel
// has yielded nil.
//
// Records are opaque to the store except for their keys. Client-given ids are data: they
// are length-prefixed into keys, never used as file names, and refused over taskstore.MaxIDLen bytes.
package taskdb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/atomicfile"
	"github.com/capsulegate/capsulegate/taskstore"
)

const part = "taskdb"

// Options tune a store; the zero value means every default.
type Options struct {
	LockTimeout time.Duration // how long Open waits for another process's lock; default 1 s
	GroupWindow time.Duration // longest the committer gathers writes after the first while no caller waits (Hurry); default 2 ms
	MaxBatch    int           // most writes in one commit; default 1000
	MaxTurns    int           // turns kept per conversation, oldest dropped; default 100
	// CheckpointBytes and CheckpointEvery bound the log: once it holds that many bytes,
	// or that long after the first write since the last checkpoint, the committer writes
	// the log's writes into the bbolt file and empties it; defaults 16 MiB and 1 s.
	CheckpointBytes int
	CheckpointEvery time.Duration
	// ReadOnly opens an existing store for reading only, under a shared lock that other
	// readers share and a writer's exclusive lock excludes; writes are refused with
	// E-STORE-009. A missing file is refused with E-STORE-004 instead of created.
	ReadOnly bool
}

func (o Options) withDefaults() (Options, error) {
	if o.LockTimeout < 0 || o.GroupWindow < 0 || o.MaxBatch < 0 || o.MaxTurns < 0 || o.CheckpointBytes < 0 || o.CheckpointEvery < 0 {
		return o, errs.New(CodeOption, part, fmt.Sprintf("a negative option: %+v", o),
			"write a positive value, or zero for the default")
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = time.Second
	}
	if o.GroupWindow == 0 {
		o.GroupWindow = 2 * time.Millisecond
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 1000
	}
	if o.MaxTurns == 0 {
		o.MaxTurns = 100
	}
	if o.CheckpointBytes == 0 {
		o.CheckpointBytes = 16 << 20
	}
	if o.CheckpointEvery == 0 {
		o.CheckpointEvery = time.Second
	}
	return o, nil
}

// Stats counts the committer's work since Open.
type Stats struct {
	Ops         uint64 // writes committed or failed
	Commits     uint64 // batches committed, each one log record (one write and one fsync) unless it wrote nothing
	Checkpoints uint64 // bbolt transactions that moved the log's writes into the file
}

// DB is an open store. Its methods are safe for concurrent use.
type DB struct {
	path string
	opts Options
	bolt *bolt.DB

	mu     sync.RWMutex // held for reading while enqueueing, for writing by Close
	closed bool
	queue  chan *op
	hurry  chan struct{} // a caller waits for a write: commit without waiting out the window
	done   chan struct{} // closed when the committer has exited

	// snap is the writes in memory that readers see; ckptMu pairs it with a bbolt
	// transaction (held for reading while a view is made, for writing while a checkpoint
	// empties it).
	snap   atomic.Pointer[mem]
	ckptMu sync.RWMutex

	// The committer's own: the writes in memory it writes on (cur), a clone of them as
	// of the last durable batch (base), the log, the record of the batch, the log epoch
	// its records carry, and the failure that stops all writes (broken).
	cur    *mem
	base   *mem
	log    *wlog
	rec    record
	epoch  uint64
	broken error

	// ckptErr is the last checkpoint's failure, nil once one succeeds; the committer's
	// too (Open reads it before the committer starts, Close after it ended).
	ckptErr                   error
	ops, commits, checkpoints atomic.Uint64
}

// Bucket names; "format" holds formatKey, the marker that makes a bbolt file ours.
var (
	bucketFormat = []byte("format")
	bucketTasks  = []byte("tasks")
	bucketEvents = []byte("events")
	bucketTurns  = []byte("turns")
	bucketHeads  = []byte("heads") // the index of tasks: enc(capsule)+enc(id) → head
	bucketPush   = []byte("push")  // enc(capsule)+enc(task id)+enc(config id) → push config
	bucketBlob   = []byte("blobs") // enc(capsule)+enc(task id)+enc(blob id) → the blob's bytes
	bucketPins   = []byte("pins")  // enc(capsule)+enc(artifact name) → runtime pin (pins.go)
	// bucketBudgets: enc(budget key) → a principal's token count of its newest window
	// (budgets.go).
	bucketBudgets = []byte("budgets")
	formatKey     = []byte("capsulegate.taskdb")
)

// formatVersion is the layout of buckets and keys; a later release that changes it
// bumps it, and this one refuses the file instead of misreading it. Adding a bucket (the
// index, the push configs) does not change it: an earlier release ignores the bucket,
// and refuses by record version any record whose layout it does not know.
const formatVersion = 1

// Open opens the store at path, creating it (mode 0600) if absent. A file that is not a
// store of this release is refused with E-STORE-001, one locked by another process with
// E-STORE-002 once opts.LockTimeout has passed.
func Open(path string, opts Options) (*DB, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.ReadOnly {
		// bbolt would try to initialise a missing or empty file, which read-only it cannot.
		info, err := os.Stat(path)
		if err != nil {
			return nil, cannotOpen(path, err)
		}
		if info.Mode().IsRegular() && info.Size() == 0 {
			return nil, notAStore(path, errors.New("the file is empty"))
		}
	}
	if err := checkFile(path); err != nil {
		return nil, err
	}
	bdb, err := openBolt(path, opts.LockTimeout, opts.ReadOnly)
	if err != nil {
		return nil, err
	}
	if err := prepare(bdb, path, opts.ReadOnly); err != nil {
		_ = bdb.Close()
		return nil, err
	}
	// The check read every page of the memory-mapped file into the process's resident
	// set; unmapping it and opening again leaves them to the page cache, so a gateway
	// holding many finished tasks keeps resident only what it reads afterwards.
	if err := bdb.Close(); err != nil {
		return nil, cannotOpen(path, err)
	}
	if bdb, err = openBolt(path, opts.LockTimeout, opts.ReadOnly); err != nil {
		return nil, err
	}
	db := &DB{path: path, opts: opts, bolt: bdb, queue: make(chan *op, opts.MaxBatch), hurry: make(chan struct{}, 1), done: make(chan struct{})}
	if err := db.openLog(); err != nil {
		_ = bdb.Close()
		return nil, err
	}
	if opts.ReadOnly {
		close(db.done) // no committer
	} else {
		go db.commitLoop()
	}
	return db, nil
}

// openLog lays the log's records over the file: the records of epochs after the one the
// file holds (a crash came before their checkpoint). Writable, it checkpoints them at
// once and keeps the log open for the committer; read-only, it only reads them.
func (db *DB) openLog() error {
	db.cur = newMem()
	var done uint64
	if err := db.read(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketFormat).Get(epochKey); len(v) == 8 {
			done = binary.BigEndian.Uint64(v)
		}
		return nil
	}); err != nil {
		return notAStore(db.path, err)
	}
	db.epoch = done + 1
	path := db.path + logSuffix
	end, existed, err := readLog(path, func(epoch uint64, b bucket, del bool, k, v []byte) {
		if epoch <= done {
			return // a record the file holds: its log was not emptied before a crash
		}
		db.epoch = max(db.epoch, epoch)
		db.cur.set(b, entry{key: string(k), val: bytes.Clone(v), del: del})
		db.cur.bytes += len(k) + len(v)
	})
	if err != nil {
		return err
	}
	if err := verifyMem(db.cur); err != nil {
		return notAStore(path, err)
	}
	db.publish()
	if db.opts.ReadOnly {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return cannotOpen(path, err)
	}
	if !existed {
		// A log made just now: its name must survive a power loss as its records do.
		if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
			_ = f.Close()
			return cannotOpen(path, err)
		}
	}
	db.log = &wlog{f: f, size: end}
	db.checkpoint()
	if db.ckptErr != nil {
		_ = f.Close()
		return cannotOpen(db.path, db.ckptErr)
	}
	if db.log.size > 0 { // nothing to checkpoint, yet a torn record or an old epoch's
		if err := db.log.reset(); err != nil {
			_ = f.Close()
			return cannotOpen(path, err)
		}
	}
	return nil
}

func openBolt(path string, timeout time.Duration, readOnly bool) (bdb *bolt.DB, err error) {
	// bbolt panics on some damaged pages while opening; keep its file to close it then,
	// so that the lock it holds is not left to the garbage collector.
	var file *os.File
	openFile := func(name string, flag int, mode os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, mode)
		file = f
		return f, err
	}
	err = guard(func() error {
		var err error
		bdb, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, OpenFile: openFile, ReadOnly: readOnly})
		return err
	})
	if errs.Code(err) == CodeBadRecord {
		if file != nil {
			_ = file.Close()
		}
		return nil, notAStore(path, err)
	}
	switch {
	case err == nil && !sameFile(path, file):
		// Compact renamed a new file over path while this one waited for the old file's
		// lock; writing to the old one would lose the writes. Open the new one.
		_ = bdb.Close()
		return openBolt(path, timeout, readOnly)
	case err == nil:
		return bdb, nil
	case errors.Is(err, berrors.ErrTimeout):
		e := errs.Wrap(err, CodeLocked, part, fmt.Sprintf("another process holds the task store locked (waited %s)", timeout),
			"stop the other gateway, or give each gateway its own store file")
		return nil, e.At(path, "")
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrChecksum):
		return nil, notAStore(path, err)
	default:
		return nil, cannotOpen(path, err)
	}
}

// sameFile reports whether path still names the open file f.
func sameFile(path string, f *os.File) bool {
	if f == nil {
		return true
	}
	a, err1 := os.Stat(path)
	b, err2 := f.Stat()
	return err1 != nil || err2 != nil || os.SameFile(a, b)
}

func notAStore(path string, cause error) error {
	e := errs.Wrap(cause, taskstore.CodeNotAStore, part, "the file is not a task store of this release (damaged, truncated, or another format)",
		"move the file aside (the gateway then starts an empty store) or restore it from a backup")
	return e.At(path, "")
}

func cannotOpen(path string, cause error) error {
	e := errs.Wrap(cause, CodeOpen, part, "the task store file cannot be opened or created",
		"check that the folder exists and that the gateway's user may read and write the file")
	return e.At(path, "")
}

// prepare marks an empty bbolt file as ours, or checks that a non-empty one is ours and
// that every record in it decodes, so that damage is found at Open and not mid-request.
// A read-only store is never marked: an unmarked one is refused.
func prepare(bdb *bolt.DB, path string, readOnly bool) error {
	empty := true
	err := guard(func() error {
		return bdb.View(func(tx *bolt.Tx) error {
			return tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
		})
	})
	if err != nil {
		return notAStore(path, err)
	}
	if empty && !readOnly {
		err := bdb.Update(func(tx *bolt.Tx) error {
			for _, name := range [][]byte{bucketTasks, bucketEvents, bucketTurns, bucketHeads, bucketPush, bucketBlob, bucketPins, bucketBudgets} {
				if _, err := tx.CreateBucket(name); err != nil {
					return err
				}
			}
			b, err := tx.CreateBucket(bucketFormat)
			if err != nil {
				return err
			}
			return b.Put(formatKey, []byte{formatVersion})
		})
		if err != nil {
			return cannotOpen(path, err)
		}
		return nil
	}
	if err := guard(func() error {
		return bdb.View(func(tx *bolt.Tx) error { return verify(&view{tx: tx, m: newMem()}) })
	}); err != nil {
		return notAStore(path, err)
	}
	if !readOnly {
		if err := bdb.Update(func(tx *bolt.Tx) error {
			if err := indexTasks(tx); err != nil {
				return err
			}
			// A store from before push configs, blobs, runtime pins or budgets; read-only, an absent
			// bucket reads as empty.
			for _, b := range [][]byte{bucketPush, bucketBlob, bucketPins, bucketBudgets} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return cannotOpen(path, err)
		}
	}
	return nil
}

// indexTasks builds the index of tasks of a store written before it existed, every
// task marked unfinished (its record then tells).
func indexTasks(tx *bolt.Tx) error {
	if tx.Bucket(bucketHeads) != nil {
		return nil
	}
	heads, err := tx.CreateBucket(bucketHeads)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketTasks).ForEach(func(k, v []byte) error {
		t, err := decodeTask(v)
		if err != nil {
			return err
		}
		return heads.Put(k, encodeHead(t))
	})
}

// verify checks the format marker and decodes every record the view reads.
func verify(r *view) error {
	f := r.tx.Bucket(bucketFormat)
	if f == nil {
		return errors.New("no capsulegate task store marker")
	}
	if v := f.Get(formatKey); len(v) != 1 || v[0] != formatVersion {
		return fmt.Errorf("store format %v, this release reads format %d", v, formatVersion)
	}
	for b := range nBuckets {
		name := bucketNames[b]
		if r.tx.Bucket(name) == nil && b != bHeads && b != bPush && b != bBlob && b != bPins && b != bBudgets {
			return fmt.Errorf("bucket %q missing", name)
		}
		// A store from before the index, push configs, blobs or runtime pins lacks the
		// bucket: Open adds it.
		if err := r.scan(b, nil, nil, func(k, v []byte) (bool, error) {
			if err := decoders[b](v); err != nil {
				return false, fmt.Errorf("bucket %q key %x: %w", name, k, err)
			}
			return true, nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// decoders decode one record of each bucket: what verify checks in the file, and
// verifyMem in the writes Open reads from the log.
var decoders = [nBuckets]func([]byte) error{
	bTasks:  func(v []byte) error { _, err := decodeTask(v); return err },
	bEvents: func(v []byte) error { _, err := decodeEvent(v); return err },
	bTurns:  func(v []byte) error { _, err := decodeTurn(v); return err },
	bHeads:  func(v []byte) error { _, err := decodeHead(v); return err },
	bPush:   func(v []byte) error { _, err := decodePush(v); return err },
	bBlob:   func([]byte) error { return nil }, // bytes the store does not read
	bPins:   func(v []byte) error { _, err := decodePin(v); return err },
	bBudgets: func(v []byte) error {
		_, _, err := decodeBudget(v)
		return err
	},
}

// verifyMem decodes every write in m, so that damage in the log is found at Open, as
// verify finds it in the file, not mid-request after a checkpoint moved it there.
func verifyMem(m *mem) error {
	var err error
	for b, t := range m.trees {
		t.Ascend(func(e entry) bool {
			if !e.del {
				if derr := decoders[b](e.val); derr != nil {
					err = fmt.Errorf("bucket %q key %x: %w", bucketNames[b], e.key, derr)
				}
			}
			return err == nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Close stops taking writes, commits those already queued, and closes the file.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil
	}
	db.closed = true
	close(db.queue)
	db.mu.Unlock()
	<-db.done
	var err error
	if db.log != nil {
		err = db.log.f.Close()
	}
	if db.ckptErr != nil && db.broken == nil {
		err = errors.Join(err, db.ckptErr) // the log keeps the writes; the next Open checkpoints them
	}
	return errors.Join(err, db.bolt.Close())
}

// Stats returns the committer's counters.
func (db *DB) Stats() Stats {
	return Stats{Ops: db.ops.Load(), Commits: db.commits.Load(), Checkpoints: db.checkpoints.Load()}
}

// Path returns the store's file.
func (db *DB) Path() string { return db.path }
