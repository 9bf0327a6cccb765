package taskdb

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/taskstore"
)

// encodeTaskV1 and encodeHeadV1 write what the release before owners wrote.
func encodeTaskV1(t taskstore.Task) []byte {
	b := []byte{1}
	b = appendString(b, t.Capsule)
	b = appendString(b, t.ID)
	b = appendString(b, t.ContextID)
	b = appendTime(b, t.Updated)
	return appendString(b, string(t.Data))
}

func encodeHeadV1(t taskstore.Task) []byte {
	b := []byte{1}
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

// headOf is the index entry encodeHead writes for t.
func headOf(t taskstore.Task) taskstore.Head {
	return taskstore.Head{ID: t.ID, ContextID: t.ContextID, Updated: t.Updated, Done: t.Done, State: t.State, Since: t.Since, Owner: t.Owner}
}

func taskOfHead(h taskstore.Head) taskstore.Task {
	return taskstore.Task{ID: h.ID, ContextID: h.ContextID, Updated: h.Updated, Done: h.Done, State: h.State, Since: h.Since, Owner: h.Owner}
}

func sameTask(a, b taskstore.Task) bool {
	return a.Capsule == b.Capsule && a.ID == b.ID && a.ContextID == b.ContextID && a.Updated.Equal(b.Updated) &&
		a.Owner == b.Owner && bytes.Equal(a.Data, b.Data)
}

func sameHead(a, b taskstore.Head) bool {
	return a.ID == b.ID && a.ContextID == b.ContextID && a.Updated.Equal(b.Updated) && a.Done == b.Done &&
		a.State == b.State && a.Since.Equal(b.Since) && a.Owner == b.Owner
}

func TestCodecRoundTrip(t *testing.T) {
	for _, tk := range []taskstore.Task{
		{Capsule: "hello", ID: "t-1", ContextID: "c-1", Updated: time.Date(2026, 12, 1, 12, 0, 0, 999_999_999, time.UTC), Data: []byte(`{"kind":"task"}`)},
		{Capsule: "x", ID: string([]byte{0, 0xff, '/'}), Updated: time.Time{}, Owner: string([]byte{0, 0xff})},
		{Capsule: "x", ID: "old", Updated: time.Unix(-1, 5).UTC(), Owner: "alice@example.com", Done: true, State: "completed", Since: time.Unix(7, 0).UTC()},
	} {
		if got, err := decodeTask(encodeTask(tk)); err != nil || !sameTask(got, tk) {
			t.Errorf("task %+v came back as %+v, %v", tk, got, err)
		}
		if got, err := decodeHead(encodeHead(tk)); err != nil || !sameHead(got, headOf(tk)) {
			t.Errorf("head of %+v came back as %+v, %v", tk, got, err)
		}
	}
	e := taskstore.Event{TaskID: "t-1", Seq: 1 << 40, Data: bytes.Repeat([]byte("e"), 300)}
	if got, err := decodeEvent(encodeEvent(e)); err != nil || got.TaskID != e.TaskID || got.Seq != e.Seq || !bytes.Equal(got.Data, e.Data) {
		t.Errorf("event %+v came back as %+v, %v", e, got, err)
	}
	for _, p := range []taskstore.Push{
		{TaskID: "t-1", ID: "cfg-1", Data: []byte(`{"url":"https://example.com/hook"}`), Delivered: 1 << 40},
		{TaskID: string([]byte{0, '/'}), ID: string(bytes.Repeat([]byte{0xff}, taskstore.MaxIDLen))},
	} {
		if got, err := decodePush(encodePush(p)); err != nil || got.TaskID != p.TaskID || got.ID != p.ID ||
			got.Delivered != p.Delivered || !bytes.Equal(got.Data, p.Data) {
			t.Errorf("push %+v came back as %+v, %v", p, got, err)
		}
	}
}

// TestDecodeVersion1: task and index values written before owners read with owner "".
func TestDecodeVersion1(t *testing.T) {
	tk := taskstore.Task{Capsule: "hello", ID: "t", ContextID: "c", Updated: t0, Done: true, State: "completed", Since: t0, Data: []byte("d")}
	got, err := decodeTask(encodeTaskV1(tk))
	if err != nil || !sameTask(got, tk) {
		t.Errorf("version 1 task came back as %+v, %v", got, err)
	}
	h, err := decodeHead(encodeHeadV1(tk))
	if err != nil || !sameHead(h, headOf(tk)) {
		t.Errorf("version 1 head came back as %+v, %v", h, err)
	}
}

func TestDecodeRefuses(t *testing.T) {
	task := encodeTask(taskstore.Task{Capsule: "c", ID: "t", Data: []byte("d")})
	event := encodeEvent(taskstore.Event{TaskID: "t", Seq: 3, Data: []byte("d")})
	push := encodePush(taskstore.Push{TaskID: "t", ID: "p", Data: []byte("d"), Delivered: 2})
	version := func(b []byte, v byte) []byte { b = bytes.Clone(b); b[0] = v; return b }
	for _, tc := range []struct {
		name, want string
		b          []byte
		decode     func([]byte) error
	}{
		{"task of a later version", "record version 3, this release reads version 1 to 2", version(task, 3), decodeTaskErr},
		{"head of a later version", "record version 3, this release reads version 1 to 2", version(encodeHead(taskstore.Task{ID: "t"}), 3), decodeHeadErr},
		{"task of version 0", "record version 0, this release reads version 1 to 2", version(task, 0), decodeTaskErr},
		{"event of a later version", "record version 2, this release reads version 1", version(event, 2), decodeEventErr},
		{"turn of a later version", "record version 2, this release reads version 1", []byte{2, 'x'}, decodeTurnErr},
		{"push of a later version", "record version 2, this release reads version 1", version(push, 2), decodePushErr},
		{"version 2 task read as version 1", "bytes after the record", version(encodeTask(taskstore.Task{Capsule: "c", ID: "t", Owner: "o"}), 1), decodeTaskErr},
		{"empty", "empty value", nil, decodeTaskErr},
		{"empty push", "empty value", nil, decodePushErr},
		{"cut short", "length out of range", task[:len(task)-1], decodeTaskErr},
		{"push cut short", "length out of range", push[:len(push)-1], decodePushErr},
		{"trailing bytes", "1 bytes after the record", append(bytes.Clone(event), 0), decodeEventErr},
		{"push trailing bytes", "1 bytes after the record", append(bytes.Clone(push), 0), decodePushErr},
		{"id over 256 bytes", "length out of range", append([]byte{eventVersion, 0x81, 0x02}, make([]byte, 257)...), decodeEventErr},
		{"push id over 256 bytes", "length out of range", append([]byte{pushVersion, 1, 't', 0x81, 0x02}, make([]byte, 257)...), decodePushErr},
		{"owner over 256 bytes", "length out of range", append([]byte{taskVersion, 1, 'c', 1, 't', 0, 0, 0, 0x81, 0x02}, make([]byte, 257)...), decodeTaskErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.decode(tc.b)
			wantCode(t, err, "E-STORE-007")
			if !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func decodeTaskErr(b []byte) error  { _, err := decodeTask(b); return err }
func decodeHeadErr(b []byte) error  { _, err := decodeHead(b); return err }
func decodeEventErr(b []byte) error { _, err := decodeEvent(b); return err }
func decodeTurnErr(b []byte) error  { _, err := decodeTurn(b); return err }
func decodePushErr(b []byte) error  { _, err := decodePush(b); return err }

// FuzzDecode feeds arbitrary values to the decoders: they must never panic, and whatever
// they accept must encode back to the same bytes (version 1 tasks and heads with the
// encoding of that version, their owner "").
func FuzzDecode(f *testing.F) {
	tk := taskstore.Task{Capsule: "hello", ID: "t", ContextID: "c", Updated: time.Unix(1e9, 7), Done: true, State: "completed", Since: time.Unix(1e9, 5), Owner: "alice", Data: []byte("{}")}
	f.Add(encodeTask(tk))
	f.Add(encodeTaskV1(tk))
	f.Add(encodeEvent(taskstore.Event{TaskID: "t", Seq: 42, Data: []byte("event")}))
	f.Add(encodeHead(tk))
	f.Add(encodeHeadV1(tk))
	f.Add(encodePush(taskstore.Push{TaskID: "t", ID: "cfg", Data: []byte(`{"url":"u"}`), Delivered: 9}))
	f.Add([]byte{1})
	f.Add([]byte{2, 0, 0})
	f.Add([]byte{3, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if tk, err := decodeTask(b); err == nil {
			again := encodeTask(tk)
			if b[0] == 1 {
				again = encodeTaskV1(tk)
			}
			if !bytes.Equal(again, b) || b[0] == 1 && tk.Owner != "" {
				t.Fatalf("task %x decoded to %+v, encodes as %x", b, tk, again)
			}
		}
		if e, err := decodeEvent(b); err == nil {
			if again := encodeEvent(e); !bytes.Equal(again, b) {
				t.Fatalf("event %x decoded to %+v, encodes as %x", b, e, again)
			}
		}
		if h, err := decodeHead(b); err == nil {
			again := encodeHead(taskOfHead(h))
			if b[0] == 1 {
				again = encodeHeadV1(taskOfHead(h))
			}
			if !bytes.Equal(again, b) || b[0] == 1 && h.Owner != "" {
				t.Fatalf("head %x decoded to %+v, encodes as %x", b, h, again)
			}
		}
		if item, err := decodeTurn(b); err == nil && !bytes.Equal(encodeTurn(item), b) {
			t.Fatalf("turn %x does not round-trip", b)
		}
		if p, err := decodePush(b); err == nil {
			if again := encodePush(p); !bytes.Equal(again, b) {
				t.Fatalf("push %x decoded to %+v, encodes as %x", b, p, again)
			}
		}
	})
}
