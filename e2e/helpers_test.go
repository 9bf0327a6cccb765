package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/ports"
	"github.com/capsulegate/capsulegate/internal/testkit/syncbuf"
)

// gateway is a real `caddy run` of Caddyfile.example (ports rewritten to free ones) plus
// test capsules for the lifecycle cases, serving from a folder laid out like the repo.
type gateway struct {
	dir, home string
	base      string // http://127.0.0.1:<port>
	replay    string // the replay provider's port
	admin     string // 127.0.0.1:<port>
	// conformance and conformance03 are the conformance capsule's sites: the default card,
	// and `card 0.3` (Caddyfile.example's 8110 and 8103).
	conformance, conformance03 string
	// layouts are the wordcount capsule's agent URLs in the deployment layouts the
	// gateway also serves (see layoutSites).
	layouts    map[string]string
	backPort   string // the site a front proxy forwards to, trusting it (startFront)
	caddyfile  string
	cmd        *exec.Cmd
	logs       *syncBuffer
	httpClient *http.Client
	// hooks is a webhook receiver on 127.0.0.1 that the gateway's push.allow names: it
	// keeps every notification's body, per path.
	hooks *webhooks
}

// webhooks records the push notifications a gateway posts, per URL path, in arrival
// order, and signals each on got.
type webhooks struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string][]webhookPost
	new chan struct{}
}

type webhookPost struct {
	token string
	body  []byte
}

func startWebhooks(t *testing.T) *webhooks {
	w := &webhooks{got: map[string][]webhookPost{}, new: make(chan struct{}, 1024)}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		w.got[r.URL.Path] = append(w.got[r.URL.Path], webhookPost{token: r.Header.Get("X-A2A-Notification-Token"), body: body})
		w.mu.Unlock()
		w.new <- struct{}{}
	}))
	t.Cleanup(w.srv.Close)
	return w
}

// posts returns what path received so far.
func (w *webhooks) posts(path string) []webhookPost {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got[path])
}

// syncBuffer collects a process's output while tests read it.
type syncBuffer = syncbuf.Buffer

// gatewayCache is the machine-code cache (`cache_dir`) every gateway of the tests
// shares: the one the in-process engines of the other packages fill
// (guestbuild.WazeroCache), so a guest is compiled once per machine rather than once per
// gateway a test starts. No test here asserts what a gateway compiles.
func gatewayCache() string { return guestbuild.WazeroCache() }

// freePort returns a free loopback port below the kernel's ephemeral range: a gateway
// restarted on it (after kill -9, a reload) must find it free, and a port the kernel
// hands out for 127.0.0.1:0 could meanwhile be taken by any other test's listener.
func freePort(t *testing.T) string {
	t.Helper()
	port, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(port)
}

// publish packs the artifact folder src (after writing wasm into it as <name>.wasm when
// given) and publishes it into reg with the binary.
func publish(t *testing.T, home, reg, src, name string, wasm []byte) {
	t.Helper()
	tmp := t.TempDir()
	art := filepath.Join(tmp, name)
	copyDir(t, src, art)
	if wasm != nil {
		os.WriteFile(filepath.Join(art, name+".wasm"), wasm, 0o644)
	}
	zip := filepath.Join(tmp, name+".mur.zip")
	for _, args := range [][]string{{"pack", art, "--output", zip}, {"publish", zip, "--registry", reg}} {
		if r := capsule(t, home, args...); r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
	}
}

// gateCapsule writes a test script capsule (internal/testkit/testguests/gateway invoking the
// gatetool tool) into dir with the given lifecycle and limits.
func gateCapsule(t *testing.T, dir, name, version, extra string) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	m := fmt.Sprintf("name: %s\nversion: %s\nartifacts:\n  - {name: gatetool, version: 1.0.0}\n%s", name, version, extra)
	if err := os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "capsule.wasm"), guestbuild.Wasm(t, "../internal/testkit/testguests/gateway"), 0o644)
}

const gateLimits = "capabilities:\n  limits: {memory_bytes: 134217728, deadline_seconds: 300}\n"

