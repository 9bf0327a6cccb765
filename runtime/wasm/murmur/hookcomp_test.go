package murmur

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// hookTypes are murmur:hook/lifecycle@0.9.0's types a test hook component's functions
// use, each exported by the lifecycle instance (hookTypeExports).
const hookTypes = `
  (type $tool-outcome (record (field "output-bytes" u64) (field "duration-ms" u64) (field "status" string)))
  (type $tool-event (record (field "turn" u32) (field "tool-name" string) (field "input-bytes" u64) (field "input" string)
    (field "outcome" (option $tool-outcome))))
  (type $inserted-by (enum "replace-context" "seed-context"))
  (type $message (record (field "role" string) (field "content" string) (field "id" (option string))
    (field "source-id" (option string)) (field "inserted-by" (option $inserted-by))))
  (type $tool-manifest (record (field "binary-name" string) (field "content" string)))
  (type $hook-output (variant (case "none") (case "replace-context" (list $message)) (case "write-manifests" (list $tool-manifest))
    (case "artifact" string) (case "reopen-task" string) (case "seed-context" (list $message)) (case "deny" string)))
  (type $task-end-event (record (field "task-id" string) (field "exit-status" string)))
`

const hookTypeExports = ` (export "tool-outcome" (type $tool-outcome)) (export "tool-event" (type $tool-event))` +
	` (export "inserted-by" (type $inserted-by)) (export "message" (type $message)) (export "tool-manifest" (type $tool-manifest))` +
	` (export "hook-output" (type $hook-output)) (export "task-end-event" (type $task-end-event))`

// hookMain is a hook component's main module: on-tool-call denies a call whose tool
// name starts with "rm" with a reason and answers none to the others; on-task-end
// answers none. Answers are result<hook-output, string> at 0x100: ok (0), the case at
// +4, the string at +8.
const hookMain = `
    (data (i32.const 0x400) "rm is not allowed here")
    (func (export "murmur:hook/lifecycle@0.9.0#on-tool-call")
      (param i32 i32 i32 i64 i32 i32 i32 i64 i64 i32 i32) (result i32)
      (i32.store8 (i32.const 0x100) (i32.const 0))
      (i32.store8 (i32.const 0x104) (i32.const 0))
      (if (i32.and (i32.ge_u (local.get 2) (i32.const 2))
                   (i32.eq (i32.load16_u (local.get 1)) (i32.const 0x6d72)))
        (then (i32.store8 (i32.const 0x104) (i32.const 6))
              (i32.store (i32.const 0x108) (i32.const 0x400))
              (i32.store (i32.const 0x10c) (i32.const 22))))
      (i32.const 0x100))
    (func (export "cabi_post_murmur:hook/lifecycle@0.9.0#on-tool-call") (param i32))
    (func (export "murmur:hook/lifecycle@0.9.0#on-task-end") (param i32 i32 i32 i32) (result i32)
      (i32.store8 (i32.const 0x100) (i32.const 0))
      (i32.store8 (i32.const 0x104) (i32.const 0))
      (i32.const 0x100))
    (func (export "deny-all") (param i32 i32 i32 i64 i32 i32 i32 i64 i64 i32 i32) (result i32)
      (i32.const 0x100))
`

// hookComp renders a hook component in wit-component's shape exporting the lifecycle
// functions funcs (on-tool-call, on-task-end), each lifting the core export
// murmur:hook/lifecycle@0.9.0#<fn> unless core names another; imports is component
// text put first (imports of instances it does not use).
func hookComp(funcs []string, core map[string]string, imports string) string {
	const iface = "murmur:hook/lifecycle@0.9.0"
	params := map[string]string{"on-tool-call": `(param "event" $tool-event)`, "on-task-end": `(param "event" $task-end-event)`}
	var b strings.Builder
	b.WriteString("(component\n" + imports + "  (core module $main\n" + mainPrelude + hookMain + "  )\n")
	b.WriteString("  (core instance $main-i (instantiate $main))\n")
	b.WriteString("  (alias core export $main-i \"memory\" (core memory $memory))\n")
	b.WriteString("  (alias core export $main-i \"cabi_realloc\" (core func $realloc))\n")
	b.WriteString(hookTypes)
	exports := hookTypeExports
	for i, fn := range funcs {
		c := core[fn]
		if c == "" {
			c = iface + "#" + fn
		}
		fmt.Fprintf(&b, "  (alias core export $main-i %q (core func $core%d))\n", c, i)
		post := ""
		if fn == "on-tool-call" {
			fmt.Fprintf(&b, "  (alias core export $main-i \"cabi_post_%s#%s\" (core func $post%d))\n", iface, fn, i)
			post = fmt.Sprintf(" (post-return $post%d)", i)
		}
		fmt.Fprintf(&b, "  (func $f%d %s (result (result $hook-output (error string))) (canon lift (core func $core%d) (memory $memory) (realloc $realloc)%s))\n",
			i, params[fn], i, post)
		exports += fmt.Sprintf(" (export %q (func $f%d))", fn, i)
	}
	fmt.Fprintf(&b, "  (instance $e%s)\n  (export %q (instance $e))\n)\n", exports, iface)
	return b.String()
}

