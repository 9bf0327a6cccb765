package murmur

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/guestfs"
	"github.com/capsulegate/capsulegate/wit/abi"
)

const capsuleRun = `(func (export "murmur:capsule/run@0.1.0#run")`

// TestComponentTool: a tool component answers through CallTool, its lowered imports
// (stdout, murmur:text/chunks, murmur:task/task) served over the main module's memory
// and realloc through the shim and fixup, and each call leaves nothing open.
func TestComponentTool(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	spec := compSpec{world: "tool", imports: append(slices.Clone(printImports),
		compImport{iface: "murmur:text/chunks@0.1.0", name: "emit-chunk", id: "emit"},
		compImport{iface: "murmur:task/task@0.1.0", name: "request-input", id: "ask"}),
		main: printHelpers + `
    (data (i32.const 0x400) "ok")
    (data (i32.const 0x410) "tool ran\n")
    (data (i32.const 0x420) "chunk")
    (func (export "murmur:tool/run@0.1.0#run") (param i32 i32 i32 i32 i32 i32) (result i32)
      (call $print (i32.const 0x410) (i32.const 9))
      (call $emit (i32.const 0x420) (i32.const 5))
      (call $ask (local.get 1) (local.get 2) (i32.const 0x140))
      (i32.store8 (i32.const 0x100) (i32.const 0))
      (i32.store8 (i32.const 0x104) (i32.const 1))
      (i32.store (i32.const 0x108) (i32.const 0x400))
      (i32.store (i32.const 0x10c) (i32.const 2))
      (i32.store8 (i32.const 0x110) (i32.const 1))
      (i32.store (i32.const 0x114) (i32.load (i32.const 0x140)))
      (i32.store (i32.const 0x118) (i32.load (i32.const 0x144)))
      (i32.store8 (i32.const 0x11c) (i32.const 0))
      (i32.store8 (i32.const 0x128) (i32.const 0))
      (i32.store (i32.const 0x12c) (i32.const 0))
      (i32.store (i32.const 0x130) (i32.const 0))
      (i32.const 0x100))
    (func (export "cabi_post_murmur:tool/run@0.1.0#run") (param i32))
`}
	mod, err := Compile(ctx, e, "cap", "comp-tool", manifest.RoleTool, spec.build(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckWorld(mod, string(manifest.RoleTool)); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		var stdout bytes.Buffer
		var chunks []string
		var asked string
		h := &Imports{
			Chunk:        func(_ bool, s string) { chunks = append(chunks, s) },
			RequestInput: func(_ context.Context, p string) (string, error) { asked = p; return "answer " + p, nil },
		}
		q := fmt.Sprintf("question %d", i)
		out, err := CallTool(ctx, e, mod, wasm.Grants{MemoryBytes: 1 << 20, Stdout: &stdout}, h, abi.ToolInput{Data: &q})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != abi.StatusPassed || out.Summary == nil || *out.Summary != "ok" || out.Data == nil || *out.Data != "answer "+q {
			t.Fatalf("call %d: %+v", i, out)
		}
		if stdout.String() != "tool ran\n" || asked != q || strings.Join(chunks, "|") != "chunk" {
			t.Fatalf("call %d: stdout %q, asked %q, chunks %q", i, stdout.String(), asked, chunks)
		}
	}
	if got := testutil.ToFloat64(e.Metrics().Calls.WithLabelValues("cap", "comp-tool", "tool", "ok")); got != 2 {
		t.Fatalf("%v calls counted ok, want 2", got)
	}
	// A call that fails closes its instances too.
	var main *wasm.Instance
	err = e.Call(ctx, mod, wasm.Grants{MemoryBytes: 1 << 20}, func(_ context.Context, inst *wasm.Instance) error {
		main = inst
		return errors.New("the caller gave up")
	})
	if err == nil || main == nil || !main.IsClosed() {
		t.Fatalf("err %v; main instance closed: %v", err, main != nil && main.IsClosed())
	}
}

// TestComponentScript: a script capsule component runs through RunScript, and its
// murmur:tool-registry/invoke reaches Imports.Invoke (or returns the refusal to it).
func TestComponentScript(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	spec := compSpec{world: "script", imports: append(slices.Clone(printImports),
		compImport{iface: "murmur:tool-registry/invoke@0.1.0", name: "invoke", id: "invoke"}),
		main: printHelpers + `
    (data (i32.const 0x400) "echo")
    (data (i32.const 0x410) "hello")
    (data (i32.const 0x420) "error:")
` + capsuleRun + `
      (call $invoke (i32.const 0x400) (i32.const 4) (i32.const 1) (i32.const 0x410) (i32.const 5)
                    (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0x200))
      (if (i32.load8_u (i32.const 0x200))
        (then (call $print (i32.const 0x420) (i32.const 6))
              (call $print (i32.load (i32.const 0x204)) (i32.load (i32.const 0x208))))
        (else (if (i32.load8_u (i32.const 0x208))
          (then (call $print (i32.load (i32.const 0x20c)) (i32.load (i32.const 0x210))))))))
`}
	mod, err := Compile(ctx, e, "cap", "capsule", RoleCapsule, spec.build(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckWorld(mod, ScriptWorld); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		invoke func(ctx context.Context, name string, in abi.ToolInput) (abi.ToolResult, error)
		want   string
	}{
		{"answered", func(_ context.Context, name string, in abi.ToolInput) (abi.ToolResult, error) {
			s := name + " said " + *in.Data
			return abi.ToolResult{Summary: &s}, nil
		}, "echo said hello"},
		{"refused", func(context.Context, string, abi.ToolInput) (abi.ToolResult, error) {
			return abi.ToolResult{}, errors.New("tool echo is not in this capsule's tools")
		}, "error:tool echo is not in this capsule's tools"},
		{"no invoke", nil, "error:tool-registry: this capsule may not invoke tools"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout bytes.Buffer
			if err := RunScript(ctx, e, mod, wasm.Grants{MemoryBytes: 1 << 20, Stdout: &stdout}, &Imports{Invoke: tc.invoke}); err != nil {
				t.Fatal(err)
			}
			if stdout.String() != tc.want {
				t.Fatalf("stdout %q, want %q", stdout.String(), tc.want)
			}
		})
	}
}

// TestComponentStdioEnv: stdout and stderr reach the grants' writers, and the guest sees
// exactly the granted environment, not the host's.
func TestComponentStdioEnv(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	t.Setenv("HOST_SECRET", "sk-must-not-leak")
	spec := compSpec{world: "script", imports: append(slices.Clone(printImports),
		compImport{iface: "wasi:cli/environment@0.2.6", name: "get-environment", id: "get_env"}),
		main: printHelpers + `
    (data (i32.const 0x400) "=\n")
    (data (i32.const 0x410) "to stderr\n")
` + capsuleRun + `
      (local $p i32) (local $n i32)
      (call $get_env (i32.const 0x200))
      (local.set $p (i32.load (i32.const 0x200)))
      (local.set $n (i32.load (i32.const 0x204)))
      (block $done (loop $next
        (br_if $done (i32.eqz (local.get $n)))
        (call $print (i32.load (local.get $p)) (i32.load offset=4 (local.get $p)))
        (call $print (i32.const 0x400) (i32.const 1))
        (call $print (i32.load offset=8 (local.get $p)) (i32.load offset=12 (local.get $p)))
        (call $print (i32.const 0x401) (i32.const 1))
        (local.set $p (i32.add (local.get $p) (i32.const 16)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $next)))
      (call $eprint (i32.const 0x410) (i32.const 10)))
`}
	mod, err := Compile(ctx, e, "cap", "capsule", RoleCapsule, spec.build(t))
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	g := wasm.Grants{MemoryBytes: 1 << 20, Stdout: &stdout, Stderr: &stderr, Env: []string{"ALLOWED=yes", "SECOND=2"}}
	if err := RunScript(ctx, e, mod, g, &Imports{}); err != nil {
		t.Fatal(err)
	}
	// The engine adds the Go runtime's pacing (GOMEMLIMIT: three quarters of 1 MiB).
	if stdout.String() != "ALLOWED=yes\nSECOND=2\nGOGC=off\nGOMEMLIMIT=786432\n" || stderr.String() != "to stderr\n" {
		t.Fatalf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

// TestComponentFilesystem: the granted folder is the guest's "."; a path out of it is
// refused, one inside is created.
func TestComponentFilesystem(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	spec := compSpec{world: "script", imports: append(slices.Clone(printImports),
		compImport{iface: "wasi:filesystem/preopens@0.2.6", name: "get-directories", id: "get_dirs"},
		compImport{iface: "wasi:filesystem/types@0.2.6", name: "[method]descriptor.open-at", id: "open_at"}),
		main: printHelpers + `
    (data (i32.const 0x400) "../escape.txt")
    (data (i32.const 0x420) "inside.txt")
    (data (i32.const 0x440) "escape:blocked\n")
    (data (i32.const 0x460) "escape:opened\n")
    (data (i32.const 0x480) "inside:ok\n")
    (data (i32.const 0x4a0) "inside:err\n")
` + capsuleRun + `
      (local $dir i32)
      (call $get_dirs (i32.const 0x200))
      (if (i32.eqz (i32.load (i32.const 0x204))) (then unreachable))
      (local.set $dir (i32.load (i32.load (i32.const 0x200))))
      (call $open_at (local.get $dir) (i32.const 0) (i32.const 0x400) (i32.const 13) (i32.const 1) (i32.const 2) (i32.const 0x300))
      (if (i32.load8_u (i32.const 0x300))
        (then (call $print (i32.const 0x440) (i32.const 15)))
        (else (call $print (i32.const 0x460) (i32.const 14))))
      (call $open_at (local.get $dir) (i32.const 0) (i32.const 0x420) (i32.const 10) (i32.const 1) (i32.const 2) (i32.const 0x300))
      (if (i32.load8_u (i32.const 0x300))
        (then (call $print (i32.const 0x4a0) (i32.const 11)))
        (else (call $print (i32.const 0x480) (i32.const 10)))))
`}
	mod, err := Compile(ctx, e, "cap", "capsule", RoleCapsule, spec.build(t))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	gfs, err := guestfs.New(work)
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	if err := RunScript(ctx, e, mod, wasm.Grants{FS: gfs, MemoryBytes: 1 << 20, Stdout: &stdout}, &Imports{}); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "escape:blocked\ninside:ok\n" {
		t.Fatalf("stdout %q", stdout.String())
	}
	if _, err := os.Stat(filepath.Join(root, "escape.txt")); err == nil {
		t.Fatal("the guest created a file outside its folder")
	}
	if _, err := os.Stat(filepath.Join(work, "inside.txt")); err != nil {
		t.Fatal(err)
	}
}

// TestComponentHTTP: wasi:http goes through the capsule's network policy: a host not
// allowed is denied at handle (HTTP-request-denied), an allowed one is answered.
func TestComponentHTTP(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hello" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	rules, err := netpolicy.ParseRules([]string{u.Host})
	if err != nil {
		t.Fatal(err)
	}
	out := &Outgoing{Capsule: "cap", Rules: rules, Metrics: e.Metrics()}
	out.Init()
	http := func(iface, name, id string) compImport { return compImport{iface: iface, name: name, id: id} }
	imports := append(slices.Clone(printImports),
		http("wasi:http/types@0.2.6", "[constructor]fields", "new_fields"),
		http("wasi:http/types@0.2.6", "[constructor]outgoing-request", "new_req"),
		http("wasi:http/types@0.2.6", "[method]outgoing-request.set-scheme", "set_scheme"),
		http("wasi:http/types@0.2.6", "[method]outgoing-request.set-authority", "set_authority"),
		http("wasi:http/types@0.2.6", "[method]outgoing-request.set-path-with-query", "set_path"),
		http("wasi:http/outgoing-handler@0.2.6", "handle", "handle"),
		http("wasi:http/types@0.2.6", "[method]future-incoming-response.subscribe", "subscribe"),
		http("wasi:http/types@0.2.6", "[method]future-incoming-response.get", "get"),
		http("wasi:http/types@0.2.6", "[method]incoming-response.status", "status"),
		http("wasi:io/poll@0.2.6", "[method]pollable.block", "block"))
	tests := []struct{ name, authority, want string }{
		{"denied", "blocked.example.com", "denied\n"},
		{"allowed", u.Host, "status:200\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := compSpec{world: "script", imports: imports, main: printHelpers + fmt.Sprintf(`
    (data (i32.const 0x400) %q)
    (data (i32.const 0x500) "/hello")
    (data (i32.const 0x520) "denied\n")
    (data (i32.const 0x530) "error\n")
    (data (i32.const 0x540) "status:200\n")
    (data (i32.const 0x550) "status:other\n")
    (data (i32.const 0x560) "no response\n")
`, tc.authority) + capsuleRun + fmt.Sprintf(`
      (local $req i32) (local $fut i32)
      (local.set $req (call $new_req (call $new_fields)))
      (drop (call $set_scheme (local.get $req) (i32.const 1) (i32.const 0) (i32.const 0) (i32.const 0)))
      (drop (call $set_authority (local.get $req) (i32.const 1) (i32.const 0x400) (i32.const %d)))
      (drop (call $set_path (local.get $req) (i32.const 1) (i32.const 0x500) (i32.const 6)))
      (call $handle (local.get $req) (i32.const 0) (i32.const 0) (i32.const 0x200))
      (if (i32.load8_u (i32.const 0x200))
        (then
          (if (i32.eq (i32.load8_u (i32.const 0x208)) (i32.const 15))
            (then (call $print (i32.const 0x520) (i32.const 7)))
            (else (call $print (i32.const 0x530) (i32.const 6))))
          (return)))
      (local.set $fut (i32.load (i32.const 0x208)))
      (call $block (call $subscribe (local.get $fut)))
      (call $get (local.get $fut) (i32.const 0x300))
      (if (i32.or (i32.eqz (i32.load8_u (i32.const 0x300)))
                  (i32.or (i32.load8_u (i32.const 0x308)) (i32.load8_u (i32.const 0x310))))
        (then (call $print (i32.const 0x560) (i32.const 12)) (return)))
      (if (i32.eq (call $status (i32.load (i32.const 0x318))) (i32.const 200))
        (then (call $print (i32.const 0x540) (i32.const 11)))
        (else (call $print (i32.const 0x550) (i32.const 13)))))
`, len(tc.authority))}
			mod, err := Compile(ctx, e, "cap", "capsule", RoleCapsule, spec.build(t))
			if err != nil {
				t.Fatal(err)
			}
			var stdout bytes.Buffer
			g := wasm.Grants{MemoryBytes: 1 << 20, Stdout: &stdout, Deadline: 10 * time.Second}
			if err := RunScript(ctx, e, mod, g, &Imports{HTTP: out, Who: "capsule"}); err != nil {
				t.Fatal(err)
			}
			if stdout.String() != tc.want {
				t.Fatalf("stdout %q, want %q", stdout.String(), tc.want)
			}
		})
	}
}

// TestComponentLimits: a spin loop and a never-ready pollable stop at the deadline, a
// memory balloon at the memory limit, each classified and counted like a core module's.
func TestComponentLimits(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	tests := []struct {
		name    string
		imports []compImport
		body    string
		g       wasm.Grants
		reason  string
		hint    string // in the error's message: the limit and the key to raise
	}{
		{name: "spin", body: capsuleRun + ` (loop $l (br $l)))`, g: wasm.Grants{MemoryBytes: 1 << 20, Deadline: 200 * time.Millisecond}, reason: wasm.ReasonDeadline,
			hint: "ran past its 200ms deadline: raise capabilities.limits.deadline_seconds"},
		{name: "balloon", body: capsuleRun + `
      (loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
      unreachable)`, g: wasm.Grants{MemoryBytes: 2 << 20, Deadline: 10 * time.Second}, reason: wasm.ReasonMemoryLimit,
			hint: "more than its 2097152-byte memory limit: raise capabilities.limits.memory_bytes"},
		{name: "pollable never ready", imports: []compImport{
			{iface: "wasi:clocks/monotonic-clock@0.2.6", name: "subscribe-duration", id: "after"},
			{iface: "wasi:io/poll@0.2.6", name: "[method]pollable.block", id: "block"},
		}, body: capsuleRun + ` (call $block (call $after (i64.const 3600000000000))))`,
			g: wasm.Grants{MemoryBytes: 1 << 20, Deadline: 200 * time.Millisecond}, reason: wasm.ReasonDeadline},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := compSpec{world: "script", imports: tc.imports, main: tc.body}
			artifact := strings.ReplaceAll(tc.name, " ", "-")
			mod, err := Compile(ctx, e, "cap", artifact, RoleCapsule, spec.build(t))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = RunScript(ctx, e, mod, tc.g, &Imports{})
			var ge *wasm.GuestError
			if !errors.As(err, &ge) || ge.Reason != tc.reason {
				t.Fatalf("err %v, want reason %s", err, tc.reason)
			}
			if !strings.Contains(err.Error(), tc.hint) {
				t.Errorf("message %q lacks %q", err, tc.hint)
			}
			if tc.g.Deadline < time.Second && time.Since(start) > 5*time.Second {
				t.Fatalf("stopped after %v", time.Since(start))
			}
			if got := testutil.ToFloat64(e.Metrics().Traps.WithLabelValues("cap", artifact, string(RoleCapsule), tc.reason)); got != 1 {
				t.Fatalf("%v traps counted, want 1", got)
			}
		})
	}
}

// TestComponentRefused: components the host cannot run are refused at Compile, with a
// code naming why, before anything runs.
func TestComponentRefused(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	toolMain := `
    (func (export "murmur:tool/run@0.1.0#run") (param i32 i32 i32 i32 i32 i32) (result i32) (i32.const 0))
    (func (export "cabi_post_murmur:tool/run@0.1.0#run") (param i32))
`
	capsuleMain := capsuleRun + `)`
	tests := []struct {
		name string
		role manifest.Role
		spec compSpec
		wat  string // instead of spec
		code string
		msg  string
	}{
		{name: "unserved WASI function", role: RoleCapsule, code: wasm.CodeCompImport, msg: "wasi:sockets/network@0.2.6#frobnicate",
			spec: compSpec{world: "script", main: capsuleMain, imports: []compImport{{iface: "wasi:sockets/network@0.2.6", name: "frobnicate", id: "x", typ: `(param "a" u32)`, sig: "(param i32)"}}}},
		{name: "unserved interface", role: RoleCapsule, code: wasm.CodeCompImport, msg: "murmur:memory/store@0.1.0",
			spec: compSpec{world: "script", main: capsuleMain, imports: []compImport{{iface: "murmur:memory/store@0.1.0", name: "get", id: "x", typ: `(param "a" u32)`, sig: "(param i32)"}}}},
		{name: "interface not offered to the role", role: manifest.RoleTool, code: wasm.CodeCompImport, msg: "not offered to a tool",
			spec: compSpec{world: "tool", main: toolMain, imports: []compImport{{iface: "murmur:tool-registry/invoke@0.1.0", name: "invoke", id: "x"}}}},
		{name: "unserved version", role: manifest.RoleTool, code: wasm.CodeCompImport, msg: "murmur:task/task@0.2.0",
			spec: compSpec{world: "tool", main: toolMain, imports: []compImport{{iface: "murmur:task/task@0.2.0", name: "request-input", id: "x", typ: `(param "p" string) (result string)`, sig: "(param i32 i32 i32)"}}}},
		{name: "WASI function of another type", role: RoleCapsule, code: wasm.CodeCompType, msg: "get-stdout as func() -> u32",
			spec: compSpec{world: "script", main: capsuleMain, imports: []compImport{{iface: "wasi:cli/stdout@0.2.6", name: "get-stdout", id: "x", typ: `(result u32)`, sig: "(result i32)"}}}},
		{name: "murmur function of another type", role: manifest.RoleTool, code: wasm.CodeCompType, msg: "request-input",
			spec: compSpec{world: "tool", main: toolMain, imports: []compImport{{iface: "murmur:task/task@0.1.0", name: "request-input", id: "x", typ: `(param "p" string) (result u32)`, sig: "(param i32 i32) (result i32)"}}}},
		{name: "defined resource", role: RoleCapsule, code: wasm.CodeCompGraph, msg: "defines its own resource",
			spec: compSpec{world: "script", main: capsuleMain, extra: "  (type $r (resource (rep i32)))\n"}},
		{name: "async lift", role: RoleCapsule, code: "E-COMP-006",
			spec: compSpec{world: "script", main: capsuleMain, liftOpt: " async"}},
		{name: "UTF-16 lift", role: RoleCapsule, code: wasm.CodeCompGraph, msg: "utf16",
			spec: compSpec{world: "script", main: capsuleMain, liftOpt: " string-encoding=utf16"}},
		{name: "run lifts another export", role: RoleCapsule, code: wasm.CodeCompExport, msg: `not a core export named "murmur:capsule/run@0.1.0#run"`,
			spec: compSpec{world: "script", main: `(func (export "other"))`, runCore: "other"}},
		{name: "export version not served", role: RoleCapsule, code: CodeExportVersion, msg: "murmur:capsule/run@0.2.0",
			spec: compSpec{world: "script", version: "0.2.0", main: `(func (export "murmur:capsule/run@0.2.0#run"))`}},
		{name: "role's world not exported", role: RoleCapsule, code: wasm.CodeCompExport, msg: "exports no murmur:capsule/run",
			spec: compSpec{world: "tool", main: toolMain}},
		{name: "preview1 imported by a module other than main", role: RoleCapsule, code: wasm.CodeCompAdapter, msg: "not its main module", wat: `(component
  (core module $other (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32))))
  (core module $p1 (func (export "fd_write") (param i32 i32 i32 i32) (result i32) (i32.const 0)))
  (core module $main (memory (export "memory") 1) (func (export "murmur:capsule/run@0.1.0#run")))
  (core instance $p (instantiate $p1))
  (core instance $o (instantiate $other (with "wasi_snapshot_preview1" (instance $p))))
  (core instance $m (instantiate $main))
  (alias core export $m "murmur:capsule/run@0.1.0#run" (core func $rc))
  (func $run (canon lift (core func $rc)))
  (instance $e (export "run" (func $run)))
  (export "murmur:capsule/run@0.1.0" (instance $e)))
