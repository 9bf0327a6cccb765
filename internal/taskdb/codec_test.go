package taskdb

import (
	"bytes"
	"testing"
	"time"
)

func TestCodecRoundTrip(t *testing.T) {
	for _, tk := range []Task{
		{Capsule: "hello", ID: "t-1", ContextID: "c-1", Updated: time.Date(2026, 12, 1, 12, 0, 0, 999_999_999, time.UTC), Data: []byte(`{"kind":"task"}`)},
		{Capsule: "x", ID: string([]byte{0, 0xff, '/'}), Updated: time.Time{}},
		{Capsule: "x", ID: "old", Updated: time.Unix(-1, 5).UTC()},
	} {
		got, err := decodeTask(encodeTask(tk))
		if err != nil || got.Capsule != tk.Capsule || got.ID != tk.ID || got.ContextID != tk.ContextID ||
			!got.Updated.Equal(tk.Updated) || !bytes.Equal(got.Data, tk.Data) {
			t.Errorf("task %+v came back as %+v, %v", tk, got, err)
		}
	}
	e := Event{TaskID: "t-1", Seq: 1 << 40, Data: bytes.Repeat([]byte("e"), 300)}
	if got, err := decodeEvent(encodeEvent(e)); err != nil || got.TaskID != e.TaskID || got.Seq != e.Seq || !bytes.Equal(got.Data, e.Data) {
		t.Errorf("event %+v came back as %+v, %v", e, got, err)
	}
}

func TestDecodeRefuses(t *testing.T) {
	task := encodeTask(Task{Capsule: "c", ID: "t", Data: []byte("d")})
	event := encodeEvent(Event{TaskID: "t", Seq: 3, Data: []byte("d")})
	later := func(b []byte) []byte { b = bytes.Clone(b); b[0] = recordVersion + 1; return b }
	for _, tc := range []struct {
		name, want string
		b          []byte
		decode     func([]byte) error
	}{
		{"task of a later version", "record version 2, this release reads version 1", later(task), decodeTaskErr},
		{"event of a later version", "record version 2, this release reads version 1", later(event), decodeEventErr},
		{"turn of a later version", "record version 2, this release reads version 1", []byte{recordVersion + 1, 'x'}, decodeTurnErr},
		{"empty", "empty value", nil, decodeTaskErr},
		{"cut short", "length out of range", task[:len(task)-1], decodeTaskErr},
		{"trailing bytes", "1 bytes after the record", append(bytes.Clone(event), 0), decodeEventErr},
		{"id over 256 bytes", "length out of range", append([]byte{recordVersion, 0x81, 0x02}, make([]byte, 257)...), decodeEventErr},
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
func decodeEventErr(b []byte) error { _, err := decodeEvent(b); return err }
func decodeTurnErr(b []byte) error  { _, err := decodeTurn(b); return err }

// FuzzDecode feeds arbitrary values to the decoders: they must never panic, and whatever
// they accept must encode back to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(encodeTask(Task{Capsule: "hello", ID: "t", ContextID: "c", Updated: time.Unix(1e9, 7), Data: []byte("{}")}))
	f.Add(encodeEvent(Event{TaskID: "t", Seq: 42, Data: []byte("event")}))
	f.Add(encodeHead(Task{ID: "t", ContextID: "c", Updated: time.Unix(1e9, 7), Done: true, State: "completed", Since: time.Unix(1e9, 5)}))
	f.Add([]byte{recordVersion})
	f.Add([]byte{recordVersion + 1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if tk, err := decodeTask(b); err == nil {
			if again := encodeTask(tk); !bytes.Equal(again, b) {
				t.Fatalf("task %x decoded to %+v, encodes as %x", b, tk, again)
			}
		}
		if e, err := decodeEvent(b); err == nil {
			if again := encodeEvent(e); !bytes.Equal(again, b) {
				t.Fatalf("event %x decoded to %+v, encodes as %x", b, e, again)
			}
		}
		if h, err := decodeHead(b); err == nil {
			again := encodeHead(Task{ID: h.ID, ContextID: h.ContextID, Updated: h.Updated, Done: h.Done, State: h.State, Since: h.Since})
			if !bytes.Equal(again, b) {
				t.Fatalf("head %x decoded to %+v, encodes as %x", b, h, again)
			}
		}
		if item, err := decodeTurn(b); err == nil && !bytes.Equal(encodeTurn(item), b) {
			t.Fatalf("turn %x does not round-trip", b)
		}
	})
}
