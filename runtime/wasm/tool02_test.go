package wasm

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/errs"
	"github.com/capsulegate/capsulegate/internal/watbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// TestTool02: a tool exporting murmur:tool/run@0.2.0 (internal/testguests/attachtool) is
// served beside 0.1.0: CallTool lowers its input and lifts its result with the
// attachments; the same guest exporting a version of no served level is refused.
func TestTool02(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	src := "../../internal/testguests/attachtool/attachtool.wat"
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
			mod, err := e.Compile(ctx, "cap", "attachtool", manifest.RoleTool, watbuild.Wasm(t, path))
			if err != nil {
				t.Fatal(err)
			}
			err = mod.CheckWorld(string(manifest.RoleTool))
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
				out, err := e.CallTool(ctx, mod, Grants{MemoryBytes: 16 << 20}, &Imports{}, abi.ToolInput{Data: &data})
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
