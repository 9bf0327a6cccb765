package runtime

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/shell"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
)

// fakeHarness is the stand-in harness procdriver drives: what it prints depends on the
// task, the last argument.
const fakeHarness = `#!/bin/bash
case "$1" in
--version) echo "fakeharness 1.0.0"; exit 0;;
auth) if [ -n "$PROC_HINT" ]; then echo "logged in as ada"; exit 0; else echo "not logged in" >&2; exit 1; fi;;
esac
sess=$3; resume=no; [ "$4" = --resume ] && resume=yes
task="${@: -1}"
case "$task" in
hello) echo "$sess" > "$FAKE_FILES/transcript"; echo "session-started $sess"; echo "text-delta Hel"; echo "text-delta lo"; echo "turn-end Hello";;
resume) echo "turn-end resumed=$resume session=$sess kept=$(cat "$FAKE_FILES/transcript" 2>/dev/null || echo none)";;
env) echo "turn-end mode=$PROC_MODE hint=$PROC_HINT file=$(cat "$FAKE_FILES/session.txt") key=${ANTHROPIC_API_KEY:-none} home=${HOME%%/*}";;
gateway) echo "turn-end $(curl -s -H "x-api-key: $FAKE_KEY" -d '{}' "$FAKE_GATEWAY/v1/messages")";;
denied*) if curl -s -m 5 "http://127.0.0.1:${task#denied }/" >/dev/null 2>&1; then echo "turn-end reached"; else echo "turn-end blocked"; fi;;
tool) J='Content-Type: application/json'; A='Accept: application/json, text/event-stream'; H="Authorization: Bearer $FAKE_BRIDGE_TOKEN"; P='Mcp-Protocol-Version: 2025-06-18'
  curl -s -D "$FAKE_FILES/h" -o /dev/null -H "$J" -H "$A" -H "$H" -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fake","version":"1"}}}' "$FAKE_BRIDGE"
  sid=$(grep -i '^mcp-session-id:' "$FAKE_FILES/h" | cut -d' ' -f2 | tr -d '\r')
  curl -s -o /dev/null -H "$J" -H "$A" -H "$H" -H "$P" -H "Mcp-Session-Id: $sid" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$FAKE_BRIDGE"
  out=$(curl -s -H "$J" -H "$A" -H "$H" -H "$P" -H "Mcp-Session-Id: $sid" -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"via bridge"}}}' "$FAKE_BRIDGE" | grep '^data:' | tr -d '\n')
  nokey=$(curl -s -o /dev/null -w '%{http_code}' -H "$J" -H "$A" -d '{}' "$FAKE_BRIDGE")
  echo "turn-end tools=$FAKE_TOOLS nokey=$nokey $out";;
hog) head -c 4000000000 /dev/zero | tail >/dev/null; exit 1;;
bomb) sh -c 'i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done' 2>/dev/null; echo "turn-end bomb over";;
quota) echo "turn-failed quota out of credit";;
authfail) echo "turn-failed auth invalid api key";;
builtin) echo "tool-call c1 Bash"; echo "turn-end ran a built-in";;
maxturns) echo "text-delta partial"; echo "turn-failed max-turns reached 3 turns";;
crash) echo boom >&2; exit 3;;
hang) trap 'exit 130' INT; echo "text-delta x"; while :; do sleep 0.05; done;;
hold) trap 'exit 130' INT; key=$(cat "$FAKE_FILES/session.txt"); echo "text-delta holding $key"; while :; do sleep 0.05; done;;
*) echo "what is $task?";;
esac
`

const harnessSentinel = "sk-sentinel-harness-never-holds-this"

// procDriverForms are the forms of the procdriver a harness capsule stages: the core
// module, and the component Murmur's packaging makes of it (the preview1 reactor
// adapter around it).
var procDriverForms = []struct {
	name string
	wasm func(t testing.TB) []byte
}{
	{"core module", procDriverCore},
	{"component", procDriverComponent},
}

func procDriverCore(t testing.TB) []byte {
	return guestbuild.Wasm(t, "../internal/testkit/testguests/procdriver")
}

func procDriverComponent(t testing.TB) []byte {
	return watbuild.Component(t, procDriverCore(t), "../wit/murmur-driver-process-0.6.0.wit", murmur.ProcessWorld)
}

