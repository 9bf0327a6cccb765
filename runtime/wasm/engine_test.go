package wasm

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/wasmtest"
)

// hostile is one module exporting a function per kind of failure, plus one that works.
var hostile = wasmtest.Module{
	Imports: []wasmtest.Import{{Module: "wasi_snapshot_preview1", Name: "proc_exit", Params: []byte{wasmtest.I32}}},
	Funcs: []wasmtest.Func{
		{Export: "spin", Body: wasmtest.Spin},
		{Export: "trap", Body: wasmtest.Trap},
		{Export: "grow", Body: wasmtest.GrowUntilRefused},
		{Export: "exit", Body: wasmtest.CallImport(0, 3)},
		{Export: "ok", Body: wasmtest.Nop},
	},
	MemoryPages: 1,
}

func newEngine(t testing.TB, opts ...EngineOption) (*Engine, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	e, err := NewEngine(context.Background(), append([]EngineOption{WithHost(testHost)}, append(opts, WithMetrics(reg))...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e, reg
}

func callExport(ctx context.Context, e *Engine, mod *Module, g Grants, name string) error {
	return e.Call(ctx, mod, g, func(ctx context.Context, inst *Instance) error {
		_, err := inst.ExportedFunction(name).Call(ctx)
		return err
	})
}

// TestFailuresAreClassified: each failure ends in its reason, counts once, and the next
// call on the same engine succeeds.
func TestFailuresAreClassified(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	mod, err := e.Compile(ctx, "cap", "hostile", "tool", nil, hostile.Encode())
	if err != nil {
		t.Fatal(err)
	}
	const deadline = 300 * time.Millisecond
	meter := &Meter{}
	g := Grants{MemoryBytes: 4 << 20, Deadline: deadline, Meter: meter}
	tests := []struct{ export, reason string }{
		{"spin", ReasonDeadline},
		{"trap", ReasonTrap},
		{"grow", ReasonMemoryLimit},
		{"exit", ReasonExit},
	}
	for _, tt := range tests {
		t.Run(tt.export, func(t *testing.T) {
			start := time.Now()
			err := callExport(ctx, e, mod, g, tt.export)
			elapsed := time.Since(start)
			var ge *GuestError
			if !errors.As(err, &ge) || ge.Reason != tt.reason {
				t.Fatalf("want reason %s, got %v", tt.reason, err)
			}
			if errs.Code(err) != CodeGuest || !strings.Contains(err.Error(), "hostile") {
				t.Errorf("error lacks code or artifact: %v", err)
			}
			if elapsed > deadline+time.Second {
				t.Errorf("took %v, over deadline + 1s", elapsed)
			}
			if got := testutil.ToFloat64(e.metrics.Traps.WithLabelValues("cap", "hostile", "tool", tt.reason)); got != 1 {
				t.Errorf("traps{reason=%s} = %v", tt.reason, got)
			}
			// The meter saw what the counters saw: one failure of this reason, the call's time.
			u := meter.Take()
			if len(u.Traps) != 1 || u.Traps[tt.reason] != 1 || u.Guest <= 0 || u.Guest > elapsed {
				t.Errorf("meter: %+v after one %s in %v", u, tt.reason, elapsed)
			}
			if tt.reason == ReasonMemoryLimit && u.PeakMemory < 3<<20 {
				t.Errorf("meter: peak memory %d after growing to the 4 MiB cap", u.PeakMemory)
			}
			if err := callExport(ctx, e, mod, g, "ok"); err != nil {
				t.Fatalf("the next call failed: %v", err)
			}
			if u := meter.Take(); len(u.Traps) != 0 || u.Guest <= 0 || u.PeakMemory != pageSize {
				t.Errorf("meter after a clean call of a one-page module: %+v", u)
			}
		})
	}
	if got := testutil.ToFloat64(e.metrics.Calls.WithLabelValues("cap", "hostile", "tool", "ok")); got != float64(len(tests)) {
		t.Errorf("calls{status=ok} = %v", got)
	}
}

func TestMemoryFloorAndCompileErrors(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	big := wasmtest.Module{Funcs: []wasmtest.Func{{Export: "ok", Body: wasmtest.Nop}}, MemoryPages: 100}
	mod, err := e.Compile(ctx, "cap", "big", "tool", nil, big.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if err := callExport(ctx, e, mod, Grants{MemoryBytes: 1 << 20}, "ok"); errs.Code(err) != CodeMemoryFloor {
		t.Fatalf("want %s, got %v", CodeMemoryFloor, err)
	}
	if err := callExport(ctx, e, mod, Grants{MemoryBytes: 100 * pageSize}, "ok"); err != nil {
		t.Fatalf("exactly at the limit: %v", err)
	}
	if _, err := e.Compile(ctx, "cap", "junk", "tool", nil, []byte("not wasm")); errs.Code(err) != CodeCompile || !strings.Contains(err.Error(), "junk") {
		t.Fatalf("want %s naming the artifact, got %v", CodeCompile, err)
	}
}

func TestCompilationCacheOnDisk(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		e, _ := newEngine(t, WithCacheDir(dir))
		if _, err := e.Compile(ctx, "cap", "hostile", "tool", nil, hostile.Encode()); err != nil {
			t.Fatal(err)
		}
		e.Close(ctx)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) == 0 {
		t.Fatal("nothing cached on disk")
	}
}

func TestMetricsSurviveReRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewMetrics(reg)
	if err != nil {
		t.Fatalf("second registration: %v", err)
	}
	if a.Traps != b.Traps || a.Denied != b.Denied {
		t.Fatal("second registration did not reuse the collectors")
	}
}

// deref reads an optional string of a tool result.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
