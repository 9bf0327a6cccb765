package murmur

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/upstream"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/guestfs"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// upstreamFixture returns the bytes of path among upstream Murmur's fixtures, from the
// mirror $MURMUR_MIRROR names, skipping the test (and saying so) without one.
func upstreamFixture(tb testing.TB, path string) []byte {
	tb.Helper()
	return upstream.Fixture(tb, path)
}

// TestUpstreamTools runs upstream Murmur's tool and driver components through CallTool.
func TestUpstreamTools(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	str := func(s string) *string { return &s }
	tests := []struct {
		name, path string
		role       manifest.Role
		in         *string
		asked      string   // the RequestInput prompt expected, if any
		chunks     []string // the chunks expected through Imports.Chunk
		wantData   string
		wantSum    string
	}{
		{name: "echo", path: "run/components/echo-tool.wasm", role: manifest.RoleTool, in: str("hello"), wantData: "hello", wantSum: "ok"},
		{name: "request input", path: "input-required/tool/request-input-tool.wasm", role: manifest.RoleTool, in: str("Pick one"), asked: "Pick one", wantData: "blue", wantSum: "user answered: blue"},
		{name: "streaming driver", path: "streaming-driver/tool/streaming-driver.wasm", role: manifest.RoleDriver,
			chunks: []string{"chunk_one ", "chunk_two ", "chunk_three"}, wantSum: "streaming driver done",
			wantData: `{"stop_reason":"end_turn","content":[{"type":"text","text":"chunk_one chunk_two chunk_three"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mod, err := Compile(ctx, e, "up", tc.name, tc.role, upstreamFixture(t, tc.path))
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckWorld(mod, string(tc.role)); err != nil {
				t.Fatal(err)
			}
			var asked string
			var chunks []string
			h := &Imports{
				RequestInput: func(_ context.Context, prompt string) (string, error) { asked = prompt; return "blue", nil },
				Chunk: func(thinking bool, text string) {
					if !thinking {
						chunks = append(chunks, text)
					}
				},
			}
			out, err := CallTool(ctx, e, mod, wasm.Grants{MemoryBytes: 16 << 20, Deadline: 10 * time.Second}, h, abi.ToolInput{Data: tc.in})
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != abi.StatusPassed || out.Data == nil || *out.Data != tc.wantData || out.Summary == nil || *out.Summary != tc.wantSum {
				t.Fatalf("got %+v", out)
			}
			if asked != tc.asked {
				t.Errorf("RequestInput asked %q, want %q", asked, tc.asked)
			}
			if strings.Join(chunks, "|") != strings.Join(tc.chunks, "|") {
				t.Errorf("chunks %q, want %q", chunks, tc.chunks)
			}
		})
	}
}

// TestUpstreamCapsules runs upstream Murmur's script capsule components through
// RunScript with the grants upstream's containment tests give them, and checks what they
// leave in out/result.txt or how they fail.
func TestUpstreamCapsules(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	rules, err := netpolicy.ParseRules([]string{"api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		memory   int64
		deadline time.Duration
		env      []string
		invoke   func(ctx context.Context, name string, in abi.ToolInput) (abi.ToolResult, error)
		http     bool
		files    map[string]string // written into the guest's folder first
		reason   string            // the failure's classification; "" for success
		result   string            // out/result.txt
	}{
		{name: "capsule-spin-loop", deadline: 2 * time.Second, reason: wasm.ReasonDeadline},
		{name: "capsule-memory-balloon", memory: 16 << 20, reason: wasm.ReasonMemoryLimit},
		{name: "capsule-env-echo", env: []string{"MURMUR_TEST_ALLOWED_VAR=visible"},
			result: "GITHUB_TOKEN=absent\nMURMUR_TEST_ALLOWED_VAR=present:visible"},
		{name: "capsule-filesystem-escape", result: "blocked"},
		// Its write out of the folder fails, and it panics on that: a trap.
		{name: "capsule-filesystem-trap", reason: wasm.ReasonTrap},
		// It reads task.md, then sleeps 2 s: the 1 s deadline stops the sleep.
		{name: "capsule-sleep-input", files: map[string]string{"task.md": "the task"}, deadline: time.Second, reason: wasm.ReasonDeadline},
		{name: "capsule-network-attempt", http: true, result: "denied"},
		{name: "capsule-allowlisted", result: "ok", invoke: func(_ context.Context, name string, in abi.ToolInput) (abi.ToolResult, error) {
			if name != "echo-tool" || in.Data == nil || *in.Data != "hello" {
				return abi.ToolResult{}, errors.New("unexpected invoke")
			}
			s := "ok"
			return abi.ToolResult{Status: abi.StatusPassed, Summary: &s, Data: in.Data}, nil
		}},
		{name: "capsule-unlisted", result: "tool undeclared-tool is not in this capsule's tools", invoke: func(_ context.Context, name string, _ abi.ToolInput) (abi.ToolResult, error) {
			return abi.ToolResult{}, errors.New("tool " + name + " is not in this capsule's tools")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GITHUB_TOKEN", "sk-must-not-leak")
			mod, err := Compile(ctx, e, "up", tc.name, RoleCapsule, upstreamFixture(t, "run/components/"+tc.name+".wasm"))
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckWorld(mod, ScriptWorld); err != nil {
				t.Fatal(err)
			}
			work := filepath.Join(t.TempDir(), "a", "b", "work")
			if err := os.MkdirAll(work, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, body := range tc.files {
				if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			gfs, err := guestfs.New(work)
			if err != nil {
				t.Fatal(err)
			}
			g := wasm.Grants{FS: gfs, Env: tc.env, MemoryBytes: 64 << 20, Deadline: 10 * time.Second}
			if tc.memory > 0 {
				g.MemoryBytes = tc.memory
			}
			if tc.deadline > 0 {
				g.Deadline = tc.deadline
			}
			h := &Imports{Invoke: tc.invoke, Who: tc.name}
			if tc.http {
				h.HTTP = &Outgoing{Capsule: "up", Rules: rules}
				h.HTTP.Init()
			}
			err = RunScript(ctx, e, mod, g, h)
			var ge *wasm.GuestError
			switch {
			case tc.reason != "":
				if !errors.As(err, &ge) || ge.Reason != tc.reason {
					t.Fatalf("err %v, want reason %s", err, tc.reason)
				}
				if _, err := os.Stat(filepath.Join(work, "..", "..", "escape.txt")); err == nil {
					t.Fatal("the guest wrote outside its folder")
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(work, "out", "result.txt"))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.result {
				t.Fatalf("out/result.txt = %q, want %q", got, tc.result)
			}
			if _, err := os.Stat(filepath.Join(work, "..", "..", "outside.txt")); err == nil {
				t.Fatal("the guest wrote outside its folder")
			}
		})
	}
}
