package escape

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// Harness rows attack from inside a process capsule's harness: one capsule, served with
// runtime.Serve as the gateway hosts it, whose driver is internal/testkit/testguests/procdriver
// and whose harness is a stand-in (fakeharness, below) that runs its task text as a bash
// command and answers "turn-end exit=<status> <output>". So each row is one command,
// run as one task of a context of its own, in the sealed sandbox with the run's
// credential gateway and MCP bridge reachable and cgroup limits on. Sentinels: a folder
// outside every grant, the harness's install folder, another context's workdir, the
// attacker's own records (trace.jsonl), the provider stand-in behind the credential
// gateway (it must get no request and its key must reach the harness nowhere), the
// network fixture's sentinel server and upstream DNS server, the tool dispatcher behind
// the bridge, and the host's process table (nothing the harness started outlives it).

// providerKey is the provider's real key, the driver's gateway.api_key: only the
// provider may ever see it.
const providerKey = "sk-escape-provider-key-5d21e0"

// forged marks a line a row tries to add to the attacker's own trace.
const forged = "ESCAPE-FORGED-TRACE-LINE"

// outliveMarker is in the command line of a process a row tries to leave behind.
const outliveMarker = "4242.1717"

// escapeHarness is the stand-in harness. procdriver runs it as
// `fakeharness run --session <id> [--resume] <task>` and reads its stdout; the command's
// output goes through a file, so a background process holding the pipe cannot hold the
// turn open.
const escapeHarness = `#!/bin/bash
case "$1" in
--version) echo "fakeharness 1.0.0"; exit 0;;
auth) echo "logged in"; exit 0;;
esac
bash -c "${@: -1}" >"$FAKE_FILES/out" 2>&1 </dev/null
code=$?
# Builtins only from here: the command may have left no process to fork.
mapfile -t out <"$FAKE_FILES/out"
out="${out[*]}"
echo "turn-end exit=$code ${out:0:4000}"
`

// mcpCall is a client of the run's MCP bridge installed beside the harness, as a
// harness's own MCP client would be: `mcpcall <method> <params JSON>` opens a session
// with the bridge's token (initialize, then the initialized notification), sends one
// request in it and prints how it was answered: "HTTP <status>" when the HTTP front
// refused it, "JSON-RPC <code>", "tool error: <text>", "tool: <text>", or for tools/list
// "tools: <names>".
const mcpCall = `#!/usr/bin/env python3
import json, os, sys, urllib.request, urllib.error

url, token = os.environ["FAKE_BRIDGE"], os.environ["FAKE_BRIDGE_TOKEN"]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

def post(body, sid=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    req.add_header("Authorization", "Bearer " + token)
    req.add_header("Content-Type", "application/json")
    req.add_header("Accept", "application/json, text/event-stream")
    if sid:
        req.add_header("Mcp-Session-Id", sid)
    try:
        r = opener.open(req, timeout=30)
        return r.status, r.headers.get("Mcp-Session-Id"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, None, e.read().decode()

def message(text):
    for line in text.splitlines():
        if line.startswith("data: "):
            return json.loads(line[6:])
    return json.loads(text) if text.strip() else None

status, sid, _ = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "mcpcall", "version": "1"}}})
if status != 200:
    print("initialize HTTP %d" % status)
    sys.exit(0)
post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
status, _, text = post({"jsonrpc": "2.0", "id": 2, "method": sys.argv[1], "params": json.loads(sys.argv[2])}, sid)
if status != 200:
    print("HTTP %d" % status)
    sys.exit(0)
m = message(text)
if "error" in m:
    print("JSON-RPC %d" % m["error"]["code"])
elif "tools" in m["result"]:
    print("tools: " + " ".join(t["name"] for t in m["result"]["tools"]))
else:
    r = m["result"]
    out = " ".join(c.get("text", "") for c in r.get("content", []))
    print(("tool error: " if r.get("isError") else "tool: ") + out[:200])
`

type harnessFixture struct {
	h                *runtime.Hosted
	bin, outside     string          // the harness's install folder; a folder nothing grants
	attacker, victim *runtime.Layout // the context of rows attacking their own records; another, its workdir holding victim.txt
	contexts         atomic.Int64    // the rows' fresh contexts so far
	victimNames      []string        // what the victim's workdir held before the rows

	provHits atomic.Int64 // requests the provider stand-in got

	mu        sync.Mutex
	toolCalls int      // tool_call events: calls the bridge dispatched
	contained []string // harness contained events' texts
}