// startGateway lays out the examples, the registry and the test capsules, rewrites
// Caddyfile.example to free ports and runs the real binary on it.
func startGateway(t *testing.T) *gateway { return startGatewayWith(t, caddyBin) }

// startGatewayWith is startGateway with another Caddy binary (the one xcaddy built).
func startGatewayWith(t *testing.T, bin string) *gateway { return launchGateway(t, bin, "") }

// startGatewayCodex is startGateway serving the Codex example capsule too, as `make run`
// does when the Codex CLI is installed: codex is the CLI's path, put on the gateway's PATH.
func startGatewayCodex(t *testing.T, codex string) *gateway { return launchGateway(t, caddyBin, codex) }

// launchGateway starts the gateway of Caddyfile.example with bin; the Codex capsule's block
// is left out, as `make run` leaves it out without the CLI, unless codex names the CLI.
func launchGateway(t *testing.T, bin, codex string) *gateway {
	t.Helper()
	return launchGatewayWith(t, bin, codex, gatewayExtra{})
}

// gatewayExtra is what a test adds to the example gateway: capsule app options, routes
// of the example site (before its catch-all) and variables of the process.
type gatewayExtra struct {
	app, routes string
	env         []string
}

// launchGatewayWith is launchGateway with extra.
func launchGatewayWith(t *testing.T, bin, codex string, extra gatewayExtra) *gateway {
	t.Helper()
	g := &gateway{dir: t.TempDir(), logs: &syncBuffer{}, httpClient: &http.Client{Timeout: 60 * time.Second}}
	g.home = filepath.Join(g.dir, "home")
	os.MkdirAll(g.home, 0o755)
	reg := filepath.Join(g.dir, "examples", "registry")
	publish(t, g.home, reg, "../examples/artifacts/wordcount", "wordcount", guestbuild.Wasm(t, "../examples/guests/wordcount"))
	publish(t, g.home, reg, "../examples/artifacts/greeting", "greeting", nil)
	publish(t, g.home, reg, "../examples/drivers/anthropic-messages/artifact", "anthropic-messages", guestbuild.Wasm(t, "../examples/drivers/anthropic-messages"))
	gt := filepath.Join(t.TempDir(), "gatetool")
	os.MkdirAll(gt, 0o755)
	os.WriteFile(filepath.Join(gt, "murmur.yaml"), []byte("name: gatetool\nversion: 1.0.0\nruntime: tool\ndescription: echoes, spins or asks\n"), 0o644)
	publish(t, g.home, reg, gt, "gatetool", guestbuild.Wasm(t, "../internal/testkit/testguests/gatetool"))
	publish(t, g.home, reg, "../examples/artifacts/conformance-io", "conformance-io", guestbuild.Wasm(t, "../examples/guests/conformance-io"))

	copyDir(t, "../examples/capsules/hello", filepath.Join(g.dir, "examples", "capsules", "hello"))
	copyDir(t, "../examples/capsules/wordcount", filepath.Join(g.dir, "examples", "capsules", "wordcount"))
	copyDir(t, "../examples/cassettes", filepath.Join(g.dir, "examples", "cassettes"))
	copyDir(t, "../examples/capsules/conformance", filepath.Join(g.dir, "examples", "capsules", "conformance"))
	for _, lock := range []string{"hello", "wordcount", "conformance"} {
		os.Remove(filepath.Join(g.dir, "examples", "capsules", lock, "murmur.lock"))
	}
	os.WriteFile(filepath.Join(g.dir, "examples", "capsules", "wordcount", "capsule.wasm"),
		guestbuild.Wasm(t, "../examples/guests/wordcount-capsule"), 0o644)
	os.WriteFile(filepath.Join(g.dir, "examples", "capsules", "conformance", "capsule.wasm"),
		guestbuild.Wasm(t, "../examples/guests/conformance-capsule"), 0o644)

	g.hooks = startWebhooks(t)
	port, replayPort, adminPort := freePort(t), freePort(t), freePort(t)
	g.base, g.admin, g.replay = "http://127.0.0.1:"+port, "127.0.0.1:"+adminPort, replayPort
	conf, conf03 := freePort(t), freePort(t)
	g.conformance, g.conformance03 = "http://127.0.0.1:"+conf, "http://127.0.0.1:"+conf03
	hello := filepath.Join(g.dir, "examples", "capsules", "hello", "murmur.yaml")
	hm, _ := os.ReadFile(hello)
	os.WriteFile(hello, bytes.ReplaceAll(hm, []byte("127.0.0.1:8089"), []byte("127.0.0.1:"+replayPort)), 0o644)

	gateCapsule(t, filepath.Join(g.dir, "gate", "queue"), "gate-queue", "1.0.0", gateLimits+"lifecycle: {task_acceptance: queue}\n")
	gateCapsule(t, filepath.Join(g.dir, "gate", "single"), "gate-single", "1.0.0", gateLimits+"lifecycle: {task_acceptance: single}\n")
	gateCapsule(t, filepath.Join(g.dir, "gate", "auth"), "gate-auth", "1.0.0", gateLimits)
	gateCapsule(t, filepath.Join(g.dir, "gate", "teams"), "gate-teams", "1.0.0", gateLimits)
	gateCapsule(t, filepath.Join(g.dir, "gate", "basic"), "gate-basic", "1.0.0", gateLimits)
	gateCapsule(t, filepath.Join(g.dir, "gate", "deadline"), "gate-deadline", "1.0.0", "capabilities:\n  limits: {memory_bytes: 134217728, deadline_seconds: 1}\n")
	gateCapsule(t, filepath.Join(g.dir, "gate", "reload"), "gate-reload", "1.0.0", gateLimits+"lifecycle: {task_acceptance: queue, queue_depth: 4}\n")

	example, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	path := os.Getenv("PATH")
	if codex == "" {
		example = regexp.MustCompile(`(?s)\t# codex-begin\n.*\t# codex-end\n`).ReplaceAll(example, nil)
	} else {
		publish(t, g.home, reg, "../examples/drivers/codex/artifact", "codex", guestbuild.Wasm(t, "../examples/drivers/codex"))
		copyDir(t, "../examples/capsules/codex", filepath.Join(g.dir, "examples", "capsules", "codex"))
		os.Remove(filepath.Join(g.dir, "examples", "capsules", "codex", "murmur.lock"))
		cm := filepath.Join(g.dir, "examples", "capsules", "codex", "murmur.yaml")
		m, _ := os.ReadFile(cm)
		os.WriteFile(cm, bytes.ReplaceAll(m, []byte("127.0.0.1:8089"), []byte("127.0.0.1:"+replayPort)), 0o644)
		path = filepath.Dir(codex) + string(os.PathListSeparator) + path
	}
	cf := strings.ReplaceAll(string(example), "127.0.0.1:8080", "127.0.0.1:"+port)
	cf = strings.ReplaceAll(cf, "cache_dir bin/cache", "cache_dir "+gatewayCache())
	cf = strings.ReplaceAll(cf, "127.0.0.1:8089", "127.0.0.1:"+replayPort)
	cf = strings.ReplaceAll(cf, "127.0.0.1:8110", "127.0.0.1:"+conf)
	cf = strings.ReplaceAll(cf, "127.0.0.1:8103", "127.0.0.1:"+conf03)
	layouts, trusted := layoutSites(t, g)
	cf = strings.Replace(cf, "{\n", "{\n\tadmin "+g.admin+"\n"+trusted, 1) + layouts
	// Push notifications may go to the test's receiver only (an IP rule: loopback).
	cf = strings.Replace(cf, "\tcapsule {\n", "\tcapsule {\n\t\tpush {\n\t\t\tallow "+g.hooks.srv.URL+"\n\t\t}\n"+extra.app+"\n", 1)
	// The test capsules join the example site, before its catch-all.
	gates := `	handle /agents/gate-queue/* {
		capsule gate/queue/murmur.yaml {
			queue_depth 2
		}
	}
	handle /agents/gate-single/* {
		capsule gate/single/murmur.yaml
	}
	handle /agents/gate-auth/* {
		capsule gate/auth/murmur.yaml {
			auth bearer GATE_TOKEN
		}
	}
	handle /agents/gate-teams/* {
		capsule gate/teams/murmur.yaml {
			auth bearer {
				team-a TEAM_A_TOKEN
				team-b TEAM_B_TOKEN
			}
		}
	}
	# The same capsule on a second route without auth: each route keeps its own.
	handle /agents/gate-teams-open/* {
		capsule gate/teams/murmur.yaml
	}
	handle /agents/gate-basic/* {
		route {
			basic_auth {
				alice ` + bcryptHash(t, "alice-pw") + `
				bob ` + bcryptHash(t, "bob-pw") + `
			}
			capsule gate/basic/murmur.yaml
		}
	}
	handle /agents/gate-deadline/* {
		capsule gate/deadline/murmur.yaml
	}
	handle /agents/gate-reload/* {
		# One slot: the tasks the reload test queues wait for the one running.
		capsule gate/reload/murmur.yaml {
			concurrency 1
		}
	}

` + extra.routes + `
	handle {
		respond`
	cf = strings.Replace(cf, "\thandle {\n\t\trespond", gates, 1)
	g.caddyfile = filepath.Join(g.dir, "Caddyfile")
	os.WriteFile(g.caddyfile, []byte(cf), 0o644)

	g.cmd = exec.Command(bin, "run", "--config", g.caddyfile, "--adapter", "caddyfile")
	g.cmd.Dir = g.dir
	g.cmd.Env = []string{"HOME=" + g.home, "PATH=" + path, "GATE_TOKEN=s3cret-token", "TEAM_A_TOKEN=team-a-token", "TEAM_B_TOKEN=team-b-token",
		"XDG_DATA_HOME=" + filepath.Join(g.dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(g.dir, "config")}
	g.cmd.Env = append(g.cmd.Env, extra.env...)
	waitServing(t, g.cmd, g.logs)
	return g
}

// answerStream assembles a streamed answer as an A2A client does: each artifact update
// appends its text (append) or replaces what came before (not append); chunks are the
// texts of the updates before the last one (lastChunk), what was streamed as it came.
type answerStream struct {
	chunks []string
	answer string
}

func (a *answerStream) add(text string, appendTo, last bool) {
	if !last {
		a.chunks = append(a.chunks, text)
	}
	if appendTo {
		a.answer += text
	} else {
		a.answer = text
	}
}

// streamed is the chunks joined.
func (a *answerStream) streamed() string { return strings.Join(a.chunks, "") }

// jsSDK returns node's path and the absolute path of dir, a folder of an A2A JS SDK client,
// installing its SDK first (npm ci) when node_modules lacks it. Without node the test
// skips, except in CI (.ci/run installs node), where it fails.
func jsSDK(t *testing.T, dir string) (node, abs string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is not installed: .ci/run installs it, and in CI this test does not skip")
		}
		t.Skip("node is not installed; .ci/run installs it")
	}
	abs, _ = filepath.Abs(dir)
	if _, err := os.Stat(filepath.Join(abs, "node_modules", "@a2a-js", "sdk", "package.json")); err != nil {
		install := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		install.Dir = abs
		if out, err := install.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	return node, abs
}

