package runtime_test

// The hostile-guest acceptance of the sandbox: each hostile guest is a real Go guest
// built from source in internal/testkit/testguests/hostile-*, compiled and run through the real
// runtime (murmur.CallTool / RunScript with guestfs, GuestEnv and murmur.Outgoing). Each
// case asserts the classified outcome, the counter it must move (exactly once), that no
// other trap counter moved, and that the next call of the same module on the same
// Engine succeeds.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/runtime"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/guestfs"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
	"github.com/capsulegate/capsulegate/wit/abi"
)

const hostileCapsule = "hostile"

var hostileReasons = []string{wasm.ReasonDeadline, wasm.ReasonMemoryLimit, wasm.ReasonTrap, wasm.ReasonExit, wasm.ReasonABI}

// hostileEngine starts an Engine whose compiled code is cached under the guest build
// cache, so a Go guest is compiled by wazero once, not on every run.
func hostileEngine(t *testing.T) *wasm.Engine {
	t.Helper()
	ctx := context.Background()
	e, err := wasm.NewEngine(ctx, murmur.Install(), wasm.WithMetrics(prometheus.NewRegistry()),
		wasm.WithCacheDir(guestbuild.WazeroCache()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(ctx) })
	return e
}

// hostileGuest builds internal/testkit/testguests/<dir>, compiles it and checks it against its
// world, as staging does.
func hostileGuest(t *testing.T, e *wasm.Engine, dir string, role manifest.Role) *wasm.Module {
	t.Helper()
	world := string(role)
	if role == murmur.RoleCapsule {
		world = murmur.ScriptWorld
	}
	mod, err := murmur.Compile(context.Background(), e, hostileCapsule, dir, role, guestbuild.Wasm(t, "../internal/testkit/testguests/"+dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := murmur.CheckWorld(mod, world); err != nil {
		t.Fatal(err)
	}
	return mod
}

// hostileFS serves dir as the guest's "/".
func hostileFS(t *testing.T, dir string) *guestfs.FS {
	t.Helper()
	gfs, err := guestfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gfs.Close() })
	return gfs
}

type trapCounts map[string]float64

func countTraps(e *wasm.Engine, mod *wasm.Module) trapCounts {
	c := trapCounts{}
	for _, r := range hostileReasons {
		c[r] = testutil.ToFloat64(e.Metrics().Traps.WithLabelValues(mod.Capsule, mod.Artifact, string(mod.Role), r))
	}
	return c
}

// assertTraps checks that, since before, the trap counter of reason went up by exactly
// one and no other reason moved (reason "": none moved).
func assertTraps(t *testing.T, e *wasm.Engine, mod *wasm.Module, before trapCounts, reason string) {
	t.Helper()
	after := countTraps(e, mod)
	for _, r := range hostileReasons {
		want := before[r]
		if r == reason {
			want++
		}
		if after[r] != want {
			t.Errorf("capsule_guest_traps_total{reason=%q} went %v → %v, want %v", r, before[r], after[r], want)
		}
	}
}

// assertGuestError checks err is a *wasm.GuestError of reason with code E-RUN-003
// naming the artifact, and that its message says says.
func assertGuestError(t *testing.T, err error, mod *wasm.Module, reason, says string) {
	t.Helper()
	var ge *wasm.GuestError
	if !errors.As(err, &ge) {
		t.Fatalf("want a *wasm.GuestError (%s), got %v", reason, err)
	}
	if ge.Reason != reason {
		t.Fatalf("reason = %s, want %s: %v", ge.Reason, reason, err)
	}
	if errs.Code(err) != wasm.CodeGuest || ge.Artifact != mod.Artifact || ge.Capsule != hostileCapsule || !strings.Contains(err.Error(), mod.Artifact) {
		t.Errorf("error lacks its code, capsule or artifact: %v", err)
	}
	if !strings.Contains(err.Error(), says) {
		t.Errorf("error does not say %q: %v", says, err)
	}
}

