package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/guestfs"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// The tiny tool guest (internal/testkit/testguests/tinytool/tinytool.wat): a tool written by hand
// in the WebAssembly text format, without a Go runtime, run through the same staging,
// grants and engine path as the Go tools.

const tinyWat = "../internal/testkit/testguests/tinytool/tinytool.wat"

// tinyModes are the engine configurations a tool call can take: a fresh instance per
// call (wasm.WithoutInstanceReuse) and a warm instance reset between calls (the default).
var tinyModes = []struct {
	name string
	opts []wasm.EngineOption
}{
	{"fresh", []wasm.EngineOption{wasm.WithoutInstanceReuse()}},
	{"warm", nil},
}

// tinyRig is a runtime with a script capsule staged from a registry holding the tiny
// tool as a wasm tool artifact, and the grants a session gives that tool.
type tinyRig struct {
	rt       *Runtime
	m        *manifest.Manifest
	reg      *registry.Local
	mod      *wasm.Module
	grants   wasm.Grants
	manifest string
}

func newTinyRig(tb testing.TB, opts ...wasm.EngineOption) *tinyRig {
	tb.Helper()
	ctx := context.Background()
	tiny := watbuild.Wasm(tb, tinyWat)
	r, _ := newRuntime(tb, append([]wasm.EngineOption{wasm.WithCacheDir(guestbuild.WazeroCache())}, opts...)...)
	reg := registry.NewLocal(filepath.Join(tb.TempDir(), "reg"))
	publishTiny(tb, reg, tiny)
	dir := tb.TempDir()
	mpath := filepath.Join(dir, "murmur.yaml")
	mf := "name: tiny\nversion: 1.0.0\nartifacts:\n  - {name: tinytool, version: 1.0.0}\n" +
		"capabilities:\n  env: {allow: [TESTGUEST_TOOL]}\n  limits: {memory_bytes: 134217728, deadline_seconds: 60}\n"
	if err := os.WriteFile(mpath, []byte(mf), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "capsule.wasm"), guestbuild.Wasm(tb, "../internal/testkit/testguests/script"), 0o644); err != nil {
		tb.Fatal(err)
	}
	m, err := manifest.Load(mpath)
	if err != nil {
		tb.Fatal(err)
	}
	staged, err := r.Stage(ctx, m, StageOptions{Registry: reg})
	if err != nil {
		tb.Fatal(err)
	}
	mod := staged.Modules["tinytool"]
	if mod == nil || mod.Role != string(manifest.RoleTool) {
		tb.Fatalf("tinytool not staged as a tool: %+v", staged.Modules)
	}
	gfs, err := guestfs.New(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { gfs.Close() })
	// What session.grants gives a tool, from the manifest only.
	env := GuestEnv(m, func(string) (string, bool) { return "", false }, RuntimeEnv(m, "ses_tiny", ""))
	g := wasm.Grants{FS: gfs, Env: env, MemoryBytes: m.Capabilities.Limits.MemoryBytes, Deadline: m.Deadline(manifest.RoleTool)}
	return &tinyRig{rt: r, m: m, reg: reg, mod: mod, grants: g, manifest: mpath}
}

// publishTiny packs and publishes the tiny tool as the wasm tool artifact "tinytool".
func publishTiny(tb testing.TB, reg *registry.Local, wasm []byte) {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "tinytool")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	art := "name: tinytool\nversion: 1.0.0\nruntime: tool\ndescription: a tool guest written in the wasm text format\n"
	if err := os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte(art), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tinytool.wasm"), wasm, 0o644); err != nil {
		tb.Fatal(err)
	}
	data, _, err := registry.Pack(dir)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := reg.Publish(context.Background(), data, ""); err != nil {
		tb.Fatal(err)
	}
}

func (r *tinyRig) call(in abi.ToolInput) (abi.ToolResult, error) {
	return murmur.CallTool(context.Background(), r.rt.engine, r.mod, r.grants, &murmur.Imports{Who: r.mod.Artifact}, in)
}