func buildHookComp(t *testing.T, wat string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hook.wat")
	if err := os.WriteFile(path, []byte(wat), 0o644); err != nil {
		t.Fatal(err)
	}
	return watbuild.Wasm(t, path)
}

// TestComponentHook: a hook built as a component is accepted at Compile and by the hook
// world and binding checks, and CallHook calls its lifted lifecycle functions on its main
// instance: on-tool-call denies with its reason or answers none, on-task-end answers
// none, and a function it does not export answers none without a call.
func TestComponentHook(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	mod, err := Compile(ctx, e, "cap", "comp-hook", manifest.RoleHook, buildHookComp(t, hookComp([]string{"on-tool-call", "on-task-end"}, nil, "")))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckWorld(mod, string(manifest.RoleHook)); err != nil {
		t.Fatal(err)
	}
	for _, binding := range []string{"", "on-tool-call", "on-task-end"} {
		if err := CheckHook(mod, binding); err != nil {
			t.Errorf("bound to %q: %v", binding, err)
		}
	}
	if err := CheckHook(mod, "on-shell"); errs.Find(err, CodeHookExport) == nil {
		t.Errorf("bound to on-shell, which it does not export: %v, want %s", err, CodeHookExport)
	}
	tests := []struct {
		name   string
		fn     string
		record any
		want   HookAnswer
	}{
		{"deny", "on-tool-call", toolEvent("rm", `{"path":"/"}`, nil), HookAnswer{Case: "deny", Text: "rm is not allowed here"}},
		{"allow", "on-tool-call", toolEvent("echo", "hi", &[3]any{uint64(2), uint64(1), "passed"}), HookAnswer{Case: "none"}},
		{"other function", "on-task-end", []any{"tsk_1", "completed"}, HookAnswer{Case: "none"}},
		{"not exported", "on-shell", nil, HookAnswer{Case: "none"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CallHook(ctx, e, mod, wasm.Grants{MemoryBytes: 1 << 20}, tt.fn, tt.record)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("%s: %+v, %v; want %+v", tt.fn, got, err, tt.want)
			}
		})
	}
}

// TestComponentHookRefused: a hook component whose lifecycle function lifts another
// core export, that exports no lifecycle function, or that imports a murmur interface
// its world does not offer, at a level not served or with another type, is refused at
// Compile; one importing its world's interfaces compiles.
func TestComponentHookRefused(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	tests := []struct {
		name    string
		funcs   []string
		core    map[string]string
		imports string
		code    string
	}{
		{"lifts another export", []string{"on-tool-call", "on-task-end"}, map[string]string{"on-tool-call": "deny-all"}, "", wasm.CodeCompExport},
		{"no lifecycle function", nil, nil, "", CodeHookExport},
		{"imports murmur:task", []string{"on-tool-call"}, nil,
			`  (import "murmur:task/task@0.1.0" (instance (export "request-input" (func (param "prompt" string) (result string)))))` + "\n", wasm.CodeCompImport},
		{"imports murmur:tool/run", []string{"on-tool-call"}, nil, `  (import "murmur:tool/run@0.1.0" (instance))` + "\n", wasm.CodeCompImport},
		{"imports tokens of another level", []string{"on-tool-call"}, nil,
			`  (import "murmur:runtime/tokens@0.3.0" (instance (export "count" (func (param "text" string) (result u64)))))` + "\n", wasm.CodeCompImport},
		{"imports tokens with another type", []string{"on-tool-call"}, nil,
			`  (import "murmur:runtime/tokens@0.4.0" (instance (export "count" (func (param "text" string) (result u32)))))` + "\n", wasm.CodeCompType},
		{"imports the hook world", []string{"on-tool-call"}, nil,
			`  (import "murmur:runtime/tokens@0.4.0" (instance (export "count" (func (param "text" string) (result u64)))))` + "\n" +
				`  (import "murmur:task-io/read@0.1.0" (instance (export "output-len" (func (result (result u64 (error (enum "not-granted" "no-task" "no-output" "out-of-range"))))))))` + "\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(ctx, e, "cap", "comp-hook", manifest.RoleHook, buildHookComp(t, hookComp(tt.funcs, tt.core, tt.imports)))
			if tt.code == "" {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				return
			}
			if errs.Find(err, tt.code) == nil {
				t.Fatalf("Compile: %v, want %s", err, tt.code)
			}
		})
	}
}