// harnessCapsule stages nothing yet: it writes the process capsule driving fakeharness
// through driver, a form of procdriver (its gateway endpoint the provider stand-in
// behind prov, caps more lines under capabilities), publishes its artifacts and puts
// fakeharness on the PATH.
func harnessCapsule(t *testing.T, prov *httptest.Server, driver []byte, caps string) (*Runtime, *manifest.Manifest, *registry.Local) {
	t.Helper()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "fakeharness"), []byte(fakeHarness), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	e, _ := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	reg := registry.NewLocal(filepath.Join(t.TempDir(), "reg"))
	publishWasm(t, reg, "procdriver", "driver", driver)
	publishWasm(t, reg, "echo", "tool", guestbuild.Wasm(t, "../internal/testkit/testguests/echo"))
	mpath := filepath.Join(t.TempDir(), "murmur.yaml")
	os.WriteFile(mpath, []byte(`name: harnessed
version: 1.0.0
artifacts:
  - name: procdriver
    version: 1.0.0
    runtime: driver
    gateway: {endpoint: "`+prov.URL+`", api_key: "`+harnessSentinel+`"}
  - {name: echo, version: 1.0.0}
inference:
  transport: process
  driver: {artifact: procdriver}
capabilities:
  env: {allow: [PROC_MODE, PROC_HINT]}
  harness: {paths: [{path: /usr}]}
  network: {allow: [harness.example]}
`+caps+`lifecycle: {conversation: threaded}
`), 0o644)
	m, err := manifest.Load(mpath)
	if err != nil {
		t.Fatal(err)
	}
	return e, m, reg
}

// harnessEnv is the environment the harness capsule's sessions look up.
func harnessEnv(k string) (string, bool) {
	v, ok := map[string]string{"PROC_MODE": "m1", "PROC_HINT": "h"}[k]
	return v, ok
}