// Event collects what the rows look at from every context's events.
func (f *harnessFixture) Event(e *runtime.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch d := e.Data.(type) {
	case runtime.ToolCall:
		f.toolCalls++
	case runtime.HarnessEvent:
		if d.Case == "contained" {
			f.contained = append(f.contained, d.Text)
		}
	}
	return nil
}

func (f *harnessFixture) counts() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.toolCalls, len(f.contained)
}

// harness publishes procdriver and echo, writes the capsule and serves it; its two
// contexts run a first task each so their workdirs exist.
func (s *suite) harness(t *testing.T) *harnessFixture {
	if s.hf != nil {
		return s.hf
	}
	n := s.netFix(t)
	base, err := filepath.EvalSymlinks(s.top.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &harnessFixture{bin: filepath.Join(base, "bin"), outside: filepath.Join(base, "outside")}
	for p, content := range map[string]string{filepath.Join(f.bin, "fakeharness"): escapeHarness, filepath.Join(f.bin, "mcpcall"): mcpCall,
		filepath.Join(f.outside, "secret.txt"): secret} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The gateway finds the harness on its PATH, as an operator's installed CLI.
	s.top.Setenv("PATH", f.bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	s.top.Setenv("ESCAPE_HOST_SECRET", hostSecret)
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.provHits.Add(1)
		io.WriteString(w, "provider answered")
	}))
	s.top.Cleanup(prov.Close)

	ctx := context.Background()
	rt, err := runtime.New(ctx, wasm.WithCacheDir(guestbuild.WazeroCache()))
	if err != nil {
		t.Fatal(err)
	}
	s.top.Cleanup(func() { rt.Close(ctx) })
	reg := registry.NewLocal(filepath.Join(base, "reg"))
	publish(t, reg, base, "procdriver", "driver", guestbuild.Wasm(t, "../testguests/procdriver"))
	publish(t, reg, base, "echo", "tool", guestbuild.Wasm(t, "../testguests/echo"))
	mpath := filepath.Join(base, "murmur.yaml")
	os.WriteFile(mpath, []byte(`name: escape-harness
version: 1.0.0
artifacts:
  - name: procdriver
    version: 1.0.0
    runtime: driver
    gateway: {endpoint: "`+prov.URL+`", api_key: "`+providerKey+`"}
  - {name: echo, version: 1.0.0}
inference:
  transport: process
  driver: {artifact: procdriver}
capabilities:
  env: {allow: [PROC_MODE, PROC_HINT, PROC_LEAK]}
  harness: {paths: [{path: /usr/share}]}
  network: {allow: [harness.example]}
  resources: {cgroup_memory_bytes: 67108864, cgroup_pids_max: 32}
lifecycle: {conversation: threaded}
`), 0o644)
	m, err := manifest.Load(mpath)
	if err != nil {
		t.Fatal(err)
	}
	// The host's variables: PROC_LEAK is allowed but holds the provider key, and
	// ESCAPE_HOST_SECRET is not allowed: neither may reach the harness.
	hostEnv := map[string]string{"PROC_MODE": "m1", "PROC_HINT": "h", "PROC_LEAK": providerKey, "ESCAPE_HOST_SECRET": hostSecret}
	h, err := rt.Serve(ctx, m, runtime.ServeOptions{Registry: reg, Session: runtime.SessionConfig{
		WorkRoot: filepath.Join(base, "sessions"), Sinks: []runtime.Sink{f}, DNSUpstream: n.upstreamAddr,
		HarnessInactivity: time.Minute,
		LookupEnv: func(k string) (string, bool) {
			v, ok := hostEnv[k]
			return v, ok
		}}})
	if err != nil {
		t.Fatal(err)
	}
	s.top.Cleanup(func() { h.Close() })
	f.h = h
	for _, c := range []struct {
		id  string
		out **runtime.Layout
	}{{"ctx_victim", &f.victim}, {"ctx_attacker", &f.attacker}} {
		o := h.RunTask(ctx, runtime.TaskRequest{ContextID: c.id, Text: "true"})
		if o.State != runtime.StateCompleted || o.Result != "exit=0 " {
			t.Fatalf("the harness capsule does not run a task: %+v", o)
		}
		*c.out = o.Layout
	}
	if err := os.WriteFile(filepath.Join(f.victim.Work, "victim.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	f.victimNames = names(f.victim.Work)
	s.hf = f
	return f
}

// publish packs a wasm artifact of role and publishes it to reg.
func publish(t *testing.T, reg *registry.Local, base, name, role string, bin []byte) {
	dir := filepath.Join(base, "artifacts", name)
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte("name: "+name+"\nversion: 1.0.0\nruntime: "+role+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, name+".wasm"), bin, 0o644)
	data, _, err := registry.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Publish(context.Background(), data, ""); err != nil {
		t.Fatal(err)
	}
}

