package runtime

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/wasmtest"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
)

func toolModule(export string, pages uint32) []byte {
	return wasmtest.Module{Funcs: []wasmtest.Func{{Export: export, Body: wasmtest.Nop}}, MemoryPages: pages}.Encode()
}

// packedArtifacts holds the archives publishArtifact packed, by content: packing deflates a Go
// guest of megabytes (slowly, under -race), and the tests publish the same few guests
// many times.
var packedArtifacts sync.Map // [32]byte -> []byte

// publishArtifact packs an artifact folder of yaml as murmur.yaml and wasm as
// <name>.wasm, once per process for the same files, and publishes it to reg.
func publishArtifact(t testing.TB, reg *registry.Local, name string, yaml, wasm []byte) {
	t.Helper()
	h := sha256.New()
	fmt.Fprintf(h, "%q %d %d\n", name, len(yaml), len(wasm))
	h.Write(yaml)
	h.Write(wasm)
	key := [32]byte(h.Sum(nil))
	data, ok := packedArtifacts.Load(key)
	if !ok {
		dir := filepath.Join(t.TempDir(), name)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "murmur.yaml"), yaml, 0o644)
		os.WriteFile(filepath.Join(dir, name+".wasm"), wasm, 0o644)
		b, _, err := registry.Pack(dir)
		if err != nil {
			t.Fatal(err)
		}
		data, _ = packedArtifacts.LoadOrStore(key, b)
	}
	if _, err := reg.Publish(context.Background(), data.([]byte), ""); err != nil {
		t.Fatal(err)
	}
}

// publishWasm packs and publishes a wasm artifact.
func publishWasm(t testing.TB, reg *registry.Local, name, role string, wasm []byte) {
	t.Helper()
	art := fmt.Sprintf("name: %s\nversion: 1.0.0\nruntime: %s\n", name, role)
	if real, err := os.ReadFile(filepath.Join("..", "examples", "drivers", name, "artifact", "murmur.yaml")); err == nil && role == "driver" {
		// An example driver keeps what its own manifest says of its provider (upstream_auth).
		art = regexp.MustCompile(`(?m)^version: .*$`).ReplaceAllString(string(real), "version: 1.0.0")
	}
	publishArtifact(t, reg, name, []byte(art), wasm)
}