// callOK makes a well-behaved call of mod and fails t unless it passes: the call that
// must succeed after every hostile one.
func callOK(t *testing.T, e *wasm.Engine, mod *wasm.Module, g wasm.Grants, h *murmur.Imports, in abi.ToolInput) abi.ToolResult {
	t.Helper()
	before := testutil.ToFloat64(e.Metrics().Calls.WithLabelValues(mod.Capsule, mod.Artifact, string(mod.Role), "ok"))
	res, err := murmur.CallTool(context.Background(), e, mod, g, h, in)
	if err != nil {
		t.Fatalf("the next call on the same engine failed: %v", err)
	}
	if res.Status != abi.StatusPassed {
		t.Fatalf("the next call on the same engine: status %d, summary %q", res.Status, deref(res.Summary))
	}
	if got := testutil.ToFloat64(e.Metrics().Calls.WithLabelValues(mod.Capsule, mod.Artifact, string(mod.Role), "ok")); got != before+1 {
		t.Errorf("capsule_guest_calls_total{status=ok} went %v → %v", before, got)
	}
	return res
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func some(s string) *string { return &s }

// baseGrants are generous enough for a Go guest under -race; tests narrow them.
func baseGrants(gfs *guestfs.FS) wasm.Grants {
	return wasm.Grants{FS: gfs, MemoryBytes: 256 << 20, Deadline: 30 * time.Second}
}

// TestHostileFilesystem: the guest reads /etc/passwd by absolute path, by ../ traversal
// (both through Go's os package, which cleans the path lexically, and through a raw WASI
// path_open that hands "../" to the host untouched), and through symbolic links planted
// in the workdir that point outside; then it tries to write outside the workdir the same
// ways. Every attempt fails inside the guest (status failed, ENOENT or EPERM) — none is a
// trap — and nothing outside the workdir is read or changed.
func TestHostileFilesystem(t *testing.T) {
	e := hostileEngine(t)
	mod := hostileGuest(t, e, "hostile-fs", manifest.RoleTool)

	root := t.TempDir()
	work := filepath.Join(root, "work")
	outside := filepath.Join(root, "outside")
	const secret = "outside-sentinel-7f3a"
	for _, d := range []string{work, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	// What another process (or an earlier task) could have planted in the workdir.
	for name, target := range map[string]string{
		"link":        outside,                                   // absolute, to a folder outside
		"rel":         "../outside",                              // relative, climbing out
		"passwd":      "/etc/passwd",                             // absolute, to the file itself
		"hostetc":     "/etc",                                    // absolute, to a host folder
		"dangling":    filepath.Join(outside, "planted.txt"),     // absolute, to a file not yet there
		"reldangling": "../outside/planted.txt",                  // relative, to a file not yet there
		"secretlink":  filepath.Join(outside, "secret.txt"),      // absolute, to the secret
		"chain":       "rel",                                     // a link to a link out
		"deep":        "hostetc/../../../../../../../etc/passwd", // through a link, then climbing
	} {
		if err := os.Symlink(target, filepath.Join(work, name)); err != nil {
			t.Fatal(err)
		}
	}
	g := baseGrants(hostileFS(t, work))

	const (
		enoent = "No such file"
		eperm  = "Operation not permitted"
	)
	tests := []struct {
		name, cmd, errSays string
	}{
		// Reads.
		{"passwd by absolute path", "read /etc/passwd", enoent},
		{"passwd by ../ (Go-cleaned)", "read ../../../../../../../../etc/passwd", enoent},
		{"passwd by raw ../", "rawread ../../../../../../../../etc/passwd", eperm},
		{"passwd by raw absolute path", "rawread /etc/passwd", eperm},
		{"secret by raw ../", "rawread ../outside/secret.txt", eperm},
		{"secret by its host path", "read " + filepath.Join(outside, "secret.txt"), enoent},
		{"passwd via planted symlink to it", "read /passwd", eperm},
		{"passwd via planted symlink to /etc", "read /hostetc/passwd", eperm},
		{"passwd via raw planted symlink", "rawread passwd", eperm},
		{"passwd via link then ../", "read /deep", eperm},
		{"secret via absolute dir link", "read /link/secret.txt", eperm},
		{"secret via relative dir link", "read /rel/secret.txt", eperm},
		{"secret via file link", "read secretlink", eperm},
		{"secret via link chain", "read /chain/secret.txt", eperm},
		// Writes.
		{"write ../ (Go-cleaned)", "write ../outside/new.txt", enoent},
		{"write raw ../", "rawwrite ../outside/new.txt", eperm},
		{"write raw ../ beside the workdir", "rawwrite ../escape.txt", eperm},
		{"write via absolute dir link", "write /link/new.txt", eperm},
		{"write via relative dir link", "write /rel/new.txt", eperm},
		{"write via raw dir link", "rawwrite link/new.txt", eperm},
		{"write via dangling absolute link", "write /dangling", eperm},
		{"write via dangling relative link", "rawwrite reldangling", eperm},
		{"overwrite secret via file link", "write /secretlink", eperm},
		{"overwrite /etc/passwd via link", "write /passwd", eperm},
		{"write by host path", "write " + filepath.Join(outside, "new.txt"), enoent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := countTraps(e, mod)
			res, err := murmur.CallTool(context.Background(), e, mod, g, nil, abi.ToolInput{Data: some(tt.cmd)})
			if err != nil {
				t.Fatalf("the call failed instead of the guest's file operation: %v", err)
			}
			if res.Status != abi.StatusFailed {
				t.Fatalf("%s succeeded: status %d, data %q", tt.cmd, res.Status, deref(res.Data))
			}
			if got := deref(res.Summary); !strings.Contains(got, tt.errSays) {
				t.Errorf("guest saw %q, want an error saying %q", got, tt.errSays)
			}
			if d := deref(res.Data) + deref(res.Summary); strings.Contains(d, secret) || strings.Contains(d, "root:") {
				t.Errorf("outside content reached the guest: %q", d)
			}
			assertTraps(t, e, mod, before, "")
			callOK(t, e, mod, g, nil, abi.ToolInput{Data: some("ok")})
		})
	}

	// An absolute host path is only a name inside the workdir: creating it lands there.
	t.Run("host path recreated inside", func(t *testing.T) {
		hostPath := filepath.Join(outside, "abs.txt")
		callOK(t, e, mod, g, nil, abi.ToolInput{Data: some("mkwrite " + hostPath)})
		if _, err := os.Stat(filepath.Join(work, hostPath)); err != nil {
			t.Errorf("the guest's %s is not inside the workdir: %v", hostPath, err)
		}
	})

	// Nothing outside the workdir changed.
	if ents, _ := os.ReadDir(root); len(ents) != 2 {
		t.Errorf("the folder holding the workdir changed: %v", ents)
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 || ents[0].Name() != "secret.txt" {
		t.Errorf("files appeared outside the workdir: %v", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != secret {
		t.Errorf("secret.txt outside the workdir changed: %q", b)
	}
}

// TestHostileEnvironment: the guest lists its whole environment (and tries
// /proc/self/environ). Host sentinels SECRET_API_KEY and GITHUB_TOKEN, set both in the
// host process (t.Setenv) and in the lookup GuestEnv reads, are never visible, even when
// a manifest that got past validation lists them; the guest sees exactly GuestEnv's
// result. Listing them in env.allow is refused at parse with E-CAP-001.
func TestHostileEnvironment(t *testing.T) {
	const (
		apiKey = "sk-sentinel-SECRET_API_KEY-41c9"
		token  = "ghp_sentinel-GITHUB_TOKEN-93be"
	)
	t.Setenv("SECRET_API_KEY", apiKey)
	t.Setenv("GITHUB_TOKEN", token)
	t.Setenv("HOSTILE_TZ", "UTC")
	t.Setenv("HOSTILE_UNLISTED", "unlisted")

	for _, name := range []string{"SECRET_API_KEY", "GITHUB_TOKEN"} {
		t.Run("env.allow "+name+" refused", func(t *testing.T) {
			_, err := manifest.Parse([]byte("name: hostile\nversion: 1.0.0\ncapabilities:\n  env:\n    allow: [HOSTILE_TZ, "+name+"]\n"), "murmur.yaml")
			if e := errs.Find(err, manifest.CodeCredentialEnv); e == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("want %s naming %s, got %v", manifest.CodeCredentialEnv, name, err)
			}
		})
	}

	m, err := manifest.Parse([]byte("name: hostile\nversion: 1.0.0\ncapabilities:\n  env:\n    allow: [HOSTILE_TZ]\n"), "murmur.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Defence in depth: as if validation had been bypassed.
	m.Capabilities.Env.Allow = append(m.Capabilities.Env.Allow, "SECRET_API_KEY", "GITHUB_TOKEN")
	lookups := map[string]func(string) (string, bool){
		"host process env": os.LookupEnv,
		"lookup func": func(k string) (string, bool) {
			switch k {
			case "SECRET_API_KEY":
				return apiKey, true
			case "GITHUB_TOKEN":
				return token, true
			case "HOSTILE_TZ":
				return "UTC", true
			}
			return "", false
		},
	}
	e := hostileEngine(t)
	mod := hostileGuest(t, e, "hostile-env", manifest.RoleTool)
	g := baseGrants(hostileFS(t, t.TempDir()))
	for name, lookup := range lookups {
		t.Run(name, func(t *testing.T) {
			env := runtime.GuestEnv(m, lookup, runtime.RuntimeEnv(m, "ses_hostile", "http://gw/agents/hostile/"))
			g := g
			g.Env = env
			before := countTraps(e, mod)
			res := callOK(t, e, mod, g, nil, abi.ToolInput{})
			seen := deref(res.Data) + "\n" + deref(res.Summary)
			for _, s := range []string{apiKey, token, "SECRET_API_KEY", "GITHUB_TOKEN", "HOSTILE_UNLISTED", "PATH="} {
				if strings.Contains(seen, s) {
					t.Errorf("the guest saw %q in its environment:\n%s", s, seen)
				}
			}
			// And the Go runtime's pacing, which the engine adds (three quarters of 256 MiB).
			want := append(slices.Clip(env), "GOGC=off", "GOMEMLIMIT=201326592")
			if got := strings.Split(deref(res.Data), "\n"); !slices.Equal(got, want) {
				t.Errorf("guest environment = %q\nwant exactly      %q", got, want)
			}
			if !slices.Contains(env, "HOSTILE_TZ=UTC") || !slices.Contains(env, "MURMUR_CAPSULE_NAME=hostile") {
				t.Errorf("GuestEnv dropped an allowed or runtime variable: %q", env)
			}
			if deref(res.Summary) != "no /proc" {
				t.Errorf("guest: %s", deref(res.Summary))
			}
			assertTraps(t, e, mod, before, "")
		})
	}
}

type hostileResolver map[string][]netip.Addr

func (r hostileResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

// TestHostileNetwork: the guest sends requests through capsulegate:http/outgoing to a
// host not allowed, to loopback and cloud-metadata addresses in every spelling, to an
// allowed name that resolves to loopback, and to an allowed host that redirects to a
// disallowed one. Each refusal is an err string the guest sees (status failed, not a
// trap), counted once in capsule_network_denied_total{source="guest"}; the forbidden
// server is never reached; the redirect is not followed (the guest sees the 302).
func TestHostileNetwork(t *testing.T) {
	var forbiddenHits atomic.Int64
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forbiddenHits.Add(1)
		w.Write([]byte("forbidden server reached"))
	}))
	defer forbidden.Close()
	fu, _ := url.Parse(forbidden.URL)
	fport := fu.Port()

	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, forbidden.URL+"/after-redirect", http.StatusFound)
		case "/redirect-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusTemporaryRedirect)
		default:
			w.Write([]byte("allowed server"))
		}
	}))
	defer allowed.Close()
	au, _ := url.Parse(allowed.URL)

	rules, err := netpolicy.ParseRules([]string{"127.0.0.1:" + au.Port(), "api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	e := hostileEngine(t)
	mod := hostileGuest(t, e, "hostile-net", manifest.RoleTool)
	httpHost := &murmur.Outgoing{Capsule: hostileCapsule, Rules: rules, Metrics: e.Metrics(),
		Resolver: hostileResolver{
			"api.example.com":  {netip.MustParseAddr("127.0.0.1")}, // allowed name, rebinding to loopback
			"evil.example.com": {netip.MustParseAddr("127.0.0.1")}, // not allowed, would reach the forbidden server
		}}
	httpHost.Init()
	host := &murmur.Imports{HTTP: httpHost, Who: "hostile-net"}
	g := baseGrants(hostileFS(t, t.TempDir()))
	denied := func() float64 { return testutil.ToFloat64(e.Metrics().Denied.WithLabelValues(hostileCapsule, "guest")) }

	tests := []struct {
		name, url, errSays string // errSays "" = a response is expected
		status             string
		location           string
	}{
		{"host not allowed", "http://evil.example.com:" + fport + "/", "network policy: evil.example.com:" + fport + " not in capabilities.network.allow", "", ""},
		{"127.0.0.1 other port", "http://127.0.0.1:" + fport + "/", "network policy: 127.0.0.1:" + fport + " not in capabilities.network.allow", "", ""},
		{"169.254.169.254", "http://169.254.169.254/latest/meta-data/", "network policy: 169.254.169.254:80 not in capabilities.network.allow", "", ""},
		{"[::ffff:127.0.0.1]", "http://[::ffff:127.0.0.1]:" + fport + "/", "network policy: 127.0.0.1:" + fport + " not in", "", ""},
		{"0x7f000001", "http://0x7f000001:" + fport + "/", "network policy: 127.0.0.1:" + fport + " not in", "", ""},
		{"2130706433", "http://2130706433:" + fport + "/", "network policy: 127.0.0.1:" + fport + " not in", "", ""},
		{"allowed name resolving to 127.0.0.1", "http://api.example.com:" + fport + "/", "127.0.0.1", "", ""},
		{"redirect to a disallowed port", allowed.URL + "/redirect", "", "302", forbidden.URL + "/after-redirect"},
		{"redirect to metadata", allowed.URL + "/redirect-metadata", "", "307", "http://169.254.169.254/latest/meta-data/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, beforeTraps := denied(), countTraps(e, mod)
			res, err := murmur.CallTool(context.Background(), e, mod, g, host, abi.ToolInput{Data: some(tt.url)})
			if err != nil {
				t.Fatalf("the call failed instead of the request: %v", err)
			}
			if tt.errSays != "" {
				if res.Status != abi.StatusFailed || !strings.Contains(deref(res.Summary), tt.errSays) {
					t.Fatalf("guest got status %d summary %q data %q, want a refusal saying %q", res.Status, deref(res.Summary), deref(res.Data), tt.errSays)
				}
				if got := denied(); got != before+1 {
					t.Errorf("capsule_network_denied_total{source=guest} went %v → %v, want +1", before, got)
				}
			} else {
				md := map[string]string{}
				for _, kv := range res.Metadata {
					md[kv[0]] = kv[1]
				}
				if res.Status != abi.StatusPassed || md["status"] != tt.status || md["location"] != tt.location {
					t.Fatalf("guest got status %d summary %q metadata %v, want the %s itself to %s", res.Status, deref(res.Summary), md, tt.status, tt.location)
				}
				if got := denied(); got != before {
					t.Errorf("capsule_network_denied_total{source=guest} went %v → %v for an unfollowed redirect", before, got)
				}
			}
			if n := forbiddenHits.Load(); n != 0 {
				t.Fatalf("the forbidden server was reached %d times", n)
			}
			assertTraps(t, e, mod, beforeTraps, "")
			res = callOK(t, e, mod, g, host, abi.ToolInput{Data: some(allowed.URL + "/")})
			if deref(res.Data) != "allowed server" {
				t.Errorf("the next call got %q", deref(res.Data))
			}
		})
	}
}

