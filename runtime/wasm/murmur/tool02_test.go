package murmur

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// TestTool02: a tool exporting murmur:tool/run@0.2.0 (internal/testkit/testguests/attachtool) is
// served beside 0.1.0: CallTool lowers its input and lifts its result with the
// attachments; the same guest exporting a version of no served level is refused.
func TestTool02(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	src := "../../../internal/testkit/testguests/attachtool/attachtool.wat"
	text, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		version, code, says string
	}{
		{"0.2.0", "", ""},
		{"0.2.7", "", ""},
		{"0.3.0", CodeExportVersion, "version 0.3.0 of murmur:tool/run, which this host does not serve (it serves murmur:tool/run 0.1.x and 0.2.x)"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			path := src
			if tc.version != "0.2.0" {
				path = filepath.Join(t.TempDir(), "attachtool.wat")
				if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(text), "@0.2.0#run", "@"+tc.version+"#run")), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			mod, err := Compile(ctx, e, "cap", "attachtool", manifest.RoleTool, watbuild.Wasm(t, path))
			if err != nil {
				t.Fatal(err)
			}
			err = CheckWorld(mod, string(manifest.RoleTool))
			if tc.code != "" {
				if errs.Find(err, tc.code) == nil || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("want %s saying %q, got %v", tc.code, tc.says, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			data := `{"q":"chart"}`
			for i := range 2 {
				out, err := CallTool(ctx, e, mod, wasm.Grants{MemoryBytes: 16 << 20}, &Imports{}, abi.ToolInput{Data: &data})
				if err != nil {
					t.Fatal(err)
				}
				want := []abi.Attachment{{MediaType: "image/png", Path: "out/chart.png"}}
				if out.Status != abi.StatusPassed || deref(out.Summary) != "attached" || deref(out.Data) != data || !reflect.DeepEqual(out.Attachments, want) {
					t.Fatalf("call %d: %+v", i, out)
				}
			}
		})
	}
}

// TestComponentTool02: a tool component exporting murmur:tool/run@0.2.0 is called through
// CallTool with its attachments lifted; at 0.3.0 it is refused at Compile, naming the
// levels served.
func TestComponentTool02(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	main := func(ver string) string {
		return `
    (data (i32.const 0x400) "image/png")
    (data (i32.const 0x410) "out/chart.png")
    (func (export "murmur:tool/run@` + ver + `#run") (param i32 i32 i32 i32 i32 i32) (result i32)
      (memory.fill (i32.const 0x100) (i32.const 0) (i32.const 60))
      (i32.store8 (i32.const 0x110) (local.get 0))
      (i32.store (i32.const 0x114) (local.get 1))
      (i32.store (i32.const 0x118) (local.get 2))
      (i32.store (i32.const 0x134) (i32.const 0x200))
      (i32.store (i32.const 0x138) (i32.const 1))
      (i32.store (i32.const 0x200) (i32.const 0x400))
      (i32.store (i32.const 0x204) (i32.const 9))
      (i32.store (i32.const 0x208) (i32.const 0x410))
      (i32.store (i32.const 0x20c) (i32.const 13))
      (i32.const 0x100))
    (func (export "cabi_post_murmur:tool/run@` + ver + `#run") (param i32))
`
	}
	mod, err := Compile(ctx, e, "cap", "comp-tool02", manifest.RoleTool, compSpec{world: "tool", version: "0.2.0", main: main("0.2.0")}.build(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckWorld(mod, string(manifest.RoleTool)); err != nil {
		t.Fatal(err)
	}
	data := "hello"
	out, err := CallTool(ctx, e, mod, wasm.Grants{MemoryBytes: 1 << 20}, &Imports{}, abi.ToolInput{Data: &data})
	want := []abi.Attachment{{MediaType: "image/png", Path: "out/chart.png"}}
	if err != nil || out.Status != abi.StatusPassed || deref(out.Data) != data || !reflect.DeepEqual(out.Attachments, want) {
		t.Fatalf("%+v, %v", out, err)
	}
	_, err = Compile(ctx, e, "cap", "comp-tool03", manifest.RoleTool, compSpec{world: "tool", version: "0.3.0", main: main("0.3.0")}.build(t))
	if errs.Find(err, CodeExportVersion) == nil || !strings.Contains(err.Error(), "it serves murmur:tool/run 0.1.x and 0.2.x") {
		t.Fatalf("0.3.0: %v", err)
	}
}