func names(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// escaped reports what a row changed or reached on the host outside its workdir, work,
// and where the provider key turned up in it.
func (f *harnessFixture) escaped(work string) string {
	var out []string
	if b, err := os.ReadFile(filepath.Join(f.outside, "secret.txt")); err != nil || string(b) != secret || len(names(f.outside)) != 1 {
		out = append(out, "the outside folder changed: "+strings.Join(names(f.outside), ", "))
	}
	if b, err := os.ReadFile(filepath.Join(f.bin, "fakeharness")); err != nil || string(b) != escapeHarness || len(names(f.bin)) != 2 {
		out = append(out, "the install folder changed: "+strings.Join(names(f.bin), ", "))
	}
	if b, err := os.ReadFile(filepath.Join(f.victim.Work, "victim.txt")); err != nil || string(b) != secret {
		out = append(out, "victim.txt changed")
	}
	if got := names(f.victim.Work); strings.Join(got, ",") != strings.Join(f.victimNames, ",") {
		out = append(out, "the victim's workdir now holds "+strings.Join(got, ", "))
	}
	if b, _ := os.ReadFile(f.attacker.Trace); strings.Contains(string(b), forged) {
		out = append(out, "the attacker wrote its own trace")
	}
	filepath.Walk(work, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), providerKey) {
				out = append(out, p+" holds the provider key")
			}
		}
		return nil
	})
	if pids := outlivers(); pids != "" {
		out = append(out, "processes outlived the harness: "+pids)
	}
	return strings.Join(out, "; ")
}

// outlivers lists host processes whose command line holds outliveMarker.
func outlivers() string {
	ents, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); strings.Contains(string(b), outliveMarker) {
			pids = append(pids, e.Name())
		}
	}
	return strings.Join(pids, ",")
}

func (n *netFixture) questions() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	total := 0
	for _, c := range n.upstream {
		total += c
	}
	return total
}

var (
	harnessAnswer = regexp.MustCompile(`^exit=(\d+) (.*)$`)
	httpAnswer    = regexp.MustCompile(`HTTP \d{3}`)
	count         = regexp.MustCompile(`\d+ `)
)

// harnessAttack runs cmd as a task of a fresh context (of the attacker context when it
// names that one's records) and classifies how it ended:
// the task's failure, else the command's exit as for a shell row ("exit 1 ENOENT"), with
// an "HTTP <status>" the command printed and an E-NET code; and what the cgroup limits
// contained during it ("contained: …").
// The provider may get exactly provider requests (the ones a row sends with the
// placeholder, as a harness would).
func harnessAttack(cmd string, provider int64) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		f, n := s.harness(t), s.net
		hits, prov, asked := n.sentinelHits.Load(), f.provHits.Load(), n.questions()
		calls, contained := f.counts()
		_, proxyPort, _ := net.SplitHostPort(n.proxyAddr)
		_, dnsPort, _ := net.SplitHostPort(n.dnsAddr)
		cmd = strings.NewReplacer("{outside}", f.outside, "{bin}", f.bin, "{trace}", f.attacker.Trace, "{records}", f.attacker.Root,
			"{victim}", f.victim.Work, "{sentinel}", n.sentinelPort, "{hostproxy}", proxyPort, "{hostdns}", dnsPort,
			"{gateway}", strconv.Itoa(os.Getpid()), "{forged}", forged, "{marker}", outliveMarker).Replace(cmd)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// A context per row: a row's leftovers (files, processes in the cgroup) meet no
		// other row. It also keeps each session to few runs: today a run whose credential
		// gateway or bridge gets a port an earlier run of the same session had fails
		// E-PRC-014, that run's reach socket left in the sandbox's folder (reported).
		ctxID := fmt.Sprintf("ctx_row_%d", f.contexts.Add(1))
		if strings.Contains(cmd, f.attacker.Root) {
			ctxID = "ctx_attacker"
		}
		o := f.h.RunTask(ctx, runtime.TaskRequest{ContextID: ctxID, Text: cmd})
		work := f.attacker.Work
		if o.Layout != nil {
			work = o.Layout.Work
		}
		var class string
		if m := harnessAnswer.FindStringSubmatch(o.Result); o.State == runtime.StateCompleted && m != nil {
			code, _ := strconv.Atoi(m[1])
			class = shellClass(code, m[2])
			if h := httpAnswer.FindString(m[2]); h != "" && !strings.Contains(class, h) {
				class += " " + h
			}
			if c := netCode.FindString(m[2]); c != "" {
				class += " " + c
			}
			if out := strings.TrimSpace(m[2]); code == 0 && !strings.HasPrefix(out, "HTTP") && out != "" && len(out) <= 60 {
				class += ": " + out // a short answer is its own classification
			}
		} else {
			class = o.State + ": " + o.Result
		}
		f.mu.Lock()
		if len(f.contained) > contained {
			// How many processes a limit stopped varies with timing; which limit does not.
			class += " contained: " + count.ReplaceAllString(strings.Join(f.contained[contained:], "; "), "n ")
		}
		f.mu.Unlock()
		escaped := join(leaked(o.Result), f.escaped(work))
		if strings.Contains(o.Result, providerKey) {
			escaped = join(escaped, "the harness saw the provider key")
		}
		if got := n.sentinelHits.Load(); got != hits {
			escaped = join(escaped, fmt.Sprintf("the sentinel server was reached %d times", got-hits))
		}
		if got := f.provHits.Load() - prov; got != provider {
			escaped = join(escaped, fmt.Sprintf("the provider got %d requests, not %d", got, provider))
		}
		if got := n.questions(); got != asked {
			escaped = join(escaped, fmt.Sprintf("the upstream DNS server was asked %d questions", got-asked))
		}
		if now, _ := f.counts(); now != calls {
			escaped = join(escaped, fmt.Sprintf("the bridge dispatched %d tool calls", now-calls))
		}
		return outcome{class: class, escaped: escaped}
	}
}