// TestHostileEndlessLoop: a guest spinning without ever calling the host is stopped at
// its deadline (within deadline + 1 s), classified deadline and counted once.
func TestHostileEndlessLoop(t *testing.T) {
	e := hostileEngine(t)
	mod := hostileGuest(t, e, "hostile-spin", manifest.RoleTool)
	g := baseGrants(hostileFS(t, t.TempDir()))
	callOK(t, e, mod, g, nil, abi.ToolInput{Data: some("warm up")}) // so the deadline covers the loop, not the first load
	const deadline = 500 * time.Millisecond
	spin := g
	spin.Deadline = deadline
	before := countTraps(e, mod)
	start := time.Now()
	_, err := murmur.CallTool(context.Background(), e, mod, spin, nil, abi.ToolInput{Data: some("spin")})
	elapsed := time.Since(start)
	assertGuestError(t, err, mod, wasm.ReasonDeadline, "deadline")
	if elapsed > deadline+time.Second {
		t.Errorf("stopped after %v, over deadline + 1s", elapsed)
	}
	t.Logf("stopped after %v (deadline %v)", elapsed, deadline)
	assertTraps(t, e, mod, before, wasm.ReasonDeadline)
	callOK(t, e, mod, spin, nil, abi.ToolInput{Data: some("ok")})
}