`},
		{name: "preview1 function the host lacks", role: RoleCapsule, code: wasm.CodeCompAdapter, msg: `"fd_frobnicate"`, wat: `(component
  (core module $p1 (func (export "fd_frobnicate")))
  (core module $main
    (import "wasi_snapshot_preview1" "fd_frobnicate" (func))
    (memory (export "memory") 1)
    (func (export "murmur:capsule/run@0.1.0#run")))
  (core instance $p (instantiate $p1))
  (core instance $m (instantiate $main (with "wasi_snapshot_preview1" (instance $p))))
  (alias core export $m "murmur:capsule/run@0.1.0#run" (core func $rc))
  (func $run (canon lift (core func $rc)))
  (instance $e (export "run" (func $run)))
  (export "murmur:capsule/run@0.1.0" (instance $e)))
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b []byte
			if tc.wat != "" {
				path := filepath.Join(t.TempDir(), "c.wat")
				if err := os.WriteFile(path, []byte(tc.wat), 0o644); err != nil {
					t.Fatal(err)
				}
				b = watbuild.Wasm(t, path)
			} else {
				b = tc.spec.build(t)
			}
			_, err := Compile(ctx, e, "cap", "refused", tc.role, b)
			if err == nil {
				t.Fatal("compiled")
			}
			if !slices.Contains(errs.Codes(err), tc.code) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v (codes %v), want %s with %q", err, errs.Codes(err), tc.code, tc.msg)
			}
		})
	}
}