// killAndRestart kills the gateway with SIGKILL — no drain, no shutdown: what the next
// process knows is what the store holds — and starts it again on the same config.
func (g *gateway) killAndRestart(t *testing.T) {
	t.Helper()
	g.cmd.Process.Kill()
	g.cmd.Wait()
	env := g.cmd.Env
	g.cmd = exec.Command(g.cmd.Path, g.cmd.Args[1:]...)
	g.cmd.Dir, g.cmd.Env = g.dir, env
	g.logs = &syncBuffer{}
	waitServing(t, g.cmd, g.logs)
	g.httpClient.CloseIdleConnections()
}

// reload loads g.caddyfile into the running gateway through its admin API (`caddy
// reload`, with args such as --force), as an operator does after editing it.
func (g *gateway) reload(t *testing.T, args ...string) {
	t.Helper()
	reload := exec.Command(caddyBin, append([]string{"reload", "--config", g.caddyfile, "--adapter", "caddyfile", "--address", g.admin}, args...)...)
	reload.Dir, reload.Env = g.dir, g.cmd.Env
	if out, err := reload.CombinedOutput(); err != nil {
		t.Fatalf("caddy reload: %v\n%s", err, out)
	}
	// The reload closed the old server's idle connections; a POST on one is not retried.
	g.httpClient.CloseIdleConnections()
}

