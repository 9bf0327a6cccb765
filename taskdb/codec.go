package taskdb

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/taskstore"
)

// Every stored value starts with its kind's record version; a reader refuses a version it
// does not know rather than guess at the layout. A kind whose layout changes gets the next
// version, and the reader keeps decoding the earlier ones, so a file written by an earlier
// release stays readable without a rewrite. The file's formatVersion stays as it is: an
// earlier release opening a file with newer records refuses them at open, naming the
// record version (E-STORE-001), which is what the record version is for.
const (
	// taskVersion 2 added the owner; version 1 records read as owner "".
	taskVersion = 2
	// headVersion 2 added the owner, as taskVersion did.
	headVersion  = 2
	eventVersion = 1
	turnVersion  = 1
	pushVersion  = 1
)

// appendString appends s length-prefixed, so that a client-given id can never run into the
// next part of a key and no id is a prefix of another's encoding.
func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Keys. Every bucket is keyed by enc(capsule) + enc(id) [+ big-endian sequence], so all of a
// capsule's records, and all of a task's events in order, sit next to each other.
func taskKey(capsule, id string) []byte {
	return appendString(appendString(nil, capsule), id)
}

func seqKey(prefix []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(bytes.Clone(prefix), seq)
}

// itemKey is enc(capsule)+enc(taskID)+enc(id), the key of a record within a task (a push
// config, a blob): it sits under the task's taskKey, so deleting the task's prefix
// deletes it.
func itemKey(capsule, taskID, id string) []byte {
	return appendString(taskKey(capsule, taskID), id)
}

func encodeTask(t taskstore.Task) []byte {
	b := []byte{taskVersion}
	b = appendString(b, t.Capsule)
	b = appendString(b, t.ID)
	b = appendString(b, t.ContextID)
	b = appendTime(b, t.Updated)
	b = appendString(b, t.Owner)
	return appendString(b, string(t.Data))
}

// appendTime appends seconds and nanoseconds, as reader.time reads them.
func appendTime(b []byte, t time.Time) []byte {
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

func encodeHead(t taskstore.Task) []byte {
	b := []byte{headVersion}
	b = appendString(b, t.ID)
	b = appendString(b, t.ContextID)
	b = appendTime(b, t.Updated)
	done := uint64(0)
	if t.Done {
		done = 1
	}
	b = binary.AppendUvarint(b, done)
	b = appendString(b, t.State)
	b = appendTime(b, t.Since)
	return appendString(b, t.Owner)
}

func encodeEvent(e taskstore.Event) []byte {
	b := []byte{eventVersion}
	b = appendString(b, e.TaskID)
	b = binary.AppendUvarint(b, e.Seq)
	return appendString(b, string(e.Data))
}

func encodeTurn(item []byte) []byte {
	return append([]byte{turnVersion}, item...)
}

func encodePush(p taskstore.Push) []byte {
	b := []byte{pushVersion}
	b = appendString(b, p.TaskID)
	b = appendString(b, p.ID)
	b = binary.AppendUvarint(b, p.Delivered)
	return appendString(b, string(p.Data))
}

// reader decodes one value; the first problem sticks and every later read returns zero.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(msg string) {
	if r.err == nil {
		r.err = errs.New(CodeBadRecord, part, "a stored record cannot be read: "+msg,
			"the store was written by a later release or damaged; restore a backup or move the file aside")
	}
}

// version reads the record version, accepting 1 to latest, and returns it (0 on failure).
func (r *reader) version(latest byte) byte {
	switch {
	case len(r.b) == 0:
		r.fail("empty value")
	case r.b[0] == 0 || r.b[0] > latest:
		r.fail(fmt.Sprintf("record version %d, this release reads version %s", r.b[0], versions(latest)))
	default:
		v := r.b[0]
		r.b = r.b[1:]
		return v
	}
	return 0
}

func versions(latest byte) string {
	if latest == 1 {
		return "1"
	}
	return fmt.Sprintf("1 to %d", latest)
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || n != len(binary.AppendUvarint(nil, v)) { // refuse overlong forms: one value, one encoding
		r.fail("bad number")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 || n != len(binary.AppendVarint(nil, v)) {
		r.fail("bad number")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes(max uint64) []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) || n > max {
		r.fail("length out of range")
		return nil
	}
	v := bytes.Clone(r.b[:n])
	r.b = r.b[n:]
	return v
}

// time reads what appendTime wrote.
func (r *reader) time() time.Time {
	sec, nsec := r.varint(), r.uvarint()
	t := time.Unix(sec, int64(nsec)).UTC()
	if nsec >= 1e9 || t.Unix() != sec {
		r.fail("bad time")
	}
	return t
}

func (r *reader) id() string { return string(r.bytes(taskstore.MaxIDLen)) }

func (r *reader) end() error {
	if r.err == nil && len(r.b) > 0 {
		r.fail(fmt.Sprintf("%d bytes after the record", len(r.b)))
	}
	return r.err
}

// decodeTask reads a value written by encodeTask, or by a release before owners (version 1).
func decodeTask(b []byte) (taskstore.Task, error) {
	r := &reader{b: b}
	v := r.version(taskVersion)
	var t taskstore.Task
	t.Capsule, t.ID, t.ContextID = r.id(), r.id(), r.id()
	t.Updated = r.time()
	if v >= 2 {
		t.Owner = r.id()
	}
	t.Data = r.bytes(^uint64(0))
	if err := r.end(); err != nil {
		return taskstore.Task{}, err
	}
	return t, nil
}

// decodeHead reads a value written by encodeHead, or by a release before owners (version 1).
func decodeHead(b []byte) (taskstore.Head, error) {
	r := &reader{b: b}
	v := r.version(headVersion)
	var h taskstore.Head
	h.ID, h.ContextID = r.id(), r.id()
	h.Updated = r.time()
	switch done := r.uvarint(); {
	case r.err != nil:
	case done > 1:
		r.fail("bad finished flag")
	default:
		h.Done = done == 1
	}
	h.State = r.id()
	h.Since = r.time()
	if v >= 2 {
		h.Owner = r.id()
	}
	if err := r.end(); err != nil {
		return taskstore.Head{}, err
	}
	return h, nil
}

// decodeEvent reads a value written by encodeEvent.
func decodeEvent(b []byte) (taskstore.Event, error) {
	r := &reader{b: b}
	r.version(eventVersion)
	var e taskstore.Event
	e.TaskID = r.id()
	e.Seq = r.uvarint()
	e.Data = r.bytes(^uint64(0))
	if err := r.end(); err != nil {
		return taskstore.Event{}, err
	}
	return e, nil
}

// decodeTurn reads a value written by encodeTurn.
func decodeTurn(b []byte) ([]byte, error) {
	r := &reader{b: b}
	r.version(turnVersion)
	if r.err != nil {
		return nil, r.err
	}
	return bytes.Clone(r.b), nil
}

// decodePush reads a value written by encodePush.
func decodePush(b []byte) (taskstore.Push, error) {
	r := &reader{b: b}
	r.version(pushVersion)
	var p taskstore.Push
	p.TaskID, p.ID = r.id(), r.id()
	p.Delivered = r.uvarint()
	p.Data = r.bytes(^uint64(0))
	if err := r.end(); err != nil {
		return taskstore.Push{}, err
	}
	return p, nil
}
