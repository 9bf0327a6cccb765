package murmur

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// FuzzCompileComponent stages arbitrary component bytes the whole way the gateway does
// (parse, plan, world check against what the host serves, glue generation, compiling
// every core module): it never panics, and every refusal carries a stable code. Seeded
// with the parser's test components, valid and refused, so mutations start from
// wit-component's shape.
func FuzzCompileComponent(f *testing.F) {
	dir := "../component/testdata"
	seeds, _ := filepath.Glob(filepath.Join(dir, "*.wat"))
	bad, _ := filepath.Glob(filepath.Join(dir, "bad", "*.wat"))
	for _, p := range append(seeds, bad...) {
		f.Add(watbuild.Wasm(f, p))
	}
	f.Add([]byte("\x00asm\x0d\x00\x01\x00"))
	ctx := context.Background()
	e, err := wasm.NewEngine(ctx, Install())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { e.Close(ctx) })
	roles := []manifest.Role{manifest.RoleTool, manifest.RoleDriver, RoleCapsule}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 8 || b[6] != 1 { // not a component: the engine's own fuzz targets cover core modules
			return
		}
		for _, role := range roles {
			if _, err := Compile(ctx, e, "fuzz", "fuzz", role, b); err != nil && errs.Code(err) == "" {
				t.Fatalf("refusal without a code: %v", err)
			}
		}
	})
}
