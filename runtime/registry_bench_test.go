package runtime

import (
	"context"
	"crypto/rand"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/ocitest"
	"github.com/capsulegate/capsulegate/internal/testkit/wasmtest"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// bigToolArchive is a 5 MiB tool artifact: the benchtool guest and incompressible
// padding beside it, as an artifact shipping data files would be.
func bigToolArchive(b *testing.B) []byte {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "bigtool")
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "data"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte("name: bigtool\nversion: 1.0.0\nruntime: tool\ndescription: a 5 MiB tool\n"), 0o644))
	wasmBytes := benchToolWasm(b)
	must(os.WriteFile(filepath.Join(dir, "bigtool.wasm"), wasmBytes, 0o644))
	pad := make([]byte, 5<<20-len(wasmBytes))
	rand.Read(pad)
	must(os.WriteFile(filepath.Join(dir, "data", "pad.bin"), pad, 0o644))
	data, _, err := registry.Pack(dir)
	must(err)
	return data
}

// BenchmarkStageRemote stages a script capsule whose one tool artifact is a 5 MiB archive,
// from a local registry folder, a real OCI registry (Debian's docker-registry on
// loopback) and a Nexus registry (the capsule_registry handler's server on loopback).
//
//   - cold: the artifact cache empty, so each op pulls, verifies (hashes against the
//     lock, opens every entry), caches and stages; the compilation cache is warm and
//     the engine new per op (a gateway restarting on a new machine whose compiled
//     modules were kept). The engine's own start is not timed.
//   - warm/restart: the artifact cache holds the archive and the registry is down;
//     otherwise as cold: a gateway restarting during a registry outage.
//   - warm/reload: the same, on an engine that has compiled the module before: a config
//     reload during a registry outage.
func BenchmarkStageRemote(b *testing.B) {
	ctx := context.Background()
	archive := bigToolArchive(b)
	local := registry.NewLocal(filepath.Join(b.TempDir(), "reg"))
	if _, err := local.Publish(ctx, archive, ""); err != nil {
		b.Fatal(err)
	}

	oci := ocitest.Start(b)
	nexusSrv := httptest.NewServer(&registry.NexusServer{Local: local, PublishToken: "bench-publish-token-0123"})
	b.Cleanup(nexusSrv.Close)
	sources := []struct {
		name string
		spec string
		down func()
	}{
		{"local", local.Root, nil},
		{"oci", oci.URL(), oci.Stop},
		{"nexus", "nexus+" + nexusSrv.URL, nexusSrv.Close},
	}
	ociSrc, err := registry.ParseSource(oci.URL())
	if err != nil {
		b.Fatal(err)
	}
	ociReg, err := registry.Open(ociSrc, registry.OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ociReg.(registry.Publisher).Publish(ctx, archive, ""); err != nil {
		b.Fatal(err)
	}

	dir := b.TempDir()
	mpath := filepath.Join(dir, "murmur.yaml")
	if err := os.WriteFile(mpath, []byte("name: bench\nversion: 1.0.0\nartifacts:\n  - {name: bigtool, version: 1.0.0}\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	script := wasmtest.Module{Imports: []wasmtest.Import{{Module: abi.ModuleRegistry, Name: abi.ImportInvoke}},
		Funcs: []wasmtest.Func{{Export: abi.ExportCapsuleRun, Body: wasmtest.Nop}}}.Encode()
	if err := os.WriteFile(filepath.Join(dir, "capsule.wasm"), script, 0o644); err != nil {
		b.Fatal(err)
	}
	m, err := manifest.Load(mpath)
	if err != nil {
		b.Fatal(err)
	}
	compiled := filepath.Join(b.TempDir(), "compiled")
	var stageOn func(b *testing.B, e *Runtime, reg registry.Registry, closeAfter bool)
	newEngine := func() *Runtime {
		e, err := New(ctx, wasm.WithCacheDir(compiled))
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	open := func(spec, cacheDir string) registry.Registry {
		src, err := registry.ParseSource(spec)
		if err != nil {
			b.Fatal(err)
		}
		if !src.Remote() {
			return registry.NewLocal(src.Dir)
		}
		c, err := registry.OpenCache(cacheDir, 0)
		if err != nil {
			b.Fatal(err)
		}
		r, err := registry.Open(src, registry.OpenOptions{Cache: c})
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	stage := func(b *testing.B, reg registry.Registry) { stageOn(b, newEngine(), reg, true) }
	stageOn = func(b *testing.B, e *Runtime, reg registry.Registry, closeAfter bool) {
		b.StartTimer()
		s, err := e.Stage(ctx, m, StageOptions{Registry: reg})
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Modules) != 1 {
			b.Fatalf("staged %d modules, want 1", len(s.Modules))
		}
		if closeAfter {
			e.Close(ctx)
		}
	}
	// The lock, and the compiled module on disk.
	b.StopTimer()
	stage(b, local)

	for _, src := range sources {
		b.Run("cold/"+src.name, func(b *testing.B) {
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				reg := open(src.spec, filepath.Join(b.TempDir(), "artifacts"))
				stage(b, reg)
			}
			b.SetBytes(int64(len(archive)))
		})
	}
	// Fill each remote's cache while every registry is up; each goes down for good before
	// its first warm run.
	caches := map[string]string{}
	for _, src := range sources[1:] {
		caches[src.name] = filepath.Join(b.TempDir(), "artifacts-"+src.name)
		stage(b, open(src.spec, caches[src.name]))
	}
	for _, src := range sources[1:] {
		var once sync.Once
		b.Run("warm/restart/"+src.name, func(b *testing.B) {
			b.StopTimer()
			once.Do(src.down)
			for i := 0; i < b.N; i++ {
				stage(b, open(src.spec, caches[src.name]))
			}
		})
		b.Run("warm/reload/"+src.name, func(b *testing.B) {
			b.StopTimer()
			once.Do(src.down)
			e := newEngine()
			defer e.Close(ctx)
			stageOn(b, e, open(src.spec, caches[src.name]), false)
			for i := 0; i < b.N; i++ {
				stageOn(b, e, open(src.spec, caches[src.name]), false)
			}
		})
	}
}
