package murmur

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// procDriverForms are the forms the procdriver guest is compiled in: the core module
// the Go SDK builds, and that module made a component with the preview1 reactor
// adapter, as Murmur ships its drivers.
var procDriverForms = []struct {
	name      string
	code      func(t testing.TB) []byte
	component bool
}{
	{"core module", procDriverCore, false},
	{"component", procDriverComponent, true},
}

func procDriverCore(t testing.TB) []byte {
	return guestbuild.Wasm(t, "../../../internal/testkit/testguests/procdriver")
}

func procDriverComponent(t testing.TB) []byte {
	return watbuild.Component(t, procDriverCore(t), "../../../wit/murmur-driver-process-0.6.0.wit", ProcessWorld)
}

// compileProcDriver compiles code as a process driver, as stage does.
func compileProcDriver(t testing.TB, e *wasm.Engine, code []byte) *wasm.Module {
	t.Helper()
	mod, err := CompileWorld(context.Background(), e, "cap", "procdriver", manifest.RoleDriver, ProcessWorld, code)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckWorld(mod, ProcessWorld); err != nil {
		t.Fatal(err)
	}
	return mod
}

// TestDriverServesARun drives the procdriver guest, as a core module and as a
// component, through every function of the process interface on one held instance:
// parse sees what launch was given, and each record crosses the canonical ABI intact
// both ways.
func TestDriverServesARun(t *testing.T) {
	for _, form := range procDriverForms {
		t.Run(form.name, func(t *testing.T) {
			e, _ := newEngine(t, sharedCache)
			mod := compileProcDriver(t, e, form.code(t))
			if (mod.Plan() != nil) != form.component {
				t.Fatalf("compiled as a component: %v, want %v", mod.Plan() != nil, form.component)
			}
			if mod.Role != string(manifest.RoleDriver) {
				t.Errorf("role %q, want %q (a metrics label)", mod.Role, manifest.RoleDriver)
			}
			before := mod.Instantiations()
			serveARun(t, e, mod)
			if n := mod.Instantiations() - before; n != 1 {
				t.Errorf("the run instantiated the driver %d times, want 1", n)
			}
		})
	}
}

func serveARun(t *testing.T, e *wasm.Engine, mod *wasm.Module) {
	d := OpenDriver(e, mod, wasm.Grants{MemoryBytes: 64 << 20, Deadline: 30 * time.Second})
	defer d.Close()
	ctx := context.Background()
	desc, err := d.Describe(ctx)
	if err != nil || desc.Binary != "fakeharness" || !reflect.DeepEqual(desc.RequiredEnv, []string{"PROC_MODE", "PROC_HINT"}) || !desc.HasLogin {
		t.Fatalf("describe: %+v, %v", desc, err)
	}
	plan, refused, err := d.Launch(ctx, abi.LaunchRequest{SystemPrompt: "sys", SessionID: "s-1", Resume: true, Task: "hello"})
	want := abi.LaunchPlan{Args: []string{"run", "--session", "s-1", "--resume", "hello"}, EnvSet: [][2]string{{"FAKE_FILES", "{files_dir}"}, {"FAKE_GATEWAY", "{gateway_url}"}, {"FAKE_KEY", "{gateway_key}"}},
		Files: []abi.DriverFile{{Name: "session.txt", Contents: "s-1"}}}
	if err != nil || refused != "" || !reflect.DeepEqual(plan, want) {
		t.Fatalf("launch: %+v %q %v", plan, refused, err)
	}
	if _, refused, err := d.Launch(ctx, abi.LaunchRequest{SessionID: "s-2"}); err != nil || !strings.Contains(refused, "empty task") {
		t.Errorf("an empty task: refused %q, %v", refused, err)
	}
	events, err := d.Parse(ctx, []string{"whoami", "text-delta Hel", "turn-failed quota out of credit", "???"})
	wantEvents := []abi.Event{{Case: "note", Text: "s-1"}, {Case: "text-delta", Text: "Hel"}, {Case: "turn-failed", FailureKind: "quota", Text: "out of credit"},
		{Case: "note", Text: "unread line: ???"}}
	if err != nil || !reflect.DeepEqual(events, wantEvents) {
		t.Errorf("parse: %+v, %v", events, err)
	}
	// A later batch on the same instance still sees the session launch was given.
	if events, err := d.Parse(ctx, []string{"whoami"}); err != nil || !reflect.DeepEqual(events, []abi.Event{{Case: "note", Text: "s-1"}}) {
		t.Errorf("a second parse: %+v, %v", events, err)
	}
	code := int32(3)
	ev, err := d.ClassifyExit(ctx, abi.ExitStatus{Code: &code, StderrTail: "boom"})
	if err != nil || ev.Case != "turn-failed" || ev.FailureKind != "harness-error" || !strings.Contains(ev.Text, "boom") {
		t.Errorf("classify-exit: %+v, %v", ev, err)
	}
	ev, err = d.ClassifyExit(ctx, abi.ExitStatus{Interrupted: true})
	if err != nil || ev.FailureKind != "canceled" {
		t.Errorf("classify-exit interrupted: %+v, %v", ev, err)
	}
	zero := int32(0)
	if s, detail, err := d.ReadLogin(ctx, abi.LoginOutput{Code: &zero, Stdout: "ok as ada\n"}); s != "logged-in" || detail != "ok as ada" || err != nil {
		t.Errorf("read-login: %q %q %v", s, detail, err)
	}
}

// TestDriverCut: a call that runs past its deadline, or whose caller gives up, is
// interrupted, classified, and cuts the instance: later calls are refused naming it.
func TestDriverCut(t *testing.T) {
	for _, form := range procDriverForms {
		t.Run(form.name, func(t *testing.T) {
			e, _ := newEngine(t, sharedCache)
			driverCut(t, e, compileProcDriver(t, e, form.code(t)))
		})
	}
}

func driverCut(t *testing.T, e *wasm.Engine, mod *wasm.Module) {
	tests := []struct {
		name   string
		ctx    func() (context.Context, context.CancelFunc)
		reason string
		names  string
	}{
		{"deadline", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, wasm.ReasonDeadline, "past its deadline"},
		// The caller's own deadline: the call is stopped by it, not by the driver's.
		{"caller's deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, wasm.ReasonDeadline, "was stopped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			deadline := 300 * time.Millisecond
			if tt.names == "was stopped" {
				deadline = time.Minute
			}
			d := OpenDriver(e, mod, wasm.Grants{MemoryBytes: 64 << 20, Deadline: deadline})
			defer d.Close()
			// The instance is up and serving before the caller's clock starts.
			if _, _, err := d.Launch(context.Background(), abi.LaunchRequest{SessionID: "s", Task: "t"}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := tt.ctx()
			defer cancel()
			_, err := d.Parse(ctx, []string{"spin"})
			var ge *wasm.GuestError
			if !errors.As(err, &ge) || ge.Reason != tt.reason {
				t.Fatalf("spinning parse: %v, want reason %s", err, tt.reason)
			}
			_, err = d.Parse(context.Background(), []string{"whoami"})
			if !errors.Is(err, wasm.ErrCut) || !strings.Contains(err.Error(), tt.names) || !strings.Contains(err.Error(), "parse") {
				t.Errorf("a call after the cut: %v", err)
			}
		})
	}
}