// layoutSites returns the sites that serve the wordcount capsule (at <base>/agents/wc/)
// and the gate-url capsule, whose answer names MURMUR_CAPSULE_URL (at <base>/agents/url/),
// in the layouts users deploy, each on its own port: under handle_path (wordcount by an
// absolute manifest path, one argument), under uri strip_prefix, and — for a front proxy —
// under handle_path on a server whose trusted_proxies is loopback. g.layouts gets each
// layout's base URL; trusted is the global servers option.
func layoutSites(t *testing.T, g *gateway) (sites, trusted string) {
	wordcount := filepath.Join(g.dir, "examples", "capsules", "wordcount", "murmur.yaml")
	gateCapsule(t, filepath.Join(g.dir, "gate", "url"), "gate-url", "1.0.0", gateLimits+"lifecycle: {task_acceptance: queue, queue_depth: 4}\n")
	hp, sp := freePort(t), freePort(t)
	g.backPort = freePort(t)
	g.layouts = map[string]string{
		"handle_path":      "http://127.0.0.1:" + hp,
		"uri strip_prefix": "http://127.0.0.1:" + sp,
	}
	sites = fmt.Sprintf(`
http://127.0.0.1:%[1]s {
	handle_path /agents/wc/* {
		capsule %[4]s
	}
	handle_path /agents/url/* {
		capsule gate/url/murmur.yaml
	}
}

http://127.0.0.1:%[2]s {
	route /agents/wc/* {
		uri strip_prefix /agents/wc
		capsule * examples/capsules/wordcount/murmur.yaml
	}
	route /agents/url/* {
		uri strip_prefix /agents/url
		capsule gate/url/murmur.yaml
	}
}

http://127.0.0.1:%[3]s {
	handle_path /agents/wc/* {
		capsule examples/capsules/wordcount/murmur.yaml
	}
	handle_path /agents/url/* {
		capsule gate/url/murmur.yaml
	}
}
`, hp, sp, g.backPort, wordcount)
	trusted = fmt.Sprintf("\tservers 127.0.0.1:%s {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}\n", g.backPort)
	return sites, trusted
}