func harnessRows() []row {
	cases := []struct {
		attack, cmd, want string
		provider          int64 // requests the provider may get
	}{
		{"read a file outside the workdir and every granted path", "cat {outside}/secret.txt", "exit 1 ENOENT", 0},
		{"read beside its install folder, by ..", "cat {bin}/../outside/secret.txt", "exit 1 ENOENT", 0},
		{"overwrite its own binary", "echo pwned > {bin}/fakeharness", "exit 1 EROFS", 0},
		{"write into a granted path", "echo pwned > /usr/share/pwned", "exit 1 EROFS", 0},
		{"write a new file outside", "echo pwned > {outside}/new.txt", "exit 1 ENOENT", 0},
		{"read its session's trace", "cat {trace}", "exit 1 ENOENT", 0},
		{"append to its session's trace", "echo {forged} >> {trace}", "exit 1 EACCES", 0},
		{"list its session's records (an empty folder holding the workdir's mount)", "ls -A {records}", "exit 0: work", 0},
		{"read another context's workdir", "cat {victim}/victim.txt", "exit 1 ENOENT", 0},
		{"write into another context's workdir", "echo pwned > {victim}/planted.txt", "exit 1 ENOENT", 0},
		{"find the key-holding allowed variable or a host variable", "env | grep -E '^(PROC_LEAK|ESCAPE_HOST_SECRET)='", "exit 1", 0},
		{"dump its and its parent's environment (the dump is searched for the key)",
			"{ env; tr '\\0' '\\n' </proc/self/environ; tr '\\0' '\\n' </proc/$PPID/environ; } >dump.txt; grep -o '^PROC_[A-Z]*' dump.txt | sort -u | tr '\\n' ' '",
			"exit 0: PROC_HINT PROC_MODE", 0},
		{"search what it can read for the provider key", "P=sk-escape; grep -rIl -e \"$P-provider\" . \"$HOME\" /tmp /proc/self/environ {bin}", "exit 1", 0},
		{"swap the placeholder for a guessed key", "curl -s -o /dev/null -w 'HTTP %{http_code}' -H 'x-api-key: sk-ant-api03-guessed' -d '{}' \"$FAKE_GATEWAY/v1/messages\"", "exit 0 HTTP 401", 0},
		{"call the credential gateway without a key", "curl -s -o /dev/null -w 'HTTP %{http_code}' -d '{}' \"$FAKE_GATEWAY/v1/messages\"", "exit 0 HTTP 401", 0},
		{"climb out of the provider's path through the credential gateway", "curl -s --path-as-is -o /dev/null -w 'HTTP %{http_code}' -H \"x-api-key: $FAKE_KEY\" \"$FAKE_GATEWAY/../../admin\"", "exit 0 HTTP 400", 0},
		{"send the credential gateway a DELETE", "curl -s -X DELETE -o /dev/null -w 'HTTP %{http_code}' -H \"x-api-key: $FAKE_KEY\" \"$FAKE_GATEWAY/v1/files/x\"", "exit 0 HTTP 405", 0},
		{"use the credential gateway as a forward proxy to the sentinel server", "curl -s -m 10 --noproxy '' -x \"$FAKE_GATEWAY\" -H \"x-api-key: $FAKE_KEY\" http://127.0.0.1:{sentinel}/", "exit 0: provider answered", 1},
		{"tunnel through the credential gateway", "curl -s -m 10 --noproxy '' -p -x \"$FAKE_GATEWAY\" -H \"x-api-key: $FAKE_KEY\" -w ' HTTP %{http_connect}' http://127.0.0.1:{sentinel}/", "exit 56 HTTP 405", 0},
		{"call the MCP bridge without its token", "curl -s -o /dev/null -w 'HTTP %{http_code}' -H 'Content-Type: application/json' -d '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}' \"$FAKE_BRIDGE\"", "exit 0 HTTP 401", 0},
		{"call the MCP bridge with the credential gateway's key", "curl -s -o /dev/null -w 'HTTP %{http_code}' -H \"Authorization: Bearer $FAKE_KEY\" -H 'Content-Type: application/json' -d '{}' \"$FAKE_BRIDGE\"", "exit 0 HTTP 401", 0},
		{"call the MCP bridge, with its token, under a foreign Host", "curl -s -o /dev/null -w 'HTTP %{http_code}' -H 'Host: attacker.example' -H \"Authorization: Bearer $FAKE_BRIDGE_TOKEN\" -H 'Content-Type: application/json' -d '{}' \"$FAKE_BRIDGE\"", "exit 0 HTTP 403", 0},
		{"reach the sentinel server directly, around the proxy", "curl -sS -m 5 --noproxy '*' http://127.0.0.1:{sentinel}/", "exit 7", 0},
		// NO_PROXY names 127.0.0.1 for the run's own servers: --noproxy '' sends it to the proxy anyway.
		{"reach the sentinel server through the proxy", "curl -s -m 10 --noproxy '' -w ' HTTP %{http_code}' http://127.0.0.1:{sentinel}/", "exit 0 HTTP 403 E-NET-016", 0},
		{"reach a host no rule allows through the proxy", "curl -s -m 10 -w ' HTTP %{http_code}' http://denied.example/", "exit 0 HTTP 403 E-NET-016", 0},
		{"reach another session's policy proxy on host loopback", "curl -sS -m 5 -x http://127.0.0.1:{hostproxy} http://api.test/", "exit 7", 0},
		{"reach another session's resolver on host loopback", "exec 3<>/dev/tcp/127.0.0.1/{hostdns}", "exit 1 ECONNREFUSED", 0},
		{"resolve a name no rule allows", "getent hosts evil.example", "exit 2", 0},
		{"signal the gateway process", "kill -9 {gateway}", "exit 1 ESRCH", 0},
		{"read the gateway's environment through /proc", "cat /proc/{gateway}/environ", "exit 1 ENOENT", 0},
		{"ptrace the gateway process", `python3 -c "
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(16, {gateway}, 0, 0) < 0:
    e = ctypes.get_errno()
    raise OSError(e, os.strerror(e))"`, "exit 1 ESRCH", 0},
		{"read the environment of the sandbox's init (the wrapper, started by the gateway)", "cat /proc/1/environ", "exit 1 ENOENT", 0},
		{"leave the session's cgroup", "echo $$ > /sys/fs/cgroup/cgroup.procs || echo $$ > /sys/fs/cgroup/memory/cgroup.procs", "exit 1 ENOENT", 0},
		{"mount the cgroup filesystem to raise its limits", "mkdir -p cg && mount -t cgroup2 none cg", "exit 32 EACCES", 0},
		{"move into new namespaces, a cgroup one among them", "unshare -C -m -U -r true", "exit 1 EPERM", 0},
		{"leave a process behind", "setsid sleep {marker} </dev/null >/dev/null 2>&1 & echo left", "exit 0: left", 0},
		{"allocate without bound", "head -c 4000000000 /dev/zero | tail >/dev/null", "exit 137 contained: n process(es) killed at the cgroup's memory limit", 0},
		// dash, not bash: bash retries a refused fork for seconds.
		{"fork without bound", "sh -c 'i=0; while [ $i -lt 200 ]; do sleep 30 >/dev/null 2>&1 & i=$((i+1)); done' 2>/dev/null; echo over",
			"exit 0: over contained: n fork(s) refused at the cgroup's pids limit", 0},
	}
	var rows []row
	for i, c := range cases {
		rows = append(rows, row{id: fmt.Sprintf("HA-%02d", i+1), surface: Harness, attack: c.attack + ": " + c.cmd, want: c.want, need: needHarness, run: harnessAttack(c.cmd, c.provider)})
	}
	return rows
}
