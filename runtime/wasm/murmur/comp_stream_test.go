package murmur

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// signalWriter is a guest's stdout that closes seen once the output holds want: the
// host side's proof that the guest has received (and printed) that much.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// streamGuest is a script component that GETs http://<authority>/stream and prints the
// response body as it reads it, 64 bytes at most per read, then "<end>" when the stream
// closes, "<too large>" when it fails with HTTP-response-body-size, "<failed>" for
// another failure. poll reads with subscribe (one pollable for the whole body), block and
// read; otherwise with blocking-read.
func streamGuest(authority string, poll bool) compSpec {
	imp := func(iface, name, id string) compImport {
		return compImport{iface: iface, name: name, id: id}
	}
	imports := append(slices.Clone(printImports),
		imp("wasi:http/types@0.2.6", "[constructor]fields", "new_fields"),
		imp("wasi:http/types@0.2.6", "[constructor]outgoing-request", "new_req"),
		imp("wasi:http/types@0.2.6", "[method]outgoing-request.set-scheme", "set_scheme"),
		imp("wasi:http/types@0.2.6", "[method]outgoing-request.set-authority", "set_authority"),
		imp("wasi:http/types@0.2.6", "[method]outgoing-request.set-path-with-query", "set_path"),
		imp("wasi:http/outgoing-handler@0.2.6", "handle", "handle"),
		imp("wasi:http/types@0.2.6", "[method]future-incoming-response.subscribe", "subscribe"),
		imp("wasi:http/types@0.2.6", "[method]future-incoming-response.get", "get"),
		imp("wasi:http/types@0.2.6", "[method]incoming-response.consume", "consume"),
		imp("wasi:http/types@0.2.6", "[method]incoming-body.stream", "body_stream"),
		imp("wasi:http/types@0.2.6", "http-error-code", "errcode"),
		imp("wasi:io/poll@0.2.6", "[method]pollable.block", "block"),
		imp("wasi:io/streams@0.2.6", "[method]input-stream.blocking-read", "bread"),
		imp("wasi:io/streams@0.2.6", "[method]input-stream.read", "read"),
		imp("wasi:io/streams@0.2.6", "[method]input-stream.subscribe", "isub"))
	read := `(call $bread (local.get $s) (i64.const 64) (i32.const 0x260))`
	if poll {
		read = `(call $block (local.get $p)) (call $read (local.get $s) (i64.const 64) (i32.const 0x260))`
	}
	return compSpec{world: "script", imports: imports, main: printHelpers + fmt.Sprintf(`
    (data (i32.const 0x400) %q)
    (data (i32.const 0x500) "/stream")
    (data (i32.const 0x520) "<end>")
    (data (i32.const 0x530) "<too large>")
    (data (i32.const 0x540) "<failed>")
    (data (i32.const 0x550) "<no response>")
`, authority) + capsuleRun + fmt.Sprintf(`
      (local $req i32) (local $fut i32) (local $s i32) (local $p i32)
      (local.set $req (call $new_req (call $new_fields)))
      (drop (call $set_scheme (local.get $req) (i32.const 1) (i32.const 0) (i32.const 0) (i32.const 0)))
      (drop (call $set_authority (local.get $req) (i32.const 1) (i32.const 0x400) (i32.const %d)))
      (drop (call $set_path (local.get $req) (i32.const 1) (i32.const 0x500) (i32.const 7)))
      (call $handle (local.get $req) (i32.const 0) (i32.const 0) (i32.const 0x200))
      (if (i32.load8_u (i32.const 0x200)) (then (call $print (i32.const 0x550) (i32.const 13)) (return)))
      (local.set $fut (i32.load (i32.const 0x208)))
      (call $block (call $subscribe (local.get $fut)))
      (call $get (local.get $fut) (i32.const 0x300))
      (if (i32.or (i32.eqz (i32.load8_u (i32.const 0x300)))
                  (i32.or (i32.load8_u (i32.const 0x308)) (i32.load8_u (i32.const 0x310))))
        (then (call $print (i32.const 0x550) (i32.const 13)) (return)))
      (call $consume (i32.load (i32.const 0x318)) (i32.const 0x240))
      (call $body_stream (i32.load (i32.const 0x244)) (i32.const 0x250))
      (local.set $s (i32.load (i32.const 0x254)))
      (local.set $p (call $isub (local.get $s)))
      (block $done (loop $next
        %s
        (if (i32.eqz (i32.load8_u (i32.const 0x260)))
          (then
            (if (i32.load (i32.const 0x268))
              (then (call $print (i32.load (i32.const 0x264)) (i32.load (i32.const 0x268)))))
            (br $next)))
        (if (i32.eq (i32.load8_u (i32.const 0x264)) (i32.const 1))
          (then (call $print (i32.const 0x520) (i32.const 5)) (br $done)))
        (call $errcode (i32.load (i32.const 0x268)) (i32.const 0x280))
        (if (i32.and (i32.load8_u (i32.const 0x280)) (i32.eq (i32.load8_u (i32.const 0x288)) (i32.const 28)))
          (then (call $print (i32.const 0x530) (i32.const 11)))
          (else (call $print (i32.const 0x540) (i32.const 8)))))))
`, len(authority), read)}
}