// startFront runs a second Caddy as the front proxy an operator puts before the
// gateway: it serves /edge/* on its own port, strips that prefix, rewrites Host to the
// back end's and says where the client was with X-Forwarded-Host/-Proto (Caddy's own)
// and X-Forwarded-Prefix. It returns the base URL clients use.
func startFront(t *testing.T, g *gateway) string {
	t.Helper()
	port := freePort(t)
	serveSites(t, fmt.Sprintf(`http://127.0.0.1:%s {
	handle_path /edge/* {
		reverse_proxy 127.0.0.1:%s {
			header_up Host {upstream_hostport}
			header_up X-Forwarded-Prefix /edge
		}
	}
}
`, port, g.backPort))
	return "http://127.0.0.1:" + port + "/edge"
}

// serveSites runs a Caddy serving sites (Caddyfile site blocks, on loopback, admin off)
// from its own temporary home with env added, until the test ends.
func serveSites(t *testing.T, sites string, env ...string) {
	t.Helper()
	serveApp(t, "", sites, env...)
}

// serveApp is serveSites with the capsule app's options (the lines of its block; none
// when empty).
func serveApp(t *testing.T, app, sites string, env ...string) {
	t.Helper()
	serveGlobal(t, "", app, sites, env...)
}

// serveGlobal is serveApp with more global options (lines of the global block, such as
// a servers block).
func serveGlobal(t *testing.T, options, app, sites string, env ...string) {
	t.Helper()
	serveGlobalLogs(t, options, app, sites, env...)
}