// hostHarnessed serves harnessCapsule's capsule.
func hostHarnessed(t *testing.T, prov *httptest.Server, driver []byte, inactivity time.Duration, caps string, sinks ...Sink) *Hosted {
	t.Helper()
	e, m, reg := harnessCapsule(t, prov, driver, caps)
	h, err := e.Serve(context.Background(), m, ServeOptions{Registry: reg, Session: SessionConfig{WorkRoot: t.TempDir(), Sinks: sinks,
		HarnessInactivity: inactivity, LookupEnv: harnessEnv}})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestProcessTransport runs tasks of a process capsule end to end against a stand-in
// harness in the session's sandbox: the answer streams as chunks, the next task of the
// context resumes the harness session, the capsule's tool is called through the MCP
// bridge (its bearer token required) and traced as a tool call, the harness sees only its granted variables and
// the plan's, its provider requests reach the provider with the real key through the
// credential gateway (which the harness never holds), another host port stays
// unreachable, and each way a turn fails — a failure the harness reports, a crash
// without a terminal event, a hang cut by the inactivity timeout (on a host of its own
// with a short limit, so a slow start under load is never taken for one) — ends the task failed
// with the driver's classification. It runs with the driver as a core module and as a
// component.
func TestProcessTransport(t *testing.T) {
	for _, form := range procDriverForms {
		t.Run(form.name, func(t *testing.T) { processTransport(t, form.wasm(t)) })
	}
}

func processTransport(t *testing.T, driver []byte) {
	var mu sync.Mutex
	var keys []string
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Authorization")+"|"+r.Header.Get("X-Api-Key"))
		mu.Unlock()
		io.WriteString(w, "provider-ok")
	}))
	defer prov.Close()
	denied, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer denied.Close()
	seen := &collect{}
	// A minute of silence before a turn is cut: a harness slow to start on a loaded
	// machine is not a hang. The hang case has a host of its own with a short limit.
	h := hostHarnessed(t, prov, driver, time.Minute, "", seen)
	ctx := context.Background()
	run := func(ctxID, text string, history ...Turn) TaskOutcome {
		return h.RunTask(ctx, TaskRequest{ContextID: ctxID, Text: text, History: history})
	}

	hello := run("ctx_a", "hello")
	if hello.State != StateCompleted || hello.Result != "Hello" {
		t.Fatalf("hello: %+v", hello)
	}
	var chunks []string
	for _, e := range seen.events {
		if c, ok := e.Data.(Chunk); ok {
			chunks = append(chunks, c.Text)
		}
	}
	if strings.Join(chunks, "|") != "Hel|lo" {
		t.Errorf("chunks %q", chunks)
	}
	resumed := run("ctx_a", "resume", Turn{User: "hello", Agent: hello.Result, Thread: hello.Thread})
	// The harness finds what it kept in the first task's run: its files folder is the session's.
	if resumed.Result != "resumed=yes session="+hello.Thread.Continuation+" kept="+hello.Thread.Continuation || hello.Thread.Continuation == "" {
		t.Errorf("resume: %q (first session %q)", resumed.Result, hello.Thread.Continuation)
	}
	if fresh := run("ctx_b", "resume"); !strings.HasPrefix(fresh.Result, "resumed=no") {
		t.Errorf("a new context resumed: %q", fresh.Result)
	}

	tool := run("ctx_t", "tool")
	if !strings.HasPrefix(tool.Result, "tools=echo nokey=401 ") || !strings.Contains(tool.Result, `via bridge`) || strings.Contains(tool.Result, `"isError":true`) {
		t.Errorf("a tool call through the bridge: %+v", tool)
	}
	calls := 0
	for _, e := range seen.events {
		if c, ok := e.Data.(ToolCall); ok && c.ToolName == "echo" && c.Status == "passed" {
			calls++
		}
	}
	if calls != 1 {
		t.Errorf("%d tool_call events for echo, want 1", calls)
	}
	// The call hangs under the run's turn, the turn under the task.
	byID := map[string]*Event{}
	for _, e := range seen.events {
		byID[e.ID] = e
	}
	for _, e := range seen.events {
		if c, ok := e.Data.(ToolCall); ok && c.ToolName == "echo" {
			turn := byID[e.ParentID]
			if turn == nil || turn.Type != EventHarness || turn.Data.(HarnessEvent).Case != "turn-started" || byID[turn.ParentID] == nil || byID[turn.ParentID].Type != EventTaskStart {
				t.Errorf("the tool call hangs under %+v", turn)
			}
		}
	}
	// A built-in tool of the harness (granted through the driver's config) is traced as
	// not hooked; a bridge tool is not.
	if b := run("ctx_h", "builtin"); b.Result != "ran a built-in" {
		t.Errorf("builtin: %+v", b)
	}
	builtins := 0
	for _, e := range seen.events {
		if d, ok := e.Data.(HarnessEvent); ok && d.Case == "tool-call" && d.ToolName == "Bash" && d.NotHooked {
			builtins++
		}
	}
	if builtins != 1 {
		t.Errorf("%d not-hooked Bash calls traced, want 1", builtins)
	}
	env := run("ctx_c", "env")
	if !strings.HasPrefix(env.Result, "mode=m1 hint=h file=hs_") || !strings.Contains(env.Result, "key=none") {
		t.Errorf("env: %+v", env)
	}
	gw := run("ctx_d", "gateway")
	if gw.Result != "provider-ok" {
		t.Errorf("gateway: %+v", gw)
	}
	mu.Lock()
	if len(keys) != 1 || keys[0] != "Bearer "+harnessSentinel+"|" {
		t.Errorf("the provider saw keys %q", keys)
	}
	mu.Unlock()
	if tier := shell.DetectTier().Tier; tier != shell.TierEnvOnly {
		if r := run("ctx_e", "denied "+strings.TrimPrefix(denied.Addr().String(), "127.0.0.1:")); r.Result != "blocked" {
			t.Errorf("a denied port in tier %s: %+v", tier, r)
		}
	}

	tests := []struct{ task, state, says string }{
		{"quota", StateFailed, "turn failed (quota): out of credit"},
		{"crash", StateFailed, "turn failed (harness-error): exited without an answer: boom"},
		{"authfail", StateFailed, "turn failed (auth): invalid api key"},
		{"maxturns", StateMaxTurns, "turn failed (max-turns): reached 3 turns"},
	}
	for _, tt := range tests {
		out := run("ctx_f", tt.task)
		if out.State != tt.state || !strings.Contains(out.Result, tt.says) {
			t.Errorf("%s: %+v, want %s saying %q", tt.task, out, tt.state, tt.says)
		}
	}
	// A hang is cut by the inactivity limit, here half a second.
	hangs := hostHarnessed(t, prov, driver, 500*time.Millisecond, "", &collect{})
	if out := hangs.RunTask(ctx, TaskRequest{ContextID: "ctx_f", Text: "hang"}); out.State != StateFailed || !strings.Contains(out.Result, "turn failed (canceled): interrupted") {
		t.Errorf("hang: %+v, want failed saying %q", out, "turn failed (canceled): interrupted")
	}
	// Canceled by its client: interrupted, classified canceled by the driver.
	cctx, cancel := context.WithCancel(ctx)
	cancelOnChunk := &chunkHook{fire: cancel}
	cancelled := h.RunTask(cctx, TaskRequest{ContextID: "ctx_g", Text: "hang", Sink: cancelOnChunk})
	if cancelled.State != StateCanceled {
		t.Errorf("a canceled run: %+v", cancelled)
	}
	// The sentinel is nowhere in what the harness was given: its files and its output.
	filepath.Walk(hello.Layout.Work, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), harnessSentinel) {
				t.Errorf("%s holds the provider key", p)
			}
		}
		return nil
	})
}