// TestComponentHTTPStreams: a component reads a wasi:http response body as the server
// writes it. The server sends a first chunk and sends the rest only once the guest has
// printed that chunk (seen through its stdout, no sleeps), so the guest can finish only
// if the body reached it while the response was still open. The same body over the
// response cap fails the stream with HTTP-response-body-size, and a server that stalls
// mid-body leaves the guest in blocking-read until the deadline, which traps as one.
func TestComponentHTTPStreams(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	tests := []struct {
		name     string
		poll     bool
		maxResp  int64
		stall    bool
		deadline time.Duration
		want     string
		reason   string // the failure's reason, "" for none
	}{
		{name: "blocking-read", want: "first|second|<end>", deadline: 10 * time.Second},
		{name: "subscribe and read", poll: true, want: "first|second|<end>", deadline: 10 * time.Second},
		{name: "over the response cap", maxResp: 10, want: "first|<too large>", deadline: 10 * time.Second},
		{name: "deadline in blocking-read", stall: true, want: "first|", deadline: time.Second, reason: wasm.ReasonDeadline},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout := &signalWriter{want: "first|", seen: make(chan struct{})}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte("first|"))
				w.(http.Flusher).Flush()
				select {
				case <-stdout.seen:
				case <-r.Context().Done():
					return
				}
				if tc.stall {
					<-r.Context().Done() // until the host gives up the request
					return
				}
				w.Write([]byte("second|"))
			}))
			defer srv.Close()
			u, _ := url.Parse(srv.URL)
			rules, err := netpolicy.ParseRules([]string{u.Host})
			if err != nil {
				t.Fatal(err)
			}
			out := &Outgoing{Capsule: "cap", Rules: rules, Metrics: e.Metrics(), MaxResponseBody: tc.maxResp}
			out.Init()
			artifact := strings.ReplaceAll(tc.name, " ", "-")
			mod, err := Compile(ctx, e, "cap", artifact, RoleCapsule, streamGuest(u.Host, tc.poll).build(t))
			if err != nil {
				t.Fatal(err)
			}
			g := wasm.Grants{MemoryBytes: 1 << 20, Stdout: stdout, Deadline: tc.deadline}
			err = RunScript(ctx, e, mod, g, &Imports{HTTP: out, Who: "capsule"})
			var ge *wasm.GuestError
			switch {
			case tc.reason == "" && err != nil:
				t.Fatal(err)
			case tc.reason != "" && (!errors.As(err, &ge) || ge.Reason != tc.reason):
				t.Fatalf("err %v, want reason %s", err, tc.reason)
			}
			if got := stdout.String(); got != tc.want {
				t.Fatalf("stdout %q, want %q", got, tc.want)
			}
		})
	}
}