// serveGlobalLogs is serveGlobal returning what Caddy logs.
func serveGlobalLogs(t *testing.T, options, app, sites string, env ...string) *syncBuffer {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "Caddyfile")
	global := "{\n\tadmin off\n\tdefault_bind 127.0.0.1\n" + options
	// Capsules compile into the shared cache, unless the test names its own or reaches
	// a remote registry (whose artifact cache is <cache_dir>/artifacts, which the test's
	// fetches must not share).
	if strings.Contains(sites, "capsule ") && !strings.Contains(app, "cache_dir") && !strings.Contains(app+strings.Join(env, " "), "://") {
		app = "\t\tcache_dir " + gatewayCache() + "\n" + app
	}
	if app != "" {
		global += "\tcapsule {\n" + app + "\n\t}\n"
	}
	if err := os.WriteFile(path, []byte(global+"}\n\n"+sites), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(caddyBin, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Dir = dir
	cmd.Env = append([]string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"),
		"XDG_DATA_HOME=" + filepath.Join(dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config")}, env...)
	logs := &syncBuffer{}
	waitServing(t, cmd, logs)
	return logs
}

// waitServing starts cmd and returns once Caddy says it serves its configuration; the
// test's cleanup interrupts it.
func waitServing(t *testing.T, cmd *exec.Cmd, logs *syncBuffer) {
	t.Helper()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = logs, io.MultiWriter(logs, pw)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		pw.Close()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(cmd.Path), logs.String())
		}
	})
	// Caddy says when it serves; a config it refuses ends the process instead.
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "serving initial configuration") {
				ready <- nil
				io.Copy(io.Discard, pr)
				return
			}
		}
		ready <- fmt.Errorf("caddy ended before serving")
	}()
	select {
	case err := <-ready:
		if err != nil {
			cmd.Wait()
			t.Fatalf("%v:\n%s", err, logs.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("caddy did not serve within 3 minutes:\n%s", logs.String())
	}
}

// rpcReply is a JSON-RPC response: its HTTP status and body, decoded when the status is 200.
type rpcReply struct {
	status int
	body   []byte
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// errTransport marks a request that got no HTTP response at all.
var errTransport = errors.New("no response")

// rpc posts one JSON-RPC request to u with c, with the A2A version header (none when
// version is "") and extra headers as name, value pairs. It fails no test, so goroutines
// may call it; an error wraps errTransport when no response came.
func rpc(c *http.Client, u, version, method string, params any, headers ...string) (rpcReply, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	resp, err := c.Do(rpcRequest(u, version, body, headers...))
	if err != nil {
		return rpcReply{}, fmt.Errorf("%w: %v", errTransport, err)
	}
	defer resp.Body.Close()
	r := rpcReply{status: resp.StatusCode}
	if r.body, err = io.ReadAll(resp.Body); err != nil {
		return r, err
	}
	if r.status == http.StatusOK {
		if err := json.Unmarshal(r.body, &r); err != nil {
			return r, fmt.Errorf("%v: %.500s", err, r.body)
		}
	}
	return r, nil
}

// rpcRequest is a POST of body to u with the A2A version header (none when "") and extra
// headers.
func rpcRequest(u, version string, body []byte, headers ...string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if version != "" {
		req.Header.Set("A2A-Version", version)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

// url is path on the main site, or path itself when it is a whole URL.
func (g *gateway) url(path string) string {
	if strings.HasPrefix(path, "http") {
		return path
	}
	return g.base + path
}

// call posts one JSON-RPC request to the capsule at path with the A2A version header
// (none when version is "") and extra headers.
func (g *gateway) call(t *testing.T, path, version, method string, params any, headers ...string) rpcReply {
	t.Helper()
	r, err := rpc(g.httpClient, g.url(path), version, method, params, headers...)
	if err != nil {
		t.Fatalf("%s %s: %v", path, method, err)
	}
	return r
}

func (g *gateway) post(t *testing.T, path, version string, body []byte, headers ...string) *http.Response {
	t.Helper()
	resp, err := g.httpClient.Do(rpcRequest(g.url(path), version, body, headers...))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// eventually polls cond every 50 ms until it holds, failing t after within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(within); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		<-tick.C
	}
}

// sseEvent is one server-sent event.
type sseEvent struct {
	id    int
	event string
	data  json.RawMessage
}

// stream posts a streaming JSON-RPC request and returns its events as they arrive.
func (g *gateway) stream(t *testing.T, path, version, method string, params any) <-chan sseEvent {
	t.Helper()
	return g.streamWith(t, path, version, method, params)
}

// streamWith is stream with extra request headers, as name, value pairs.
func (g *gateway) streamWith(t *testing.T, path, version, method string, params any, headers ...string) <-chan sseEvent {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	resp := g.post(t, path, version, body, headers...)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/event-stream") {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: status %d, content type %q: %s", method, resp.StatusCode, ct, data)
	}
	ch := make(chan sseEvent, 1024)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.data != nil {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id:"):
				ev.id, _ = strconv.Atoi(strings.TrimSpace(line[3:]))
			case strings.HasPrefix(line, "event:"):
				ev.event = strings.TrimSpace(line[6:])
			case strings.HasPrefix(line, "data:"):
				ev.data = json.RawMessage(strings.TrimSpace(line[5:]))
			}
		}
	}()
	return ch
}

