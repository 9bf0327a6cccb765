package wasm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental/sysfs"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// probeEngine starts an engine with opts and compiles the warmprobe guest on it.
func probeEngine(t *testing.T, opts ...EngineOption) (*Engine, *Module) {
	t.Helper()
	e, _ := newEngine(t, append([]EngineOption{WithCacheDir(guestbuild.WazeroCache())}, opts...)...)
	mod, err := e.Compile(context.Background(), "c", "warmprobe", "tool", nil, guestbuild.Wasm(t, "../../internal/testkit/testguests/warmprobe"))
	if err != nil {
		t.Fatal(err)
	}
	return e, mod
}

// probeGrants are grants with a filesystem holding data.txt and sub/.
func probeGrants(t *testing.T) Grants { return probeSession(t, "abcdef", "") }

// probeSession are the grants of one session: its own folder, whose data.txt holds data,
// and, unless ses is empty, its own value of the per-session variable SES.
func probeSession(t *testing.T, data, ses string) Grants {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data.txt"), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	g := Grants{FS: sysfs.DirFS(dir), Env: []string{"A=1", "B=two"}, MemoryBytes: 128 << 20, Deadline: time.Minute}
	if ses != "" {
		g.Env, g.PerSession = append(g.Env, "SES="+ses), []string{"SES"}
	}
	return g
}

// probeCall calls warmprobe with data; chunk, if set, receives the text it streams.
func probeCall(ctx context.Context, e *Engine, mod *Module, g Grants, chunk func(string), data string) (string, error) {
	if chunk != nil {
		ctx = withChunk(ctx, chunk)
	}
	out, err := callTool(ctx, e, mod, g, abi.ToolInput{Data: &data})
	return deref(out.Data), err
}

// randomLines are the lines of warmprobe's report drawn from the Go runtime's random
// state: each call, fresh or reused, must draw its own.
var randomLines = []string{"mrand", "mrand1", "maporder", "maporder-init"}

// TestReuseIsFresh runs warmprobe's calls on fresh instances and on reused ones, the
// calls alternating between two sessions (their own folders and per-session values):
// every report is the same, line for line, except the lines drawn from the runtime's
// random state, which differ from call to call (entropy.go), and the value init drew,
// which is the same within each engine (the snapshot holds it); each call sees its own
// session's file and value, and the reused engine instantiated only twice (the call that
// ran _initialize, and the warm instance, which served both sessions).
func TestReuseIsFresh(t *testing.T) {
	ctx := context.Background()
	calls := strings.Fields(strings.Repeat("probe dirty probe grow probe dirty dirty probe ", 13))
	reports := map[string][]string{}
	firstDraws := map[string]string{}
	for _, tt := range []struct {
		name           string
		opts           []EngineOption
		instantiations int64
	}{
		{"fresh", []EngineOption{WithoutInstanceReuse()}, int64(len(calls))},
		{"reused", nil, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, mod := probeEngine(t, tt.opts...)
			sessions := []struct {
				g         Grants
				read, ses string
			}{
				{probeSession(t, "abcdef", sesA), `read="abc"`, "SES=" + sesA},
				{probeSession(t, "uvwxyz", sesB), `read="uvw"`, "SES=" + sesB},
			}
			draws := map[string]map[string]bool{}
			initDraw := ""
			for i, data := range calls {
				s := sessions[i%len(sessions)]
				rep, err := probeCall(ctx, e, mod, s.g, nil, data)
				if err != nil {
					t.Fatalf("call %d (%s): %v", i, data, err)
				}
				if !strings.Contains(rep, s.read) || !strings.Contains(rep, s.ses) {
					t.Errorf("call %d: not its session's file (%s) and value (%s):\n%s", i, s.read, s.ses, rep)
				}
				var lines []string
				for l := range strings.SplitSeq(rep, "\n") {
					k, v, _ := strings.Cut(l, "=")
					switch {
					case slices.Contains(randomLines, k):
						if draws[k] == nil {
							draws[k] = map[string]bool{}
							firstDraws[tt.name+" "+k] = v
						}
						draws[k][v] = true
						continue
					case k == "mrand-init":
						if initDraw != "" && v != initDraw {
							t.Errorf("call %d: init's draw %s, first call's %s: not the snapshot's", i, v, initDraw)
						}
						initDraw = v
						continue
					}
					lines = append(lines, l)
				}
				reports[tt.name] = append(reports[tt.name], strings.Join(lines, "\n"))
			}
			// The draws are 64-bit, so any repeat is the frozen state; a 64-key map starts its
			// iteration at one of some 64 places, so a hundred calls that visit fewer than
			// 16 orders share a state.
			for _, k := range randomLines {
				want := len(calls)
				if strings.HasPrefix(k, "maporder") {
					want = 16
				}
				if got := len(draws[k]); got < want {
					t.Errorf("%s: %d distinct values over %d calls, want at least %d: the calls share the random state", k, got, len(calls), want)
				}
			}
			if n := mod.instantiations.Load(); n != tt.instantiations {
				t.Errorf("%d instantiations for %d calls, want %d", n, len(calls), tt.instantiations)
			}
		})
	}
	if a, b := firstDraws["fresh mrand"], firstDraws["reused mrand"]; a == "" || a == b {
		t.Errorf("two engines' first calls drew %q and %q", a, b)
	}
	fresh, reused := reports["fresh"], reports["reused"]
	if len(fresh) != len(calls) || len(reused) != len(calls) {
		t.Fatalf("reports: %d fresh, %d reused", len(fresh), len(reused))
	}
	for i := range calls {
		if fresh[i] != reused[i] {
			t.Errorf("call %d (%s) differs:\nfresh:\n%s\nreused:\n%s", i, calls[i], fresh[i], reused[i])
		}
	}
	if !strings.Contains(fresh[0], "fd3=errno=0 type=3") || !strings.Contains(fresh[0], "open=fd=4 off=0") {
		t.Errorf("a fresh instance's report lacks the preopen or the next fd:\n%s", fresh[0])
	}
}

