package wasip2_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero/api"

	"github.com/capsulegate/capsulegate/runtime/wasm/wasip2"
)

// TestUpstreamImportsServed checks every WASI import of upstream Murmur's wasip2
// components (testdata/upstream-imports.txt) is served with its exact core signature.
func TestUpstreamImportsServed(t *testing.T) {
	raw, err := os.ReadFile("testdata/upstream-imports.txt")
	if err != nil {
		t.Fatal(err)
	}
	h := wasip2.New(wasip2.Env{})
	defer h.Close()
	n := 0
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		module, name, sig := cols[0], cols[1], cols[2]
		n++
		f, ok := h.Func(module, name)
		if !ok {
			t.Errorf("%s#%s (%s) not served", module, name, cols[3])
			continue
		}
		params, results, _ := strings.Cut(sig, "->")
		if got, want := types(f.Params), strings.Fields(params); !slices.Equal(got, want) {
			t.Errorf("%s#%s: params %v, upstream %v (%s)", module, name, got, want, f.WIT)
		}
		if got, want := types(f.Results), strings.Fields(results); !slices.Equal(got, want) {
			t.Errorf("%s#%s: results %v, upstream %v (%s)", module, name, got, want, f.WIT)
		}
	}
	if n < 60 {
		t.Fatalf("read only %d imports", n)
	}
}

func types(v []api.ValueType) []string {
	out := make([]string, len(v))
	for i, t := range v {
		out[i] = api.ValueTypeName(t)
	}
	return out
}

func TestFuncLookup(t *testing.T) {
	h := wasip2.New(wasip2.Env{})
	defer h.Close()
	for _, tt := range []struct {
		module, name string
		ok           bool
		wit          string
	}{
		{"wasi:io/streams@0.2.0", "[method]output-stream.blocking-write-and-flush", true, "func(self: borrow<output-stream>, contents: list<u8>) -> result<_, stream-error>"},
		{"wasi:io/streams@0.2.12", "[method]output-stream.check-write", true, "func(self: borrow<output-stream>) -> result<u64, stream-error>"},
		{"wasi:io/poll@0.2.3", "poll", true, "func(in: list<borrow<pollable>>) -> list<u32>"},
		{"wasi:http/outgoing-handler@0.2.9", "handle", true, "func(request: own<outgoing-request>, options: option<own<request-options>>) -> result<own<future-incoming-response>, error-code>"},
		{"wasi:io/streams@0.3.0", "[method]output-stream.write", false, ""},
		{"wasi:io/streams@0.2", "[method]output-stream.write", false, ""},
		{"wasi:io/streams", "[method]output-stream.write", false, ""},
		{"wasi:io/streams@0.2.0-rc", "[method]output-stream.write", false, ""},
		{"wasi:sockets/tcp@0.2.0", "[method]tcp-socket.connect", false, ""},
		{"wasi:io/streams@0.2.0", "[method]output-stream.nope", false, ""},
	} {
		f, ok := h.Func(tt.module, tt.name)
		if ok != tt.ok || (ok && f.WIT != tt.wit) {
			t.Errorf("Func(%s, %s) = %q, %v; want %q, %v", tt.module, tt.name, f.WIT, ok, tt.wit, tt.ok)
		}
	}
	if len(wasip2.Served()) < 100 {
		t.Errorf("only %d functions served", len(wasip2.Served()))
	}
}
