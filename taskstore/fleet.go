package taskstore

import "time"

// Fleet is a Store that several gateways (replicas) share at once (pgstore): it knows
// which replica runs which task, lets a replica claim queued tasks in their contexts'
// order, says which replicas stopped renewing their lease, and carries signals between
// the replicas (docs/architecture.md "Several gateways").
//
// A task is queued while it is submitted and no replica runs it; Claim makes this replica
// its runner. Writes of a task another replica runs are not applied (a fence), so a
// replica that lost its lease cannot overwrite what the replica that adopted its task
// wrote. PutTask of a new task records Task.Digest (the capsule version that admitted
// it); a later PutTask keeps it and the runner.
type Fleet interface {
	Store
	// Instance is this replica's name, unique among the live replicas.
	Instance() string
	// Lease is how long a replica that stops renewing keeps its tasks.
	Lease() time.Duration
	// Serve says which capsule digest this replica runs, for Claim's version rule.
	Serve(capsule, digest string)
	// Claim makes this replica the runner of up to n queued tasks of capsule and returns
	// their records, oldest first: tasks no earlier unfinished task of their context
	// (owner and context id) precedes, admitted under digest — or, unless exact, under
	// a digest no live replica serves, or, with any, under every digest. more says
	// queued tasks are left, claimable or not.
	Claim(capsule, digest string, versions Versions, n int) (claimed []Claimed, more bool, err error)
	// ClaimTask makes this replica the runner of the queued task id whatever its
	// context's order (to cancel it); false when it is not queued.
	ClaimTask(capsule, id string) (Task, bool, error)
	// Adopt makes this replica the runner of task id in place of from, a replica whose
	// lease ran out; false when another replica adopted it first. Requeue instead gives
	// a task from claimed but never started back to the queue.
	Adopt(capsule, id, from string) (Task, bool, error)
	Requeue(capsule, id, from string) (bool, error)
	// Open returns the unfinished tasks of the context (owner, contextID) in admission
	// order, with their runners ("" while queued).
	Open(capsule, owner, contextID string) ([]Running, error)
	// Runner returns the replica that runs task id ("" while queued or done).
	Runner(capsule, id string) (string, error)
	// Signal tells every replica (this one too) something about one task of capsule.
	Signal(s Signal) error
	// Watch calls fn for every signal about capsule's tasks, and for the tasks of
	// replicas whose lease ran out (SignalOrphan), until stop is called; fn must not
	// block. After a lost connection to the others it is called once with SignalResync.
	Watch(capsule string, fn func(Signal)) (stop func())
	// Leader reports whether this replica holds the fleet's singleton jobs (retention
	// sweeps) now: exactly one live replica does.
	Leader() bool
}

// Versions is a replica's rule for claiming tasks admitted under another capsule version
// than the one it serves (the app's task_versions).
type Versions uint8

const (
	// VersionsServed (the default) runs a task admitted under another version only when
	// no live replica serves that version.
	VersionsServed Versions = iota
	// VersionsExact never runs a task admitted under another version.
	VersionsExact
	// VersionsAny runs tasks of every version.
	VersionsAny
)

// Claimed is a task Claim gave this replica, with what the newest finished task of its
// context left: the mark of its context folder and the replica that ran it.
type Claimed struct {
	Task
	PrevMark, PrevRunner string
	// Pushes says the task has push configs to read.
	Pushes bool
}

// Running is one unfinished task of a context, as Fleet.Open returns it.
type Running struct {
	ID, State, Runner string
}

// SignalKind is what a Signal says.
type SignalKind byte

// The signals.
const (
	SignalEvents SignalKind = 'e' // the task's journal grew; Arg is its state ("" for one claimed as it was added)
	SignalCancel SignalKind = 'c' // a client asked another replica to cancel the task
	SignalAnswer SignalKind = 'a' // an answer to input-required waits as blob Arg
	SignalPush   SignalKind = 'p' // a push config was filed on another replica; Arg is its id
	SignalOrphan SignalKind = 'o' // the task's runner (Arg) stopped renewing its lease
	SignalResync SignalKind = 'r' // signals may have been missed: look again
)

// Signal is one message between the replicas about a task.
type Signal struct {
	Kind    SignalKind
	Capsule string
	TaskID  string
	Arg     string
}