// streamEnd reads a stream to its end and returns its events' ids and the state of its
// final status update ("" when none is marked final).
func streamEnd(events <-chan sseEvent) (ids []int, final string) {
	for ev := range events {
		ids = append(ids, ev.id)
		var r struct {
			Result struct {
				Kind   string
				Final  bool
				Status struct{ State string }
			}
		}
		json.Unmarshal(ev.data, &r)
		switch st := r.Result.Status.State; {
		case r.Result.Final:
			final = st
		case r.Result.Kind == "task" && (st == "completed" || st == "failed" || st == "canceled" || st == "rejected"):
			// A task that ended before the subscription: its snapshot is the whole stream.
			final = st
		}
	}
	return ids, final
}

// msg03 and msg10 are a user message with one text part in each dialect.
func msg03(text string, ids ...string) map[string]any {
	m := map[string]any{"kind": "message", "messageId": fmt.Sprintf("m-%d", time.Now().UnixNano()), "role": "user",
		"parts": []any{map[string]any{"kind": "text", "text": text}}}
	if len(ids) > 0 && ids[0] != "" {
		m["taskId"] = ids[0]
	}
	if len(ids) > 1 && ids[1] != "" {
		m["contextId"] = ids[1]
	}
	return m
}

func msg10(text string) map[string]any {
	return map[string]any{"messageId": fmt.Sprintf("m-%d", time.Now().UnixNano()), "role": "ROLE_USER",
		"parts": []any{map[string]any{"text": text}}}
}

// task03 is the part of a 0.3 Task the tests read.
type task03 struct {
	Kind      string `json:"kind"`
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Status    struct {
		State   string          `json:"state"`
		Message json.RawMessage `json:"message"`
	} `json:"status"`
	Artifacts []struct {
		Parts []struct {
			Text string `json:"text"`
		} `json:"parts"`
	} `json:"artifacts"`
	Metadata map[string]json.RawMessage `json:"metadata"`
}

// String shows the task readably in failures.
func (tk task03) String() string {
	return fmt.Sprintf("task %s (%s) %s: status message %s, answer %q", tk.ID, tk.ContextID, tk.Status.State, tk.Status.Message, tk.text())
}

func (tk task03) text() string {
	var b strings.Builder
	for _, a := range tk.Artifacts {
		for _, p := range a.Parts {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func decodeTask(t *testing.T, r rpcReply) task03 {
	t.Helper()
	if r.Error != nil || r.status != 200 {
		t.Fatalf("reply: status %d, error %+v", r.status, r.Error)
	}
	var tk task03
	if err := json.Unmarshal(r.Result, &tk); err != nil {
		t.Fatalf("%v: %s", err, r.Result)
	}
	return tk
}

// bcryptHash hashes a basic_auth password at bcrypt's lowest cost, to keep each request's
// check cheap in tests.
func bcryptHash(t *testing.T, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}