// TestHostileMemoryGrowth: a guest allocating without bound is refused memory past
// limits.memory_bytes (64 MiB), classified memory_limit, counted once; the next call
// with the same limit succeeds.
func TestHostileMemoryGrowth(t *testing.T) {
	e := hostileEngine(t)
	mod := hostileGuest(t, e, "hostile-grow", manifest.RoleTool)
	g := baseGrants(hostileFS(t, t.TempDir()))
	g.MemoryBytes = 64 << 20
	var stderr strings.Builder
	grow := g
	grow.Stderr = &stderr
	before := countTraps(e, mod)
	start := time.Now()
	_, err := murmur.CallTool(context.Background(), e, mod, grow, nil, abi.ToolInput{Data: some("grow")})
	assertGuestError(t, err, mod, wasm.ReasonMemoryLimit, "memory_limit")
	t.Logf("refused after %v; guest stderr starts %.80q", time.Since(start), stderr.String())
	assertTraps(t, e, mod, before, wasm.ReasonMemoryLimit)
	callOK(t, e, mod, g, nil, abi.ToolInput{Data: some("ok")})
}

// TestHostileABI: a guest whose murmur:tool/run and cabi_realloc are written by hand to
// break the canonical ABI, both in what it returns to the host and in how it calls a host
// import (capsulegate:http/outgoing#send, with no HTTP grant: the arguments are lifted
// and the refusal lowered before any policy matters). Every abuse fails the call with reason abi (an error matching
// abi.ErrABI that says what was wrong), counted once; the gateway neither crashes nor
// hangs, and the next well-formed call of the same module succeeds.
func TestHostileABI(t *testing.T) {
	e := hostileEngine(t)
	mod := hostileGuest(t, e, "hostile-abi", manifest.RoleTool)
	g := baseGrants(hostileFS(t, t.TempDir()))
	tests := []struct {
		mode string
		in   abi.ToolInput
		says string
	}{
		{"ret-oob", abi.ToolInput{}, "past memory size"},
		{"str-len-4g", abi.ToolInput{}, "length 4294967295 over the limit"},
		{"str-ptr-oob", abi.ToolInput{}, "past memory size"},
		{"utf8", abi.ToolInput{}, "invalid UTF-8"},
		{"enum", abi.ToolInput{}, "discriminant 7 out of range"},
		{"option", abi.ToolInput{}, "discriminant 5 out of range"},
		{"list-len", abi.ToolInput{}, "over the limit"},
		// The host lowers a non-empty tool-input string through cabi_realloc.
		{"realloc-zero", abi.ToolInput{Data: some("input")}, "returned 0"},
		{"realloc-oob", abi.ToolInput{Data: some("input")}, "returned ptr 0xfffffff0 past memory size"},
		// The guest calls the host import capsulegate:http/outgoing#send badly.
		{"import-ret-oob", abi.ToolInput{}, "at ptr 0xfffffff0"},
		{"import-str-len-4g", abi.ToolInput{}, "length 4294967295 over the limit"},
		{"import-utf8", abi.ToolInput{}, "invalid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			bad := g
			bad.Env = []string{"HOSTILE_ABI=" + tt.mode}
			before := countTraps(e, mod)
			res, err := murmur.CallTool(context.Background(), e, mod, bad, nil, tt.in)
			assertGuestError(t, err, mod, wasm.ReasonABI, tt.says)
			t.Logf("%.300s", err)
			if !errors.Is(err, abi.ErrABI) {
				t.Errorf("not an abi.ErrABI: %v", err)
			}
			if res.Status != 0 || res.Summary != nil || res.Data != nil {
				t.Errorf("a partial result escaped: %+v", res)
			}
			assertTraps(t, e, mod, before, wasm.ReasonABI)
			ok := callOK(t, e, mod, g, nil, abi.ToolInput{Data: some("well-formed")})
			if deref(ok.Summary) != "ok" || deref(ok.Data) != "well-formed" {
				t.Errorf("the next call: summary %q data %q", deref(ok.Summary), deref(ok.Data))
			}
		})
	}
}