// TestProcessContainment: a harness that allocates without bound and one that forks
// without bound are stopped by the context's cgroup limits, the trace says which limit
// acted, and the capsule keeps serving tasks.
func TestProcessContainment(t *testing.T) {
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer prov.Close()
	seen := &collect{}
	h := hostHarnessed(t, prov, procDriverCore(t), time.Minute, "  resources: {cgroup_memory_bytes: 67108864, cgroup_pids_max: 24}\n", seen)
	ctx := context.Background()
	hog := h.RunTask(ctx, TaskRequest{ContextID: "ctx_c", Text: "hog"})
	if strings.Contains(hog.Result, "E-SEC-006") {
		t.Skipf("this host cannot apply cgroup limits: %s", hog.Result)
	}
	if hog.State != StateFailed || !strings.Contains(hog.Result, "killed at the cgroup's memory limit") {
		t.Errorf("hog: %+v", hog)
	}
	bomb := h.RunTask(ctx, TaskRequest{ContextID: "ctx_c", Text: "bomb"})
	if bomb.State != StateCompleted || bomb.Result != "bomb over" {
		t.Errorf("bomb: %+v", bomb)
	}
	var contained []string
	for _, e := range seen.events {
		if d, ok := e.Data.(HarnessEvent); ok && d.Case == "contained" {
			contained = append(contained, d.Text)
		}
	}
	if len(contained) != 2 || !strings.Contains(contained[0], "memory limit") || !strings.Contains(contained[1], "pids limit") {
		t.Errorf("contained events %q", contained)
	}
	if after := h.RunTask(ctx, TaskRequest{ContextID: "ctx_c", Text: "hello"}); after.Result != "Hello" {
		t.Errorf("after both: %+v", after)
	}
}

// TestDoctor reports on the stand-in harness as `caddy capsule doctor` does: found on
// the PATH, its version against the driver's tested ones, its login state read by the
// driver from the login check, and each variable it needs.
func TestDoctor(t *testing.T) {
	prov := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer prov.Close()
	e, m, reg := harnessCapsule(t, prov, procDriverCore(t), "")
	tests := []struct {
		name     string
		env      map[string]string
		path     bool // the harness is on the PATH
		login    string
		problems []string
	}{
		{"ready", map[string]string{"PROC_MODE": "m", "PROC_HINT": "h"}, true, "logged-in", nil},
		{"a variable unset, logged out", map[string]string{"PROC_MODE": "m"}, true, "logged-out", []string{"PROC_HINT is not set", "the harness is not logged in: not logged in"}},
		{"not installed", map[string]string{"PROC_MODE": "m", "PROC_HINT": "h"}, false, "unknown", []string{"fakeharness is not on the PATH: install fake"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) {
				if k == "PATH" && !tt.path {
					return "/usr/bin:/bin", true
				}
				if k == "PATH" || k == "HOME" {
					return os.LookupEnv(k)
				}
				v, ok := tt.env[k]
				return v, ok
			}
			if !tt.path {
				t.Setenv("PATH", "/usr/bin:/bin")
			}
			rep, err := e.Doctor(context.Background(), m, StageOptions{Registry: reg}, lookup)
			if err != nil {
				t.Fatal(err)
			}
			if (rep.Path != "") != tt.path || rep.Login != tt.login || strings.Join(rep.Problems, "|") != strings.Join(tt.problems, "|") {
				t.Errorf("report %+v", rep)
			}
			if tt.path && (rep.Version != "fakeharness 1.0.0" || !rep.Tested) {
				t.Errorf("version %q tested %v", rep.Version, rep.Tested)
			}
			if tt.login == "logged-in" && rep.LoginDetail != "logged in as ada" {
				t.Errorf("login detail %q", rep.LoginDetail)
			}
		})
	}
}