// TestComponentGlueCollision: two import module names bringing different functions
// under one name (two versions of wasi:cli/stdout) get a glue module each, and both
// functions are served.
func TestComponentGlueCollision(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	spec := compSpec{world: "script", imports: append(slices.Clone(printImports),
		compImport{iface: "wasi:cli/stdout@0.2.3", name: "get-stdout", id: "get_stdout_023"}),
		main: printHelpers + `
    (data (i32.const 0x400) "one\ntwo\n")
` + capsuleRun + `
      (call $print (i32.const 0x400) (i32.const 4))
      (call $bwf (call $get_stdout_023) (i32.const 0x404) (i32.const 4) (i32.const 0x80)))
`}
	mod, err := Compile(ctx, e, "cap", "capsule", RoleCapsule, spec.build(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := scriptStdout(t, e, mod); got != "one\ntwo\n" {
		t.Fatalf("stdout %q", got)
	}
}

// TestComponentPreview1Adapter: a component built with the preview1 adapter (the main
// module imports wasi_snapshot_preview1 through the shim, the fixup fills it with the
// adapter's functions) has its main module's preview1 calls served by the engine's
// preview1 host, with the call's grants; the adapter, which would fail the write, is
// instantiated but never called.
func TestComponentPreview1Adapter(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.wat")
	wat := `(component
  (core module $main
    (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
    (memory (export "memory") 1)
    (data (i32.const 0x100) "\00\02\00\00\03\00\00\00")
    (data (i32.const 0x200) "hi\n")
    (func (export "murmur:capsule/run@0.1.0#run")
      (if (call $fd_write (i32.const 1) (i32.const 0x100) (i32.const 1) (i32.const 0x300)) (then unreachable))))
  (core module $shim
    (type $w (func (param i32 i32 i32 i32) (result i32)))
    (table (export "$imports") 1 1 funcref)
    (func (export "0") (type $w) local.get 0 local.get 1 local.get 2 local.get 3 i32.const 0 call_indirect (type $w)))
  (core module $adapter
    (import "env" "memory" (memory 0))
    (func (export "fd_write") (param i32 i32 i32 i32) (result i32) (i32.const 52)))
  (core module $fixup
    (type $w (func (param i32 i32 i32 i32) (result i32)))
    (import "" "0" (func $f (type $w)))
    (import "" "$imports" (table 1 1 funcref))
    (elem (i32.const 0) func $f))
  (core instance $shim-i (instantiate $shim))
  (alias core export $shim-i "0" (core func $s0))
  (core instance $p1-bag (export "fd_write" (func $s0)))
  (core instance $main-i (instantiate $main (with "wasi_snapshot_preview1" (instance $p1-bag))))
  (alias core export $main-i "memory" (core memory $mem))
  (core instance $env (export "memory" (memory $mem)))
  (core instance $adapter-i (instantiate $adapter (with "env" (instance $env))))
  (alias core export $adapter-i "fd_write" (core func $a0))
  (alias core export $shim-i "$imports" (core table $t))
  (core instance $fix-args (export "$imports" (table $t)) (export "0" (func $a0)))
  (core instance (instantiate $fixup (with "" (instance $fix-args))))
  (alias core export $main-i "murmur:capsule/run@0.1.0#run" (core func $rc))
  (func $run (canon lift (core func $rc)))
  (instance $e (export "run" (func $run)))
  (export "murmur:capsule/run@0.1.0" (instance $e)))
`
	if err := os.WriteFile(path, []byte(wat), 0o644); err != nil {
		t.Fatal(err)
	}
	mod, err := Compile(ctx, e, "cap", "capsule", RoleCapsule, watbuild.Wasm(t, path))
	if err != nil {
		t.Fatal(err)
	}
	if got := scriptStdout(t, e, mod); got != "hi\n" {
		t.Fatalf("stdout %q", got)
	}
}

// scriptStdout runs the script capsule mod with 1 MiB of memory and returns what it
// wrote to stdout.
func scriptStdout(t *testing.T, e *wasm.Engine, mod *wasm.Module) string {
	t.Helper()
	var stdout bytes.Buffer
	if err := RunScript(context.Background(), e, mod, wasm.Grants{MemoryBytes: 1 << 20, Stdout: &stdout}, &Imports{}); err != nil {
		t.Fatal(err)
	}
	return stdout.String()
}

// TestComponentConcurrentCalls: concurrent calls of one component each get their own
// instance graph (anonymous instances, their own WASI host) and their own answer.
func TestComponentConcurrentCalls(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	spec := compSpec{world: "tool", imports: []compImport{{iface: "murmur:task/task@0.1.0", name: "request-input", id: "ask"}}, main: `
    (func (export "murmur:tool/run@0.1.0#run") (param i32 i32 i32 i32 i32 i32) (result i32)
      (call $ask (local.get 1) (local.get 2) (i32.const 0x140))
      (i32.store8 (i32.const 0x100) (i32.const 0))
      (i32.store8 (i32.const 0x104) (i32.const 0))
      (i32.store8 (i32.const 0x110) (i32.const 1))
      (i32.store (i32.const 0x114) (i32.load (i32.const 0x140)))
      (i32.store (i32.const 0x118) (i32.load (i32.const 0x144)))
      (i32.store8 (i32.const 0x11c) (i32.const 0))
      (i32.store8 (i32.const 0x128) (i32.const 0))
      (i32.store (i32.const 0x12c) (i32.const 0))
      (i32.store (i32.const 0x130) (i32.const 0))
      (i32.const 0x100))
    (func (export "cabi_post_murmur:tool/run@0.1.0#run") (param i32))
`}
	mod, err := Compile(ctx, e, "cap", "comp-tool", manifest.RoleTool, spec.build(t))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 8)
	for i := range 8 {
		go func() {
			q := fmt.Sprintf("q%d", i)
			h := &Imports{RequestInput: func(_ context.Context, p string) (string, error) { return p + "!", nil }}
			out, err := CallTool(ctx, e, mod, wasm.Grants{MemoryBytes: 1 << 20}, h, abi.ToolInput{Data: &q})
			if err == nil && (out.Data == nil || *out.Data != q+"!") {
				err = fmt.Errorf("call %d answered %+v", i, out)
			}
			errc <- err
		}()
	}
	for range 8 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}