// TestHostileInvoke: invoke abuse by a script capsule.
//
// murmur:tool-registry/invoke is synchronous, so a guest alone cannot nest invokes: a
// Go recursion 1,000 frames deep that invokes at every frame is 1,000 invokes one after
// another ("descend"), which must all succeed in one call without trapping or leaking.
// Invokes only nest when the host's Invoke callback re-enters a guest — here it runs
// the same capsule again for the tool "self", which means to recurse 1,000 deep
// ("recurse"). The runtime caps that nesting at murmur.MaxInvokeDepth (8): the Invoke
// callback runs 8 times, the capsule runs 9 times (levels 0–8), and the invoke at level
// 8 returns an err string the guest sees and records — not a trap. No trap is counted,
// and the gateway stays healthy for the next call.
func TestHostileInvoke(t *testing.T) {
	e := hostileEngine(t)
	mod := hostileGuest(t, e, "hostile-invoke", murmur.RoleCapsule)
	ctx := context.Background()
	okCalls := func() float64 {
		return testutil.ToFloat64(e.Metrics().Calls.WithLabelValues(hostileCapsule, mod.Artifact, string(murmur.RoleCapsule), "ok"))
	}

	t.Run("descend 1000 frames, invoking at each", func(t *testing.T) {
		work := t.TempDir()
		g := baseGrants(hostileFS(t, work))
		g.Env = []string{"HOSTILE_INVOKE=descend"}
		var invokes atomic.Int64
		host := &murmur.Imports{Invoke: func(_ context.Context, name string, in abi.ToolInput) (abi.ToolResult, error) {
			invokes.Add(1)
			if name != "echo" {
				return abi.ToolResult{}, fmt.Errorf("no tool %q", name)
			}
			return abi.ToolResult{Status: abi.StatusPassed, Data: in.Data}, nil
		}}
		before := countTraps(e, mod)
		if err := murmur.RunScript(ctx, e, mod, g, host); err != nil {
			t.Fatal(err)
		}
		if n := invokes.Load(); n != 1000 {
			t.Errorf("host saw %d invokes, want 1000", n)
		}
		if b, _ := os.ReadFile(filepath.Join(work, "out", "result.txt")); string(b) != "descended 1000" {
			t.Errorf("result.txt = %q", b)
		}
		assertTraps(t, e, mod, before, "")
	})

	t.Run("host re-enters: nesting capped at MaxInvokeDepth", func(t *testing.T) {
		work := t.TempDir()
		gfs := hostileFS(t, work)
		grants := func(depth string) wasm.Grants {
			g := baseGrants(gfs)
			g.Env = []string{"HOSTILE_INVOKE=recurse", "HOSTILE_DEPTH=" + depth}
			return g
		}
		var entries atomic.Int64
		host := &murmur.Imports{}
		host.Invoke = func(ctx context.Context, name string, in abi.ToolInput) (abi.ToolResult, error) {
			entries.Add(1)
			if name != "self" || in.Data == nil {
				return abi.ToolResult{}, fmt.Errorf("no tool %q", name)
			}
			if _, err := strconv.Atoi(*in.Data); err != nil {
				return abi.ToolResult{}, err
			}
			// Re-enter with the context the invoke gave us: it carries the nesting depth.
			if err := murmur.RunScript(ctx, e, mod, grants(*in.Data), host); err != nil {
				return abi.ToolResult{}, err
			}
			return abi.ToolResult{Status: abi.StatusPassed}, nil
		}
		before, beforeOK := countTraps(e, mod), okCalls()
		if err := murmur.RunScript(ctx, e, mod, grants("0"), host); err != nil {
			t.Fatal(err)
		}
		if n := entries.Load(); n != murmur.MaxInvokeDepth {
			t.Errorf("the Invoke callback ran %d times, want %d", n, murmur.MaxInvokeDepth)
		}
		b, _ := os.ReadFile(filepath.Join(work, "out", "levels.txt"))
		var want []string
		for i := 0; i <= murmur.MaxInvokeDepth; i++ {
			want = append(want, "enter "+strconv.Itoa(i))
		}
		want = append(want, fmt.Sprintf("%d: err: tool-registry: invoke nested more than %d deep", murmur.MaxInvokeDepth, murmur.MaxInvokeDepth))
		if got := strings.Split(strings.TrimSpace(string(b)), "\n"); !slices.Equal(got, want) {
			t.Errorf("levels.txt:\n%s\nwant:\n%s", b, strings.Join(want, "\n"))
		}
		assertTraps(t, e, mod, before, "")
		if got := okCalls(); got != beforeOK+murmur.MaxInvokeDepth+1 {
			t.Errorf("capsule_guest_calls_total{status=ok} went %v → %v, want +%d", beforeOK, got, murmur.MaxInvokeDepth+1)
		}
	})

	t.Run("next call succeeds", func(t *testing.T) {
		g := baseGrants(hostileFS(t, t.TempDir()))
		before := okCalls()
		if err := murmur.RunScript(ctx, e, mod, g, &murmur.Imports{}); err != nil {
			t.Fatal(err)
		}
		if got := okCalls(); got != before+1 {
			t.Errorf("capsule_guest_calls_total{status=ok} went %v → %v", before, got)
		}
	})
}

