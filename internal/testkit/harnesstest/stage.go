package harnesstest

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
)

// StageCodes packs the process driver whose command is in pkgDir with the artifact
// manifest in pkgDir/artifact, publishes it into a registry of the test's own, and
// stages a capsule driving it under inference.transport process with the given
// capabilities block (YAML lines indented by two spaces). It returns the refusal codes
// in order, none when a driver's describe() the capabilities satisfy stages.
func StageCodes(t testing.TB, pkgDir, capabilities string) []string {
	t.Helper()
	art, err := os.ReadFile(filepath.Join(pkgDir, "artifact", "murmur.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	am, _, err := manifest.ParseArtifactManifest(art, "murmur.yaml")
	if err != nil || am == nil {
		t.Fatalf("artifact manifest: %v", err)
	}
	dir := filepath.Join(t.TempDir(), am.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "murmur.yaml"), art, 0o644)
	os.WriteFile(filepath.Join(dir, am.Name+".wasm"), guestbuild.Wasm(t, pkgDir), 0o644)
	data, _, err := registry.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.NewLocal(filepath.Join(t.TempDir(), "reg"))
	if _, err := reg.Publish(context.Background(), data, ""); err != nil {
		t.Fatal(err)
	}
	version := regexp.MustCompile(`(?m)^version: *(\S+)`).FindSubmatch(art)
	if version == nil {
		t.Fatal("artifact manifest without a version")
	}
	mpath := filepath.Join(t.TempDir(), "murmur.yaml")
	os.WriteFile(mpath, []byte(`name: harness-capsule
version: 1.0.0
artifacts:
  - {name: `+am.Name+`, version: `+string(version[1])+`, runtime: driver}
inference:
  transport: process
  driver: {artifact: `+am.Name+`}
  model: m
capabilities:
`+capabilities), 0o644)
	m, err := manifest.Load(mpath)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runtime.New(context.Background(), wasm.WithCacheDir(filepath.Join(guestbuild.CacheDir(), "wazero")))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	_, err = r.Stage(context.Background(), m, runtime.StageOptions{Registry: reg})
	return errs.Codes(err)
}

// OpenDriver compiles the process driver whose command is in pkgDir and holds it on the
// runtime's host for a run, as the runtime does (closed with the test).
func OpenDriver(t testing.TB, pkgDir, name string) *murmur.Driver {
	t.Helper()
	ctx := context.Background()
	e, err := wasm.NewEngine(ctx, murmur.Install())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(ctx) })
	mod, err := murmur.CompileWorld(ctx, e, "cap", name, manifest.RoleDriver, murmur.ProcessWorld, guestbuild.Wasm(t, pkgDir))
	if err != nil {
		t.Fatal(err)
	}
	if err := murmur.CheckWorld(mod, murmur.ProcessWorld); err != nil {
		t.Fatal(err)
	}
	d := murmur.OpenDriver(e, mod, wasm.Grants{MemoryBytes: 64 << 20, Deadline: 30 * time.Second})
	t.Cleanup(d.Close)
	return d
}