// TestTinyToolScriptCapsule: a script capsule invokes the tiny tool through
// murmur:tool-registry/invoke in a real session, and its answer is the tool's output.
func TestTinyToolScriptCapsule(t *testing.T) {
	for _, mode := range tinyModes {
		t.Run(mode.name, func(t *testing.T) {
			rig := newTinyRig(t, mode.opts...)
			lookup := func(k string) (string, bool) { return "tinytool", k == "TESTGUEST_TOOL" }
			res, err := rig.rt.RunOnce(context.Background(), rig.m, RunOptions{Registry: rig.reg, Task: "say hello",
				Session: SessionConfig{WorkRoot: t.TempDir(), LookupEnv: lookup}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != StateCompleted || res.Result != "HELLO" {
				t.Fatalf("result = %+v", res)
			}
		})
	}
}

// TestTinyToolCall: input → output through CallTool, repeatedly, so that with reuse the
// later calls run on a warm instance; one call's allocations never leak into the next.
func TestTinyToolCall(t *testing.T) {
	tests := []struct {
		in       *string
		status   abi.Status
		data     string
		summary  string
		metadata [][2]string
	}{
		{strp("hello, tiny tool"), abi.StatusPassed, "HELLO, TINY TOOL", "", [][2]string{{"len", "16"}}},
		{strp(""), abi.StatusPassed, "", "", [][2]string{{"len", "0"}}},
		{strp("déjà vu: 42"), abi.StatusPassed, "DéJà VU: 42", "", [][2]string{{"len", "13"}}},
		{strp(strings.Repeat("abc", 40000)), abi.StatusPassed, strings.Repeat("ABC", 40000), "", [][2]string{{"len", "120000"}}},
		{strp("!x"), abi.StatusPassed, "!X", "", [][2]string{{"len", "2"}}},
		{nil, abi.StatusFailed, "", "tinytool: no input data", nil},
	}
	for _, mode := range tinyModes {
		t.Run(mode.name, func(t *testing.T) {
			rig := newTinyRig(t, mode.opts...)
			for round := range 3 {
				for _, tt := range tests {
					out, err := rig.call(abi.ToolInput{Data: tt.in})
					if err != nil {
						t.Fatalf("round %d, input %.20q: %v", round, value(tt.in), err)
					}
					if out.Status != tt.status || value(out.Data) != tt.data || value(out.Summary) != tt.summary ||
						fmt.Sprint(out.Metadata) != fmt.Sprint(tt.metadata) || out.DataPath != nil || out.Truncated {
						t.Fatalf("round %d, input %.20q: got %+v (data %.20q, summary %q)", round, value(tt.in), out, value(out.Data), value(out.Summary))
					}
				}
			}
		})
	}
}

// TestTinyToolMalformedResult: a malformed result from the tiny tool is refused as from
// any guest — an E-RUN-003 of reason abi matching abi.ErrABI, no partial result — and
// the next call of the same module succeeds.
func TestTinyToolMalformedResult(t *testing.T) {
	tests := []struct{ in, says string }{
		{"!p", "past memory size"},
		{"!u", "invalid UTF-8"},
		{"!s", "discriminant 7 out of range"},
	}
	for _, mode := range tinyModes {
		t.Run(mode.name, func(t *testing.T) {
			rig := newTinyRig(t, mode.opts...)
			for _, tt := range tests {
				res, err := rig.call(abi.ToolInput{Data: strp(tt.in)})
				var ge *wasm.GuestError
				if !errors.As(err, &ge) || ge.Reason != wasm.ReasonABI || !errors.Is(err, abi.ErrABI) {
					t.Fatalf("%s: want a guest error of reason abi, got %v", tt.in, err)
				}
				if errs.Code(err) != wasm.CodeGuest || ge.Artifact != "tinytool" || !strings.Contains(err.Error(), tt.says) {
					t.Errorf("%s: error lacks its code, artifact or %q: %v", tt.in, tt.says, err)
				}
				if res.Status != 0 || res.Summary != nil || res.Data != nil || res.Metadata != nil {
					t.Errorf("%s: a partial result escaped: %+v", tt.in, res)
				}
				out, err := rig.call(abi.ToolInput{Data: strp("next")})
				if err != nil || value(out.Data) != "NEXT" {
					t.Fatalf("%s: the next call: %+v, %v", tt.in, out, err)
				}
			}
		})
	}
}

// TestTinyToolMemoryLimit: the tiny tool's allocator runs into the manifest's memory
// limit like any guest; the call fails memory_limit.
func TestTinyToolMemoryLimit(t *testing.T) {
	rig := newTinyRig(t)
	g := rig.grants
	g.MemoryBytes = 2 * 64 << 10 // two pages: the input fits, its uppercased copy does not
	big := strings.Repeat("x", 64<<10)
	_, err := murmur.CallTool(context.Background(), rig.rt.engine, rig.mod, g, &murmur.Imports{Who: "tinytool"}, abi.ToolInput{Data: &big})
	var ge *wasm.GuestError
	if !errors.As(err, &ge) || ge.Reason != wasm.ReasonMemoryLimit {
		t.Fatalf("want reason memory_limit, got %v", err)
	}
}

func strp(s string) *string { return &s }