// TestHostileSleep: a guest that sleeps in one WASI poll_oneoff (Go's time.Sleep) must be
// stopped at its deadline like a spinning one (the engine's nanosleep watches the call's
// context; wazero's default sleep would hold the call for the whole sleep).
func TestHostileSleep(t *testing.T) {
	e := hostileEngine(t)
	mod := hostileGuest(t, e, "hostile-spin", manifest.RoleTool)
	g := baseGrants(hostileFS(t, t.TempDir()))
	callOK(t, e, mod, g, nil, abi.ToolInput{Data: some("warm up")})
	const deadline = 500 * time.Millisecond
	g.Deadline = deadline
	before := countTraps(e, mod)
	start := time.Now()
	_, err := murmur.CallTool(context.Background(), e, mod, g, nil, abi.ToolInput{Data: some("sleep 5")})
	elapsed := time.Since(start)
	assertGuestError(t, err, mod, wasm.ReasonDeadline, "deadline")
	if elapsed > deadline+time.Second {
		t.Errorf("a guest sleeping 5 s under a %v deadline held the call for %v", deadline, elapsed)
	}
	assertTraps(t, e, mod, before, wasm.ReasonDeadline)
	callOK(t, e, mod, g, nil, abi.ToolInput{Data: some("ok")})
}