const (
	sesA = "ses_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	sesB = "ses_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// TestReuseNotAfterFailure: an instance whose call exited, or was canceled, is closed,
// not reused; the next call instantiates. (TestWarmTables has a wasm trap.)
func TestReuseNotAfterFailure(t *testing.T) {
	ctx := context.Background()
	e, mod := probeEngine(t)
	g := probeGrants(t)
	for range 2 {
		if _, err := probeCall(ctx, e, mod, g, nil, "probe"); err != nil {
			t.Fatal(err)
		}
	}
	if mod.warm.size() != 1 || mod.instantiations.Load() != 2 {
		t.Fatalf("after two calls: %d warm, %d instantiations", mod.warm.size(), mod.instantiations.Load())
	}
	cancelCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, tt := range []struct {
		name, data string
		ctx        context.Context
		chunk      func(string)
		reason     string
	}{
		{"exit", "exit", ctx, nil, ReasonExit},
		{"canceled", "wait", cancelCtx, func(string) { cancel() }, ReasonCanceled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := mod.instantiations.Load()
			var ge *GuestError
			if _, err := probeCall(tt.ctx, e, mod, g, tt.chunk, tt.data); !errors.As(err, &ge) || ge.Reason != tt.reason {
				t.Fatalf("call %s: %v, want reason %q", tt.data, err, tt.reason)
			}
			if n := mod.warm.size(); n != 0 {
				t.Fatalf("%d warm instances after a failed call", n)
			}
			if _, err := probeCall(ctx, e, mod, g, nil, "probe"); err != nil {
				t.Fatal(err)
			}
			if n := mod.instantiations.Load() - before; n != 1 {
				t.Errorf("%d instantiations for the failed call and the next, want 1 (the next)", n)
			}
			if n := mod.warm.size(); n != 1 {
				t.Errorf("%d warm instances after a clean call, want 1", n)
			}
		})
	}
}

