// Package taskstore is the contract between the A2A server and the store that keeps its
// tasks beyond a restart: the records (Task, Head, Event, Push), the Store interface any
// implementation provides, and the rules every implementation keeps, which
// taskstore/storetest checks. taskdb (one bbolt file) is the implementation this
// repository ships; a2a.Config.Store takes any.
//
// Records are opaque to a store except for their keys and index fields: the A2A server
// encodes a task, an event, a turn or a push config into Data, and the store keeps the
// bytes. Writes return at once with a channel that receives exactly one value: nil once
// the write is durable, or the error that failed it. A caller that must not answer a
// client before its write is durable receives first; receiving is optional. A store
// commits its writes in the order they were queued, and reads see every write whose
// channel has yielded nil.
package taskstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/capsulegate/capsulegate/errs"
)

// Task is one A2A task as the store keeps it; Data is the caller's encoding of the task.
type Task struct {
	Capsule   string
	ID        string
	ContextID string
	Updated   time.Time
	// Done marks a finished task in the store's index (Heads), so that a start reads
	// the records of unfinished tasks only; false is always safe (read the record).
	Done bool
	// State and Since are the caller's name of the task's state and when it entered it,
	// kept in the index for listings that filter on them; the store does not read them.
	State string
	Since time.Time
	// Owner is the principal that created the task ("": anonymous), kept in the index
	// too so that listings filter by owner without reading records.
	Owner string
	// Digest and Mark are kept by a Fleet store only: the digest of the capsule version
	// that admitted the task (written once, by the write that adds the task), and the mark
	// its run left on its context's folder ("" for none; docs/operators.md "Running
	// several gateways").
	Digest, Mark string
	// Claimed, on the write that adds the task to a Fleet store, makes this replica its
	// runner: a task it admits into a new context and runs at once, without a claim.
	Claimed bool
	Data    []byte
}

// Head is a task's entry in the store's index: what a start or an eviction needs
// without reading the task's record.
type Head struct {
	ID        string
	ContextID string
	Updated   time.Time
	Done      bool
	State     string
	Since     time.Time
	Owner     string
}

// HeadOf is the index entry of t.
func HeadOf(t Task) Head {
	return Head{ID: t.ID, ContextID: t.ContextID, Updated: t.Updated, Done: t.Done, State: t.State, Since: t.Since, Owner: t.Owner}
}

// Event is one entry of a task's journal; events are read back in Seq order.
type Event struct {
	TaskID string
	Seq    uint64
	Data   []byte
}

// Push is one push-notification config of a task: the caller's encoding of the config and
// the seq of the newest journal event delivered to it (or given up on).
type Push struct {
	TaskID    string
	ID        string
	Data      []byte
	Delivered uint64
}

