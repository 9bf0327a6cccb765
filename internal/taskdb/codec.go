package taskdb

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/capsulegate/capsulegate/internal/errs"
)

// recordVersion is the first byte of every stored value; a reader refuses values written
// with a version it does not know rather than guess at their layout.
const recordVersion = 1

// MaxIDLen is the longest capsule name, task id or context id the store accepts, in bytes.
const MaxIDLen = 256

// checkID refuses an id the store cannot key on: empty or over MaxIDLen bytes.
func checkID(what, id string) error {
	if id == "" || len(id) > MaxIDLen {
		return errs.New(CodeBadID, part, fmt.Sprintf("%s is empty or %d bytes long (at most %d)", what, len(id), MaxIDLen),
			"use shorter ids; clients' ids longer than 256 bytes are refused")
	}
	return nil
}

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

func encodeTask(t Task) []byte {
	b := []byte{recordVersion}
	b = appendString(b, t.Capsule)
	b = appendString(b, t.ID)
	b = appendString(b, t.ContextID)
	b = appendTime(b, t.Updated)
	return appendString(b, string(t.Data))
}

// appendTime appends seconds and nanoseconds, as reader.time reads them.
func appendTime(b []byte, t time.Time) []byte {
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

func encodeHead(t Task) []byte {
	b := []byte{recordVersion}
	b = appendString(b, t.ID)
	b = appendString(b, t.ContextID)
	b = appendTime(b, t.Updated)
	done := uint64(0)
	if t.Done {
		done = 1
	}
	b = binary.AppendUvarint(b, done)
	b = appendString(b, t.State)
	return appendTime(b, t.Since)
}

func encodeEvent(e Event) []byte {
	b := []byte{recordVersion}
	b = appendString(b, e.TaskID)
	b = binary.AppendUvarint(b, e.Seq)
	return appendString(b, string(e.Data))
}

func encodeTurn(item []byte) []byte {
	return append([]byte{recordVersion}, item...)
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

func (r *reader) version() {
	switch {
	case len(r.b) == 0:
		r.fail("empty value")
	case r.b[0] != recordVersion:
		r.fail(fmt.Sprintf("record version %d, this release reads version %d", r.b[0], recordVersion))
	default:
		r.b = r.b[1:]
	}
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

func (r *reader) id() string { return string(r.bytes(MaxIDLen)) }

func (r *reader) end() error {
	if r.err == nil && len(r.b) > 0 {
		r.fail(fmt.Sprintf("%d bytes after the record", len(r.b)))
	}
	return r.err
}

// decodeTask reads a value written by encodeTask.
func decodeTask(b []byte) (Task, error) {
	r := &reader{b: b}
	r.version()
	var t Task
	t.Capsule, t.ID, t.ContextID = r.id(), r.id(), r.id()
	t.Updated = r.time()
	t.Data = r.bytes(^uint64(0))
	if err := r.end(); err != nil {
		return Task{}, err
	}
	return t, nil
}

// decodeHead reads a value written by encodeHead.
func decodeHead(b []byte) (Head, error) {
	r := &reader{b: b}
	r.version()
	var h Head
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
	if err := r.end(); err != nil {
		return Head{}, err
	}
	return h, nil
}

// decodeEvent reads a value written by encodeEvent.
func decodeEvent(b []byte) (Event, error) {
	r := &reader{b: b}
	r.version()
	var e Event
	e.TaskID = r.id()
	e.Seq = r.uvarint()
	e.Data = r.bytes(^uint64(0))
	if err := r.end(); err != nil {
		return Event{}, err
	}
	return e, nil
}

// decodeTurn reads a value written by encodeTurn.
func decodeTurn(b []byte) ([]byte, error) {
	r := &reader{b: b}
	r.version()
	if r.err != nil {
		return nil, r.err
	}
	return bytes.Clone(r.b), nil
}