func TestStage(t *testing.T) {
	ctx := context.Background()
	e, _ := newRuntime(t)
	reg := registry.NewLocal(filepath.Join(t.TempDir(), "reg"))
	publishWasm(t, reg, "echo", "tool", toolModule("murmur:tool/run@0.1.0#run", 1))
	publishWasm(t, reg, "future", "tool", toolModule("murmur:tool/run@0.3.0#run", 1))
	publishWasm(t, reg, "fat", "tool", toolModule("murmur:tool/run@0.1.0#run", 100))
	script := wasmtest.Module{Imports: []wasmtest.Import{{Module: "murmur:tool-registry/invoke@0.1.0", Name: "invoke"}},
		Funcs: []wasmtest.Func{{Export: "murmur:capsule/run@0.1.0#run", Body: wasmtest.Nop}}}.Encode()

	tests := []struct {
		name    string
		tool    string
		modules map[string][]byte
		extra   string
		code    string
		says    string
	}{
		{"script capsule with a wasm tool", "echo", map[string][]byte{"capsule.wasm": script}, "", "", ""},
		{"one other wasm is the module", "echo", map[string][]byte{"main.wasm": script}, "", "", ""},
		{"no module", "echo", nil, "", CodeScriptModule, "no capsule.wasm"},
		{"two modules", "echo", map[string][]byte{"a.wasm": script, "b.wasm": script}, "", CodeScriptModule, "a.wasm, b.wasm"},
		{"unserved tool version", "future", map[string][]byte{"capsule.wasm": script}, "", murmur.CodeExportVersion, "murmur:tool/run@0.3.0#run"},
		{"memory floor over the limit", "fat", map[string][]byte{"capsule.wasm": script}, "capabilities:\n  limits: {memory_bytes: 1048576}\n", wasm.CodeMemoryFloor, "fat"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			mpath := filepath.Join(dir, "murmur.yaml")
			os.WriteFile(mpath, []byte(fmt.Sprintf("name: cap\nversion: 1.0.0\nartifacts:\n  - {name: %s, version: 1.0.0}\n%s", tt.tool, tt.extra)), 0o644)
			for name, data := range tt.modules {
				os.WriteFile(filepath.Join(dir, name), data, 0o644)
			}
			m, err := manifest.Load(mpath)
			if err != nil {
				t.Fatal(err)
			}
			s, err := e.Stage(ctx, m, StageOptions{Registry: reg})
			if tt.code != "" {
				if errs.Find(err, tt.code) == nil || !strings.Contains(err.Error(), tt.says) {
					t.Fatalf("want %s saying %q, got %v", tt.code, tt.says, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Script == nil || s.Modules[tt.tool] == nil {
				t.Fatalf("staged = %+v", s)
			}
			if _, err := os.Stat(filepath.Join(dir, "murmur.lock")); err != nil {
				t.Fatalf("no lock written: %v", err)
			}
			// A second stage verifies against the lock it wrote.
			if _, err := e.Stage(ctx, m, StageOptions{Registry: reg}); err != nil {
				t.Fatalf("restage: %v", err)
			}
		})
	}
}

// TestStageSharesModules stages copies of one capsule under other names: each gets its
// own modules, named for it, while a module already checked under a higher memory limit
// is still refused under a lower one.
func TestStageSharesModules(t *testing.T) {
	ctx := context.Background()
	e, _ := newRuntime(t)
	reg := registry.NewLocal(filepath.Join(t.TempDir(), "reg"))
	publishWasm(t, reg, "fat", "tool", toolModule("murmur:tool/run@0.1.0#run", 100))
	script := wasmtest.Module{Imports: []wasmtest.Import{{Module: "murmur:tool-registry/invoke@0.1.0", Name: "invoke"}},
		Funcs: []wasmtest.Func{{Export: "murmur:capsule/run@0.1.0#run", Body: wasmtest.Nop}}}.Encode()
	stage := func(name, extra string) (*Staged, error) {
		dir := filepath.Join(t.TempDir(), name)
		os.MkdirAll(dir, 0o755)
		mpath := filepath.Join(dir, "murmur.yaml")
		os.WriteFile(mpath, []byte("name: "+name+"\nversion: 1.0.0\nartifacts:\n  - {name: fat, version: 1.0.0}\n"+extra), 0o644)
		os.WriteFile(filepath.Join(dir, "capsule.wasm"), script, 0o644)
		m, err := manifest.Load(mpath)
		if err != nil {
			t.Fatal(err)
		}
		return e.Stage(ctx, m, StageOptions{Registry: reg})
	}
	a, err := stage("a", "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := stage("b", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Staged{a, b} {
		name := s.Manifest.Name
		if s.Script.Capsule != name || s.Script.Artifact != name || s.Modules["fat"].Capsule != name || s.Modules["fat"].Artifact != "fat" {
			t.Fatalf("capsule %s staged script %+v, tool %+v", name, s.Script, s.Modules["fat"])
		}
		path, sum := s.ScriptSum()
		if path != filepath.Join(s.Manifest.Dir, "capsule.wasm") || sum != fmt.Sprintf("%x", sha256.Sum256(script)) {
			t.Fatalf("ScriptSum = %s, %s", path, sum)
		}
	}
	if a.Script == b.Script || a.Modules["fat"] == b.Modules["fat"] {
		t.Fatal("two capsules share one module value")
	}
	if _, err := stage("small", "capabilities:\n  limits: {memory_bytes: 1048576}\n"); errs.Find(err, wasm.CodeMemoryFloor) == nil {
		t.Fatalf("want %s, got %v", wasm.CodeMemoryFloor, err)
	}
}