// Store keeps the tasks of any number of capsules, each under its capsule's name. Its
// methods are safe for concurrent use. Every id (capsule, task, context, push config,
// owner, state) is checked with CheckID (a task record with CheckTask) before anything is
// written or read.
type Store interface {
	// PutTask stores t, replacing the task with the same capsule and id, and its head.
	PutTask(t Task) <-chan error
	// Append adds events to their tasks' journals; an event with the Seq of a stored one
	// replaces it.
	Append(capsule string, events ...Event) <-chan error
	// AddTurn appends item to the turns of the conversation contextID; a store may keep
	// only the newest turns of a conversation (at least 100).
	AddTurn(capsule, contextID string, item []byte) <-chan error
	// DeleteTask removes the task, its journal and its push configs; an absent one is
	// not an error.
	DeleteTask(capsule, id string) <-chan error
	// PutPush creates or replaces the push config (capsule, p.TaskID, p.ID). A task the
	// store does not hold when the write is applied is refused with CodeNoTask and
	// nothing is written; the writes queued beside it are not affected.
	PutPush(capsule string, p Push) <-chan error
	// SetDelivered raises the config's Delivered to seq, never lowering it; a config
	// gone meanwhile is not an error.
	SetDelivered(capsule, taskID, id string, seq uint64) <-chan error
	// DeletePush removes one push config; an absent one is not an error.
	DeletePush(capsule, taskID, id string) <-chan error
	// PutBlob stores data as the blob id of the task (capsule, taskID): bytes the task's
	// records refer to rather than hold (a large file of a message or an artifact),
	// replacing a blob of the same id. DeleteTask and Evict remove a task's blobs with it.
	PutBlob(capsule, taskID, id string, data []byte) <-chan error

	// Task returns the task (capsule, id), and whether the store holds it.
	Task(capsule, id string) (Task, bool, error)
	// Heads calls fn for the head of each of the capsule's tasks until fn returns false.
	Heads(capsule string, fn func(Head) bool) error
	// Events calls fn for each event of the task with Seq > after, in Seq order, until
	// fn returns false.
	Events(capsule, taskID string, after uint64, fn func(Event) bool) error
	// Turns returns the conversation's turns, oldest first.
	Turns(capsule, contextID string) ([][]byte, error)
	// Pushes returns the task's push configs in id order.
	Pushes(capsule, taskID string) ([]Push, error)
	// AllPushes calls fn for every push config of the capsule until fn returns false.
	AllPushes(capsule string, fn func(Push) bool) error
	// Blob returns the blob (capsule, taskID, id), and whether the store holds it.
	Blob(capsule, taskID, id string) ([]byte, bool, error)

	// Evict removes the capsule's tasks updated before olderThan and then, oldest first,
	// those beyond maxTasks (0: no limit), with their journals, their push configs and
	// the turns of conversations no remaining task belongs to; the tasks keep reports
	// (nil: none) are spared, do not count towards maxTasks, and keep their
	// conversations' turns. It returns how many tasks it removed, once that is durable.
	// keep must not block nor call the store.
	Evict(capsule string, olderThan time.Time, maxTasks int, keep func(id string) bool) (int, error)
}

// EvictPlan is the rule of Store.Evict over a capsule's heads: the tasks to remove,
// oldest first — those updated before olderThan, then the oldest beyond maxTasks (0: no
// limit), never one keep spares (nil: none), which do not count towards maxTasks — and
// the contexts whose turns stay, because a task left belongs to them.
func EvictPlan(heads []Head, olderThan time.Time, maxTasks int, keep func(id string) bool) (remove []Head, live map[string]bool) {
	live = map[string]bool{}
	var all []Head
	for _, h := range heads {
		if keep != nil && keep(h.ID) {
			live[h.ContextID] = true
		} else {
			all = append(all, h)
		}
	}
	slices.SortStableFunc(all, func(a, b Head) int { return a.Updated.Compare(b.Updated) })
	cut := 0
	for cut < len(all) && all[cut].Updated.Before(olderThan) {
		cut++
	}
	if maxTasks > 0 && len(all)-cut > maxTasks {
		cut = len(all) - maxTasks
	}
	for _, h := range all[cut:] {
		live[h.ContextID] = true
	}
	return all[:cut], live
}

// Hurrier is a Store that gathers writes for a while before committing them (a group
// commit): Hurry asks it to commit what it holds now, because a caller waits for one.
type Hurrier interface {
	Hurry()
}

// Budgets is a Store that keeps principals' token counts (docs/reference/a2a.md
// "Limits"): one count per key and window, which every replica sharing the store adds
// to, so a fleet's principals have one budget.
type Budgets interface {
	// SpendTokens adds n (0 reads) to key's count of window, and returns the count
	// after. Counts of windows before the newest one written for key may be dropped.
	SpendTokens(ctx context.Context, key string, window, n int64) (int64, error)
}

// OpenCounter is a Fleet store that counts a principal's unfinished tasks of a capsule
// across every replica, for a limit on them that holds fleet-wide.
type OpenCounter interface {
	OpenTasks(ctx context.Context, capsule, owner string) (int, error)
}

