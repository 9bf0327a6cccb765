package murmur

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// procComp renders a process-driver component in wit-component's shape: it exports
// murmur:driver/process@version with the functions funcs, each of the host's type and
// lifting the core export <interface>@<version>#<fn> of its main module (or the one
// core names), whose stubs answer the zero value of every type (a zeroed return area);
// imports is component text put first (imports of instances it does not use). The
// types are written inline from abi.ProcessFuncs, so they are the host's by
// construction.
func procComp(version string, funcs []string, core map[string]string, imports string) string {
	iface := abi.ProcessInterface + "@" + version
	var b strings.Builder
	b.WriteString("(component\n" + imports + "  (core module $main\n" + mainPrelude)
	for _, fn := range funcs {
		p, r := abi.ProcessFuncs[fn].ExportSignature()
		fmt.Fprintf(&b, "    (func (export %q)%s%s", iface+"#"+fn, valTypes(" (param", p), valTypes(" (result", r))
		// Every result spills: the stub returns a zeroed area.
		b.WriteString(" (i32.const 0x100))\n")
	}
	// parse's core type, for a lift of another export.
	b.WriteString(`    (func (export "other") (param i32 i32) (result i32) (i32.const 0x100))` + "\n  )\n")
	b.WriteString("  (core instance $main-i (instantiate $main))\n")
	b.WriteString("  (alias core export $main-i \"memory\" (core memory $memory))\n")
	b.WriteString("  (alias core export $main-i \"cabi_realloc\" (core func $realloc))\n")
	exports := ""
	for i, fn := range funcs {
		c := core[fn]
		if c == "" {
			c = iface + "#" + fn
		}
		sig := funcSig(abi.ProcessFuncs[fn], nil)
		fmt.Fprintf(&b, "  (alias core export $main-i %q (core func $core%d))\n", c, i)
		fmt.Fprintf(&b, "  (func $f%d%s (canon lift (core func $core%d) (memory $memory) (realloc $realloc)))\n", i, sig, i)
		exports += fmt.Sprintf(" (export %q (func $f%d))", fn, i)
	}
	if len(funcs) > 0 {
		fmt.Fprintf(&b, "  (instance $e%s)\n  (export %q (instance $e))\n", exports, iface)
	}
	b.WriteString(")\n")
	return b.String()
}

// valTypes renders core value types as a (param …) or (result …) clause, "" for none.
func valTypes(open string, vs []abi.ValType) string {
	if len(vs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(open)
	for _, v := range vs {
		b.WriteString(" " + v.String())
	}
	return b.String() + ")"
}

func buildProcComp(t *testing.T, wat string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "proc.wat")
	if err := os.WriteFile(path, []byte(wat), 0o644); err != nil {
		t.Fatal(err)
	}
	return watbuild.Wasm(t, path)
}

// processFuncNames are the process interface's functions in a stable order.
func processFuncNames() []string {
	var out []string
	for fn := range abi.ProcessFuncs {
		out = append(out, fn)
	}
	slices.Sort(out)
	return out
}

// TestProcessComponentRefused: a process-driver component is checked like a core
// module — the interface whole at 0.6.x (E-PRC-002, E-PRC-003), no import but WASI
// 0.2 without wasi:http or wasi:sockets (E-PRC-004), not named under transport http
// (E-PRC-001) — and like a component: each function a direct lift (E-COMP-012). The
// first row is accepted, and its describe answers the stub's zero description.
func TestProcessComponentRefused(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	all := processFuncNames()
	tests := []struct {
		name    string
		world   string // "" for ProcessWorld
		version string
		funcs   []string
		core    map[string]string
		imports string
		code    string
		names   string // what the refusal must name
	}{
		{name: "the whole interface", version: "0.6.0", funcs: all},
		{name: "a later patch, with an unused WASI import", version: "0.6.3", funcs: all,
			imports: `  (import "wasi:random/random@0.2.6" (instance (export "get-random-u64" (func (result u64)))))` + "\n"},
		{name: "imports a murmur interface", version: "0.6.0", funcs: all,
			imports: `  (import "murmur:text/chunks@0.1.0" (instance (export "emit-chunk" (func (param "text" string)))))` + "\n",
			code:    CodeProcessImport, names: "murmur:text/chunks@0.1.0"},
		{name: "imports wasi:sockets", version: "0.6.0", funcs: all,
			imports: `  (import "wasi:sockets/instance-network@0.2.6" (instance))` + "\n", code: CodeProcessImport, names: "wasi:sockets/instance-network@0.2.6"},
		{name: "imports wasi:http", version: "0.6.0", funcs: all,
			imports: `  (import "wasi:http/types@0.2.6" (instance))` + "\n", code: CodeProcessImport, names: "wasi:http/types@0.2.6"},
		{name: "another level", version: "0.5.0", funcs: all, code: CodeProcessLevel, names: "0.5.0"},
		{name: "not every function", version: "0.6.0", funcs: all[1:], code: CodeProcessLevel, names: "0.6.0"},
		{name: "no process interface", code: CodeProcessMissing, names: abi.ProcessInterface},
		{name: "lifts another export", version: "0.6.0", funcs: all, core: map[string]string{abi.ProcessParse: "other"}, code: wasm.CodeCompExport, names: "parse"},
		{name: "named under transport http", world: string(manifest.RoleDriver), version: "0.6.0", funcs: all, code: CodeProcessUnderHTTP, names: "0.6.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			world := tt.world
			if world == "" {
				world = ProcessWorld
			}
			mod, err := CompileWorld(ctx, e, "cap", "comp-proc", manifest.RoleDriver, world, buildProcComp(t, procComp(tt.version, tt.funcs, tt.core, tt.imports)))
			if tt.code != "" {
				got := errs.Find(err, tt.code)
				if got == nil || !strings.Contains(err.Error(), tt.names) {
					t.Fatalf("CompileWorld: %v, want %s naming %q", err, tt.code, tt.names)
				}
				return
			}
			if err != nil {
				t.Fatalf("CompileWorld: %v", err)
			}
			if err := CheckWorld(mod, ProcessWorld); err != nil {
				t.Fatalf("CheckWorld: %v", err)
			}
			if err := CheckWorld(mod, string(manifest.RoleDriver)); errs.Find(err, CodeProcessUnderHTTP) == nil {
				t.Errorf("CheckWorld(driver): %v, want %s", err, CodeProcessUnderHTTP)
			}
			if got, want := ProcessExport(mod, abi.ProcessParse), abi.ProcessInterface+"@"+tt.version+"#parse"; got != want {
				t.Errorf("ProcessExport(parse) = %q, want %q", got, want)
			}
			desc, err := Describe(ctx, e, mod, wasm.Grants{MemoryBytes: 64 << 20})
			if err != nil || desc.Harness != "" || desc.Binary != "" || desc.Interrupt != "stdin-message" {
				t.Errorf("describe: %+v, %v", desc, err)
			}
		})
	}
}
