package murmur

import (
	"context"
	"fmt"
	"testing"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// TestTaskIOWindows checks murmur:task-io/read's windows: the longest prefix within
// max bytes ending on a character boundary, offsets past the end or inside a character
// out-of-range, and the io-errors of an ungranted hook, no task and no output.
func TestTaskIOWindows(t *testing.T) {
	out := "résumé"
	scope := &TaskScope{InScope: true, AsGiven: "héllo\n\nagain", Original: "héllo", Output: &out}
	tests := []struct {
		name   string
		hook   *HookImports
		fn     func(context.Context, *Imports, []any) ([]any, error)
		args   []any
		want   any // string or uint64 on success
		ioErr  abi.IOError
		failed bool
	}{
		{"input len as-given", &HookImports{TaskIO: scope}, importInputLen, []any{uint32(0)}, uint64(13), 0, false},
		{"input len original", &HookImports{TaskIO: scope}, importInputLen, []any{uint32(1)}, uint64(6), 0, false},
		{"window stops before a split character", &HookImports{TaskIO: scope}, importReadInput, []any{uint32(1), uint64(0), uint64(2)}, "h", 0, false},
		{"window takes the whole character", &HookImports{TaskIO: scope}, importReadInput, []any{uint32(1), uint64(0), uint64(3)}, "hé", 0, false},
		{"max 0 reads nothing", &HookImports{TaskIO: scope}, importReadInput, []any{uint32(1), uint64(1), uint64(0)}, "", 0, false},
		{"offset at the end reads nothing", &HookImports{TaskIO: scope}, importReadInput, []any{uint32(1), uint64(6), uint64(9)}, "", 0, false},
		{"offset inside a character", &HookImports{TaskIO: scope}, importReadInput, []any{uint32(1), uint64(2), uint64(9)}, nil, abi.IOOutOfRange, true},
		{"offset past the end", &HookImports{TaskIO: scope}, importReadInput, []any{uint32(1), uint64(7), uint64(9)}, nil, abi.IOOutOfRange, true},
		{"output", &HookImports{TaskIO: scope}, importReadOutput, []any{uint64(1), uint64(100)}, "ésumé", 0, false},
		{"output len", &HookImports{TaskIO: scope}, importOutputLen, nil, uint64(8), 0, false},
		{"not granted", &HookImports{}, importInputLen, []any{uint32(0)}, nil, abi.IONotGranted, true},
		{"no task", &HookImports{TaskIO: &TaskScope{}}, importReadInput, []any{uint32(0), uint64(0), uint64(1)}, nil, abi.IONoTask, true},
		{"no output yet", &HookImports{TaskIO: &TaskScope{InScope: true, AsGiven: "x"}}, importOutputLen, nil, nil, abi.IONoOutput, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tt.fn(context.Background(), &Imports{Hook: tt.hook}, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			r := res[0].(abi.Result)
			switch {
			case r.Err != tt.failed:
				t.Fatalf("result %+v, want failed=%v", r, tt.failed)
			case tt.failed && r.Value != uint32(tt.ioErr):
				t.Errorf("io-error %v, want %d", r.Value, tt.ioErr)
			case !tt.failed && r.Value != tt.want:
				t.Errorf("got %#v, want %#v", r.Value, tt.want)
			}
		})
	}
}

// TestConversationPages checks murmur:conversation/read's paging: newest first, limit
// clamped to 1–100, cursors that walk to the oldest message and are refused when forged,
// and an empty record as an empty page.
func TestConversationPages(t *testing.T) {
	var record []abi.Message
	for i := range 5 {
		record = append(record, abi.Message{Role: "user", Content: fmt.Sprint(i)})
	}
	conv := func(context.Context) ([]abi.Message, error) { return record, nil }
	page := func(h *HookImports, cursor *string, limit uint32) (abi.Result, []string, *string, uint32) {
		t.Helper()
		res, err := importReadMessages(context.Background(), &Imports{Hook: h}, []any{optOf(cursor), limit})
		if err != nil {
			t.Fatal(err)
		}
		r := res[0].(abi.Result)
		if r.Err {
			return r, nil, nil, 0
		}
		f := r.Value.([]any)
		var got []string
		for _, m := range f[0].([]any) {
			got = append(got, m.([]any)[1].(string))
		}
		var next *string
		if o := f[1].(abi.Option); o.Some {
			s := o.Value.(string)
			next = &s
		}
		return r, got, next, f[2].(uint32)
	}
	h := &HookImports{Conversation: conv}
	var walked []string
	var cursor *string
	for range 10 {
		_, got, next, total := page(h, cursor, 2)
		if total != 5 {
			t.Fatalf("total %d", total)
		}
		walked = append(walked, got...)
		if cursor = next; cursor == nil {
			break
		}
	}
	if fmt.Sprint(walked) != "[4 3 2 1 0]" {
		t.Errorf("walked %v", walked)
	}
	if _, got, _, _ := page(h, nil, 0); fmt.Sprint(got) != "[4]" {
		t.Errorf("limit 0 read %v, want one message", got)
	}
	if _, got, _, _ := page(h, nil, 1000); len(got) != 5 {
		t.Errorf("limit 1000 read %d", len(got))
	}
	for _, c := range []string{"m6", "m0", "x3", "m-1", ""} {
		if r, _, _, _ := page(h, &c, 2); !r.Err || r.Value != "invalid-cursor" {
			t.Errorf("cursor %q: %+v", c, r)
		}
	}
	if r, _, _, _ := page(&HookImports{}, nil, 2); !r.Err || r.Value != "not-granted" {
		t.Errorf("ungranted: %+v", r)
	}
	empty := &HookImports{Conversation: func(context.Context) ([]abi.Message, error) { return nil, nil }}
	if r, got, next, total := page(empty, nil, 2); r.Err || len(got) != 0 || next != nil || total != 0 {
		t.Errorf("empty record: %+v %v %v %d", r, got, next, total)
	}
}

func optOf(s *string) abi.Option {
	if s == nil {
		return abi.Option{}
	}
	return abi.Option{Some: true, Value: *s}
}