// Health is a Store whose storage can be away (a database server): Ready reports,
// without I/O, whether the storage answered its last contact and holds every write kept
// meanwhile (KeptError), so that a caller refuses new work at once while it cannot be
// recorded; Ping asks the storage now.
type Health interface {
	Ready() error
	Ping(ctx context.Context) error
}

// KeptError is the refusal of a write a Health store could not take now because its
// storage is away, and keeps: it writes the write, in order with the others, once the
// storage is back. When Ready is nil again, every write kept before is in the storage
// (unless the store had to drop them, which it counts).
type KeptError struct{ Err error }

func (e *KeptError) Error() string { return e.Err.Error() }
func (e *KeptError) Unwrap() error { return e.Err }

// MaxIDLen is the longest id a store accepts, in bytes: capsule name, task id, context
// id, owner, state or push config id.
const MaxIDLen = 256

// Codes of the refusals every store shares (docs/errors.md).
const (
	CodeNotAStore = "E-STORE-001" // what a store was opened on is damaged, truncated or another format
	CodeBadID     = "E-STORE-003" // an id empty or over MaxIDLen
	CodeClosed    = "E-STORE-006" // a write after Close
	CodeNoTask    = "E-STORE-011" // a push config for a task the store does not hold
)

const part = "taskstore"

// CheckID refuses, with CodeBadID, an id no store keys on: empty, over MaxIDLen bytes,
// or not text a database keeps (invalid UTF-8, a NUL byte). what names the id in the
// message ("task id").
func CheckID(what, id string) error {
	if id == "" || len(id) > MaxIDLen {
		return errs.New(CodeBadID, part, fmt.Sprintf("%s is empty or %d bytes long (at most %d)", what, len(id), MaxIDLen),
			"use shorter ids; clients' ids longer than 256 bytes are refused")
	}
	return checkText(what, id)
}

// checkText refuses an id a database's text column would refuse, failing the whole
// commit it is in: invalid UTF-8 or a NUL byte.
func checkText(what, id string) error {
	if !utf8.ValidString(id) || strings.ContainsRune(id, 0) {
		return errs.New(CodeBadID, part, fmt.Sprintf("%s %q is not valid UTF-8 without NUL bytes", what, id),
			"use printable ids; the A2A server refuses clients' ids with control characters")
	}
	return nil
}

// CheckTaskIDs refuses, with CodeBadID, the capsule and task id of a task's record that
// no store keys on.
func CheckTaskIDs(capsule, taskID string) error {
	if err := CheckID("capsule", capsule); err != nil {
		return err
	}
	return CheckID("task id", taskID)
}

// CheckItemIDs is CheckTaskIDs for a record within a task (a push config, a blob), whose
// own id what names.
func CheckItemIDs(capsule, taskID, what, id string) error {
	if err := CheckTaskIDs(capsule, taskID); err != nil {
		return err
	}
	return CheckID(what, id)
}

// Failed is the channel of a write refused before it was queued: it yields err.
func Failed(err error) <-chan error {
	ch := make(chan error, 1)
	ch <- err
	return ch
}

// CheckTask refuses, with CodeBadID, a task record no store keys on: its capsule and id
// empty or over MaxIDLen, or its context id, owner or state (each may be empty) over it.
func CheckTask(t Task) error {
	if err := CheckTaskIDs(t.Capsule, t.ID); err != nil {
		return err
	}
	for _, f := range []struct{ what, id string }{{"context id", t.ContextID}, {"owner", t.Owner}, {"state", t.State}} {
		if f.id != "" {
			if err := CheckID(f.what, f.id); err != nil {
				return err
			}
		}
	}
	return nil
}

// NoTask is the refusal of a push config for a task the store does not hold (CodeNoTask).
func NoTask() error {
	return errs.New(CodeNoTask, part, "a push notification config for a task the store does not hold",
		"store the task first; a task deleted or evicted meanwhile is gone with its configs")
}

// Closed is the refusal of a write after the store was closed (CodeClosed).
func Closed() error {
	return errs.New(CodeClosed, part, "the task store is closed", "a gateway bug: report it")
}