// chunkHook calls fire at the first chunk of a task: the harness is running then.
type chunkHook struct {
	once sync.Once
	fire func()
}

func (c *chunkHook) Event(e *Event) error {
	if _, ok := e.Data.(Chunk); ok {
		c.once.Do(c.fire)
	}
	return nil
}

// TestHarnessMemoryHoldsNoKey dumps the memory of a running harness — every readable
// mapping through /proc/<pid>/mem, and its environment — while the provider key is in
// use by its run's credential gateway: the key is nowhere in it.
func TestHarnessMemoryHoldsNoKey(t *testing.T) {
	prov := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer prov.Close()
	var scanned int
	var found []string
	var marker string // the session id the harness holds in a variable: the dump must find it
	markerSeen := false
	dump := sinkFunc(func(e *Event) error {
		c, ok := e.Data.(Chunk)
		if !ok || !strings.HasPrefix(c.Text, "holding ") || marker != "" {
			return nil
		}
		marker = strings.TrimPrefix(c.Text, "holding ")
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, c := range procs {
			cmd, _ := os.ReadFile(c)
			if !strings.Contains(string(cmd), "fakeharness") || !strings.Contains(string(cmd), "hold") {
				continue
			}
			dir := filepath.Dir(c)
			scanned++
			if env, _ := os.ReadFile(filepath.Join(dir, "environ")); strings.Contains(string(env), harnessSentinel) {
				found = append(found, dir+"/environ")
			}
			maps, _ := os.ReadFile(filepath.Join(dir, "maps"))
			mem, err := os.Open(filepath.Join(dir, "mem"))
			if err != nil {
				t.Errorf("cannot open %s/mem: %v", dir, err)
				continue
			}
			for _, line := range strings.Split(string(maps), "\n") {
				var lo, hi uint64
				var perms string
				if n, _ := fmt.Sscanf(line, "%x-%x %s", &lo, &hi, &perms); n != 3 || perms[0] != 'r' || hi-lo > 1<<30 {
					continue
				}
				buf := make([]byte, hi-lo)
				n, _ := mem.ReadAt(buf, int64(lo))
				if n > 0 && bytes.Contains(buf[:n], []byte(harnessSentinel)) {
					found = append(found, fmt.Sprintf("%s/mem %s", dir, strings.TrimSpace(line)))
				}
				markerSeen = markerSeen || n > 0 && bytes.Contains(buf[:n], []byte(marker))
			}
			mem.Close()
		}
		return nil
	})
	h := hostHarnessed(t, prov, procDriverCore(t), time.Minute, "", dump)
	ctx, cancel := context.WithCancel(context.Background())
	stop := &chunkHook{fire: cancel}
	out := h.RunTask(ctx, TaskRequest{ContextID: "ctx_m", Text: "hold", Sink: stop})
	if out.State != StateCanceled {
		t.Errorf("the held run: %+v", out)
	}
	if scanned == 0 || !markerSeen {
		t.Fatalf("the dump is blind: %d harness processes, the session id %q seen %v", scanned, marker, markerSeen)
	}
	if len(found) > 0 {
		t.Errorf("the provider key is in the harness: %v", found)
	}
}

// TestGrantedPaths: capabilities.harness.paths granted read-write become the command's
// writable paths, those granted read readable ones, and a path missing on this host is
// left out (the sandbox mounts each; runtime/shell TestStart "granted paths" shows what
// the harness can do with them).
func TestGrantedPaths(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "creds.json")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		name   string
		grants []manifest.HarnessPath
		ro, rw []string
	}{
		{"none", nil, nil, nil},
		{"read", []manifest.HarnessPath{{Path: dir, Access: "read"}}, []string{dir}, nil},
		{"read-write", []manifest.HarnessPath{{Path: dir, Access: "read-write"}, {Path: file, Access: "read-write"}}, nil, []string{dir, file}},
		{"both, one missing", []manifest.HarnessPath{{Path: file, Access: "read"}, {Path: missing, Access: "read-write"}, {Path: dir, Access: "read-write"}},
			[]string{file}, []string{dir}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ro, rw := grantedPaths(tt.grants)
			if !slices.Equal(ro, tt.ro) || !slices.Equal(rw, tt.rw) {
				t.Errorf("read %q, read-write %q; want %q, %q", ro, rw, tt.ro, tt.rw)
			}
		})
	}
}