// TestWarmPoolBound runs more calls at once than the pool keeps per grants: the pool
// keeps maxWarmPerKey, closes the rest, and the gauges count what it keeps.
func TestWarmPoolBound(t *testing.T) {
	ctx := context.Background()
	e, mod := probeEngine(t)
	g := probeGrants(t)
	if _, err := probeCall(ctx, e, mod, g, nil, "probe"); err != nil { // the snapshot
		t.Fatal(err)
	}
	const n = maxWarmPerKey + 2
	var inside sync.WaitGroup
	inside.Add(n)
	held := func(string) { inside.Done(); inside.Wait() } // all n instances live at once
	errc := make(chan error, n)
	for range n {
		go func() {
			_, err := probeCall(ctx, e, mod, g, held, "hold")
			errc <- err
		}()
	}
	for range n {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if got := mod.warm.size(); got != maxWarmPerKey {
		t.Errorf("%d warm instances, want %d", got, maxWarmPerKey)
	}
	snap, _ := mod.snaps.get(snapshotKey(g, 128<<20))
	m := e.Metrics()
	if got := testutil.ToFloat64(m.WarmInstances); got != maxWarmPerKey {
		t.Errorf("warm instances gauge %v, want %d", got, maxWarmPerKey)
	}
	if got, want := testutil.ToFloat64(m.WarmBytes), float64(maxWarmPerKey*int(snap.pages)*pageSize); got != want {
		t.Errorf("warm bytes gauge %v, want %v", got, want)
	}
}

// TestWarmIdleTimeout: a warm instance unused for the idle timeout is closed by the pool's
// sweep, one used within it is kept; the timer is armed while instances wait.
func TestWarmIdleTimeout(t *testing.T) {
	ctx := context.Background()
	e, mod := probeEngine(t, WithWarmIdleTimeout(time.Hour))
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	e.warm.now = func() time.Time { return time.Unix(0, now.Load()) }
	advance := func(d time.Duration) { now.Add(int64(d)) }
	g := probeGrants(t)
	for range 2 {
		if _, err := probeCall(ctx, e, mod, g, nil, "probe"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		advance time.Duration
		warm    int
	}{
		{59 * time.Minute, 1},
		{time.Minute, 0},
	} {
		advance(tt.advance)
		mod.warm.sweep(ctx)
		if got := mod.warm.size(); got != tt.warm {
			t.Fatalf("after %v more: %d warm, want %d", tt.advance, got, tt.warm)
		}
		mod.warm.mu.Lock()
		armed := mod.warm.timer != nil
		mod.warm.mu.Unlock()
		if armed != (tt.warm > 0) {
			t.Errorf("timer armed %v with %d warm", armed, tt.warm)
		}
	}
	if got := testutil.ToFloat64(e.Metrics().WarmInstances); got != 0 {
		t.Errorf("gauge %v after the idle timeout", got)
	}
	before := mod.instantiations.Load()
	if _, err := probeCall(ctx, e, mod, g, nil, "probe"); err != nil {
		t.Fatal(err)
	}
	if mod.instantiations.Load() != before+1 {
		t.Error("the call after the idle timeout did not instantiate")
	}
}

// TestWarmTables runs a hand-made module that changes its table (table.set, table.grow),
// a global and its memory's size: the reused instance sees them as a fresh instance does
// (a page it grows into again reads zero); an instance that trapped is not reused.
func TestWarmTables(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		opts []EngineOption
		inst int64
	}{
		{"fresh", []EngineOption{WithoutInstanceReuse()}, 9},
		{"reused", nil, 3}, // the call that ran _initialize, the warm instance, its successor after the trap
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newEngine(t, tt.opts...)
			mod, err := e.Compile(ctx, "c", "tables", "tool", nil, tableModule())
			if err != nil {
				t.Fatal(err)
			}
			if mod.snapGlobals != 1 {
				t.Fatalf("%d snapshot globals, want 1", mod.snapGlobals)
			}
			for i, step := range []string{"probe", "mutate", "probe", "peek", "probe", "mutate", "peek", "trap", "probe"} {
				var got, peeked uint64
				err := e.Call(ctx, mod, Grants{MemoryBytes: 1 << 20}, func(ctx context.Context, inst *Instance) error {
					if step != "probe" {
						res, err := inst.ExportedFunction(step).Call(ctx)
						if err != nil {
							return err
						}
						if step == "peek" {
							peeked = res[0]
						}
					}
					res, err := inst.ExportedFunction("probe").Call(ctx)
					if err == nil {
						got = res[0]
					}
					return err
				})
				var ge *GuestError
				if step == "trap" {
					if !errors.As(err, &ge) || ge.Reason != ReasonTrap {
						t.Fatalf("call %d: %v, want a trap", i, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				// memory pages ×1000 + table size ×100 + slot 0's function ×10 + the global
				want := map[string]uint64{"probe": 1110, "mutate": 2225, "peek": 2110}[step]
				if got != want {
					t.Errorf("call %d (%s): probe %d, want %d", i, step, got, want)
				}
				if peeked != 0 {
					t.Errorf("call %d: the page grown into holds %d, want 0", i, peeked)
				}
			}
			if n := mod.instantiations.Load(); n != tt.inst {
				t.Errorf("%d instantiations, want %d", n, tt.inst)
			}
		})
	}
}

// tableModule is a module with a one-slot funcref table holding "one", a mutable global,
// a one-page memory, _initialize, probe (memory.size*1000 + table.size*100 +
// call_indirect(slot 0)*10 + global), mutate (slot 0 := "two", grow the table by one,
// global := 5, grow the memory by a page and write 7 in it), peek (grow the memory by a
// page and read its first byte) and trap (unreachable).
func tableModule() []byte {
	sec := func(id byte, body ...byte) []byte {
		return append(binary.AppendUvarint([]byte{id}, uint64(len(body))), body...)
	}
	str := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	var exports []byte
	exports = append(exports, 7)
	for _, e := range []struct {
		name      string
		kind, idx byte
	}{{"_initialize", 0, 0}, {"two", 0, 2}, {"probe", 0, 3}, {"mutate", 0, 4}, {"trap", 0, 5}, {"peek", 0, 6}, {"memory", 2, 0}} {
		exports = append(append(exports, str(e.name)...), e.kind, e.idx)
	}
	body := func(code ...byte) []byte { return append([]byte{byte(len(code) + 1), 0}, code...) }
	var code []byte
	code = append(code, 7)
	code = append(code, body(0x0b)...)
	code = append(code, body(0x41, 1, 0x0b)...)
	code = append(code, body(0x41, 2, 0x0b)...)
	code = append(code, body(
		0xfc, 0x10, 0, 0x41, 0xe4, 0, 0x6c, // table.size 0, ×100
		0x41, 0, 0x11, 1, 0, 0x41, 10, 0x6c, 0x6a, // + call_indirect(slot 0) ×10
		0x23, 0, 0x6a, // + global 0
		0x3f, 0, 0x41, 0xe8, 7, 0x6c, 0x6a, 0x0b)...) // + memory.size ×1000
	code = append(code, body(
		0x41, 0, 0xd2, 2, 0x26, 0, // table.set 0 (slot 0 := two)
		0xd0, 0x70, 0x41, 1, 0xfc, 0x0f, 0, 0x1a, // table.grow 0 by 1 (null)
		0x41, 5, 0x24, 0, // global 0 := 5
		0x41, 1, 0x40, 0, 0x1a, // memory.grow 1
		0x41, 0x80, 0x80, 4, 0x41, 7, 0x3a, 0, 0, 0x0b)...) // byte 65536 := 7
	code = append(code, body(0x00, 0x0b)...) // trap: unreachable
	code = append(code, body(
		0x41, 1, 0x40, 0, 0x1a, // memory.grow 1
		0x41, 0x80, 0x80, 4, 0x2d, 0, 0, 0x0b)...) // byte 65536
	var m []byte
	m = append(m, "\x00asm\x01\x00\x00\x00"...)
	m = append(m, sec(1, 2, 0x60, 0, 0, 0x60, 0, 1, 0x7f)...)
	m = append(m, sec(3, 7, 0, 1, 1, 1, 0, 0, 1)...)
	m = append(m, sec(4, 1, 0x70, 0, 1)...)
	m = append(m, sec(5, 1, 0, 1)...)
	m = append(m, sec(6, 1, 0x7f, 1, 0x41, 0, 0x0b)...)
	m = append(m, sec(7, exports...)...)
	m = append(m, sec(9, 1, 0, 0x41, 0, 0x0b, 1, 1)...)
	m = append(m, sec(10, code...)...)
	m = append(m, sec(11, 2, 0, 0x41, 0, 0x0b, 1, 'x', 0, 0x41, 8, 0x0b, 1, 'y')...)
	return m
}

// TestTableModuleValid keeps the hand-made module honest: wazero compiles it unchanged.
func TestTableModuleValid(t *testing.T) {
	e, _ := newEngine(t, WithoutInitSnapshots())
	if _, err := e.rt.CompileModule(context.Background(), tableModule()); err != nil {
		t.Fatal(fmt.Errorf("table module: %w", err))
	}
}

// BenchmarkWarmReset times each step of a warm instance's reset on the benchtool guest
// (memory and globals, tables and segments, the WASI context), the whole reset, and the
// whole reset of an instance whose memory grew.
func BenchmarkWarmReset(b *testing.B) {
	ctx := context.Background()
	reg := WithCacheDir(filepath.Join(b.TempDir(), "cache"))
	e, err := NewEngine(ctx, reg, WithHost(testHost))
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(ctx)
	mod, err := e.Compile(ctx, "c", "benchtool", "tool", nil, guestbuild.Wasm(b, "../../internal/testkit/testguests/benchtool"))
	if err != nil {
		b.Fatal(err)
	}
	g := Grants{FS: sysfs.DirFS(b.TempDir()), Env: []string{"LANG=C.UTF-8"}, MemoryBytes: 512 << 20}
	for range 2 {
		if err := e.Call(ctx, mod, g, func(context.Context, *Instance) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	key := snapshotKey(g, 512<<20)
	w := mod.warm.get(key)
	snap, _ := mod.snaps.get(key)
	if w == nil || snap == nil {
		b.Fatal("no warm instance")
	}
	defer w.m.Close(ctx)
	b.Logf("%d pages, %d tables (%d slots), %d data and %d element segments", snap.pages, len(w.init.tables), len(slices.Concat(w.init.tables...)), len(w.init.data), len(w.init.elems))
	for _, bb := range []struct {
		name string
		step func() bool
	}{
		{"memory+globals", func() bool {
			return snap.image.restoreOnto(w.alloc.mapped.buf, &w.pages) == nil && snap.restore(w.m) == nil
		}},
		{"tables+segments", func() bool { return w.init.restore(w.inst) == nil }},
		{"wasi-context", func() bool { return e.warm.freshSys(ctx, w, moduleConfig(g, 128<<20, w.calls)) == nil }},
		{"all", func() bool { return e.warm.reset(ctx, w, snap) }},
		{"all-after-1MiB-grow", func() bool { // the grow and a write into it are timed too
			mem := w.m.Memory()
			if _, ok := mem.Grow(16); !ok || !mem.WriteByte(mem.Size()-1, 1) {
				return false
			}
			return e.warm.reset(ctx, w, snap)
		}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !bb.step() {
					b.Fatal("reset step failed")
				}
			}
		})
	}
}

// fakeModule is an api.Module that is not wazero's module instance.
type fakeModule struct {
	api.Module
	Sys *int
}

// TestInstanceFields: reuse reaches into wazero's module instance only when it has the
// fields the reset sets; anything else is refused, so reuse falls back to off.
func TestInstanceFields(t *testing.T) {
	ctx := context.Background()
	e, _ := newEngine(t)
	inst, err := e.rt.InstantiateModule(ctx, e.warm.empty, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close(ctx)
	for _, tt := range []struct {
		name string
		m    api.Module
		ok   bool
	}{
		{"wazero's", inst, true},
		{"another struct", &fakeModule{}, false},
		{"not a pointer", fakeModule{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := instanceFields(tt.m); (err == nil) != tt.ok {
				t.Errorf("instanceFields: %v, want ok %v", err, tt.ok)
			}
		})
	}
}

// TestGoGuestCollectsNearTheCap: a Go guest runs with GOGC=off and GOMEMLIMIT at three
// quarters of its memory cap (gcenv.go) unless its grants set them, on a fresh instance and
// on a reused one: a small call collects nothing, and a call churning through four times
// the limit in garbage still completes, collecting as it nears the cap.
func TestGoGuestCollectsNearTheCap(t *testing.T) {
	ctx := context.Background()
	const capBytes = 128 << 20
	for _, tt := range []struct {
		name      string
		opts      []EngineOption
		env       []string
		percent   string
		limit     string
		smallGCs0 bool
	}{
		{"fresh", []EngineOption{WithoutInstanceReuse()}, nil, "-1", fmt.Sprint(capBytes / 4 * 3), true},
		{"reused", nil, nil, "-1", fmt.Sprint(capBytes / 4 * 3), true},
		{"the grants' own", nil, []string{"GOGC=50", "GOMEMLIMIT=40MiB"}, "50", fmt.Sprint(40 << 20), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, mod := probeEngine(t, tt.opts...)
			g := probeGrants(t)
			g.Env = append(g.Env, tt.env...)
			for i := range 3 { // the first call captures the snapshot, the others start from it
				rep, err := probeCall(ctx, e, mod, g, nil, "gc")
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				got := map[string]string{}
				for l := range strings.SplitSeq(strings.TrimSpace(rep), "\n") {
					k, v, _ := strings.Cut(l, "=")
					got[k] = v
				}
				if got["gcpercent"] != tt.percent || got["memlimit"] != tt.limit {
					t.Fatalf("call %d: GOGC %s, memory limit %s; want %s and %s", i, got["gcpercent"], got["memlimit"], tt.percent, tt.limit)
				}
				if tt.smallGCs0 && got["small-gcs"] != "0" {
					t.Errorf("call %d: %s collections for 1 MiB, want none", i, got["small-gcs"])
				}
				if got["churn-gcs"] == "0" || got["churn-gcs"] == "" {
					t.Errorf("call %d: the churn collected %q times, want some", i, got["churn-gcs"])
				}
			}
		})
	}
}
