package wasm

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/wasmtest"
)

// TestMergeDataSegmentsKeepsMemory: a Go guest's memory right after instantiation is
// byte-for-byte the same with its data segments merged into one.
func TestMergeDataSegmentsKeepsMemory(t *testing.T) {
	orig := guestbuild.Wasm(t, "../../internal/testkit/testguests/echo")
	merged, ok := mergeDataSegments(orig)
	if !ok {
		t.Fatal("a Go guest's data segments were not merged")
	}
	segs, err := parseDataSegments(dataSection(t, merged))
	if err != nil || len(segs) != 1 {
		t.Fatalf("merged module has %d segments (%v)", len(segs), err)
	}
	ctx := context.Background()
	memOf := func(wasm []byte) []byte {
		rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
		defer rt.Close(ctx)
		wasi_snapshot_preview1.MustInstantiate(ctx, rt)
		m, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithStartFunctions())
		if err != nil {
			t.Fatal(err)
		}
		b, _ := m.Memory().Read(0, m.Memory().Size())
		return bytes.Clone(b)
	}
	if !bytes.Equal(memOf(orig), memOf(merged)) {
		t.Fatal("memory differs after instantiation")
	}
}

func TestMergeDataSegmentsLeavesOthersAlone(t *testing.T) {
	noData := wasmtest.Module{Funcs: []wasmtest.Func{{Export: "f", Body: wasmtest.Nop}}, MemoryPages: 1}.Encode()
	for _, in := range [][]byte{nil, []byte("junk"), noData, append(append([]byte(nil), noData...), 11, 5, 1, 1, 0xff, 0xff, 0xff)} {
		if out, ok := mergeDataSegments(in); ok || !bytes.Equal(out, in) {
			t.Errorf("changed a module it should leave alone: %x", in)
		}
	}
	// Passive segments (flags 1) are never merged.
	passive := append(append([]byte(nil), noData...), 11, 7, 2, 1, 1, 'a', 1, 1, 'b')
	if _, ok := mergeDataSegments(passive); ok {
		t.Error("merged passive segments")
	}
}

// dataSection returns the content of the module's data section.
func dataSection(t *testing.T, wasm []byte) []byte {
	for p := 8; p < len(wasm); {
		id := wasm[p]
		size, n := binary.Uvarint(wasm[p+1:])
		start := p + 1 + n
		if id == 11 {
			return wasm[start : start+int(size)]
		}
		p = start + int(size)
	}
	t.Fatal("no data section")
	return nil
}

// TestMemoryImageKeepsMemory: a Go guest instantiated from its stripped module with the
// engine's allocator (copy-on-write image, or the copying fallback) starts with memory
// byte-for-byte equal to the original module's.
func TestMemoryImageKeepsMemory(t *testing.T) {
	orig := guestbuild.Wasm(t, "../../internal/testkit/testguests/echo")
	ctx := context.Background()
	plain := func() []byte {
		rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
		defer rt.Close(ctx)
		wasi_snapshot_preview1.MustInstantiate(ctx, rt)
		m, err := rt.InstantiateWithConfig(ctx, orig, wazero.NewModuleConfig().WithStartFunctions())
		if err != nil {
			t.Fatal(err)
		}
		b, _ := m.Memory().Read(0, m.Memory().Size())
		return bytes.Clone(b)
	}()
	e, _ := newEngine(t, WithCacheDir(guestbuild.WazeroCache()))
	mod, err := e.Compile(ctx, "cap", "echo", "tool", nil, orig)
	if err != nil {
		t.Fatal(err)
	}
	if imagesSupported && mod.image == nil {
		t.Fatal("no memory image for a Go guest")
	}
	for _, mode := range []string{"mapped", "copied", "heap"} {
		alloc := mod.allocator(64 << 20)
		switch mode {
		case "copied":
			alloc.image = nil // the copying fallback into a mapping
		case "heap":
			alloc.image, alloc.limit = nil, 1<<32+pageSize // too large to map: the heap fallback
		}
		m, err := e.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, alloc), mod.module, wazero.NewModuleConfig().WithName("").WithStartFunctions())
		if err != nil {
			t.Fatal(err)
		}
		got, _ := m.Memory().Read(0, m.Memory().Size())
		if !bytes.Equal(got, plain) {
			t.Errorf("%s: memory differs from the original module's", mode)
		}
		m.Close(ctx)
	}
}
