package bench

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// benchInput is the tool-input data, the same as in runtime/bench_test.go.
const benchInput = "hello, capsulegate: uppercase me"

var (
	buildOnce sync.Once
	buildDir  string
	wasmBytes []byte
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// benchtoolWasm builds internal/testkit/testguests/benchtool with the flags of the root
// module's internal/testkit/guestbuild (which this module cannot import), so the bytes are
// those the runtime benchmarks run; the build is done once per test process.
func benchtoolWasm(b *testing.B) []byte {
	b.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "capsulegate-bench-"); buildErr != nil {
			return
		}
		out := filepath.Join(buildDir, "benchtool.wasm")
		cmd := exec.Command("go", "build", "-o", out, "-buildmode=c-shared", "-trimpath", ".")
		cmd.Dir = filepath.Join("..", "internal", "testkit", "testguests", "benchtool")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build benchtool: %v\n%s", err, msg)
			return
		}
		wasmBytes, buildErr = os.ReadFile(out)
		if buildErr == nil {
			fmt.Fprintf(os.Stderr, "benchtool.wasm: %d bytes, sha256 %x\n", len(wasmBytes), sha256.Sum256(wasmBytes))
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return wasmBytes
}

// BenchmarkWasmtimeCall instantiates and calls benchtool with wasmtime-go: per op a
// fresh store and instance with WASI, _initialize, the tool-input lowered by hand
// (cabi_realloc for the string, then the six flat parameters of
// tool-input {data: some(s), log-path: none}), run, and the tool-result read from its
// return area.
//
// "default" is wasmtime's default configuration; "sandboxed" adds what capsulegate's
// engine enforces on every call, epoch interruption (a deadline) and a store memory
// limit.
func BenchmarkWasmtimeCall(b *testing.B) {
	wasm := benchtoolWasm(b)
	for _, sandboxed := range []bool{false, true} {
		name := "default"
		if sandboxed {
			name = "sandboxed"
		}
		b.Run(name, func(b *testing.B) {
			cfg := wasmtime.NewConfig()
			cfg.SetEpochInterruption(sandboxed)
			engine := wasmtime.NewEngineWithConfig(cfg)
			module, err := wasmtime.NewModule(engine, wasm)
			if err != nil {
				b.Fatal(err)
			}
			linker := wasmtime.NewLinker(engine)
			if err := linker.DefineWasi(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				store := wasmtime.NewStore(engine)
				if sandboxed {
					store.Limiter(512<<20, -1, -1, -1, -1)
					store.SetEpochDeadline(1 << 20)
				}
				store.SetWasi(wasmtime.NewWasiConfig())
				data, md, err := call(store, linker, module)
				if err != nil {
					b.Fatal(err)
				}
				if data != strings.ToUpper(benchInput) || len(md) != 1 || md[0] != [2]string{"len", strconv.Itoa(len(benchInput))} {
					b.Fatalf("unexpected result: data %q metadata %q", data, md)
				}
				store.Close()
			}
		})
	}
}

// Offsets of the tool-result record in the return area (canonical ABI, 32-bit).
const (
	resultData     = 16 // option<string>: disc u8, then ptr, len at +4, +8
	resultMetadata = 44 // list<tuple<string, string>>: ptr, len
	pairSize       = 16
)

func call(store *wasmtime.Store, linker *wasmtime.Linker, module *wasmtime.Module) (string, [][2]string, error) {
	inst, err := linker.Instantiate(store, module)
	if err != nil {
		return "", nil, err
	}
	if _, err := inst.GetFunc(store, abi.ExportInitialize).Call(store); err != nil {
		return "", nil, err
	}
	mem := inst.GetExport(store, "memory").Memory()
	p, err := inst.GetFunc(store, abi.ExportRealloc).Call(store, int32(0), int32(0), int32(1), int32(len(benchInput)))
	if err != nil {
		return "", nil, err
	}
	ptr := uint32(p.(int32))
	copy(mem.UnsafeData(store)[ptr:], benchInput)
	r, err := inst.GetFunc(store, abi.ExportToolRun01).Call(store, int32(1), int32(ptr), int32(len(benchInput)), int32(0), int32(0), int32(0))
	if err != nil {
		return "", nil, err
	}
	ret := uint32(r.(int32))
	m := mem.UnsafeData(store) // after the call: memory may have grown
	le := binary.LittleEndian
	str := func(off uint32) string {
		p, n := le.Uint32(m[off:]), le.Uint32(m[off+4:])
		return string(m[p : p+n])
	}
	if m[ret] != 0 || m[ret+resultData] != 1 {
		return "", nil, fmt.Errorf("status %d, data discriminant %d", m[ret], m[ret+resultData])
	}
	data := str(ret + resultData + 4)
	mp, mn := le.Uint32(m[ret+resultMetadata:]), le.Uint32(m[ret+resultMetadata+4:])
	md := make([][2]string, mn)
	for i := range md {
		e := mp + uint32(i)*pairSize
		md[i] = [2]string{str(e), str(e + 8)}
	}
	return data, md, nil
}
