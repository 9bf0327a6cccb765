package escape

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
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/runtime"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/guestfs"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// Guest rows run the hostile Go guests of internal/testkit/testguests through the real Engine,
// as a core module (wasm-core) and as a component made by jco's preview1 adapter
// (wasm-component): hostile-fs (files), hostile-env, hostile-net, hostile-spin (loops,
// sleeps, exits, panics), hostile-grow, hostile-abi and hostile-invoke.

func wasmCoreRows() []row {
	rows := guestFSRows(WasmCore, "WC", false, []fsCase{
		{"passwd by absolute path", "read /etc/passwd", "guest ENOENT"},
		{"passwd by ../ (Go-cleaned)", "read ../../../../../../../../etc/passwd", "guest ENOENT"},
		{"passwd by raw ../ to path_open", "rawread ../../../../../../../../etc/passwd", "guest EPERM"},
		{"passwd by raw absolute path", "rawread /etc/passwd", "guest EPERM"},
		{"secret by raw ../", "rawread ../outside/secret.txt", "guest EPERM"},
		{"secret by its host path", "read {outside}/secret.txt", "guest ENOENT"},
		{"passwd via a planted symlink to it", "read /passwd", "guest EPERM"},
		{"passwd via a planted symlink to /etc", "read /hostetc/passwd", "guest EPERM"},
		{"passwd via a planted link, then ../", "read /deep", "guest EPERM"},
		{"secret via an absolute folder link", "read /link/secret.txt", "guest EPERM"},
		{"secret via a relative folder link", "read /rel/secret.txt", "guest EPERM"},
		{"secret via a file link", "read /secretlink", "guest EPERM"},
		{"secret via a link to a link", "read /chain/secret.txt", "guest EPERM"},
		{"list the outside folder via a link", "ls /link", "guest EPERM"},
		{"list /etc via a planted link", "ls /hostetc", "guest EPERM"},
		{"write by ../ (Go-cleaned)", "write ../outside/new.txt", "guest ENOENT"},
		{"write by raw ../", "rawwrite ../outside/new.txt", "guest EPERM"},
		{"write beside the workdir by raw ../", "rawwrite ../escape.txt", "guest EPERM"},
		{"write via an absolute folder link", "write /link/new.txt", "guest EPERM"},
		{"write via a relative folder link", "write /rel/new.txt", "guest EPERM"},
		{"create the target of a dangling link", "write /dangling", "guest EPERM"},
		{"overwrite the secret via its link", "write /secretlink", "guest EPERM"},
		{"overwrite /etc/passwd via its link", "write /passwd", "guest EPERM"},
		{"move a planted link to the outside folder's host path", "rename /secretlink {outside}/moved", "guest ENOENT"},
	})
	rows = append(rows, guestFSRowsOf("hostile-link", WasmCore, "WL", false, []fsCase{
		{"plant an absolute symlink out and read it", "symlink {outside}/secret.txt /mine-abs", "guest EPERM"},
		{"plant a relative symlink out and read it", "symlink ../outside/secret.txt /mine-rel", "guest EPERM"},
		{"plant a symlink to /etc/shadow and read it", "symlink /etc/shadow /mine-shadow", "guest EPERM"},
		{"hard-link the secret by its host path", "link {outside}/secret.txt /hard-host", "guest ENOENT"},
		{"hard-link the planted link to the secret", "link /secretlink /hard-link", "guest EPERM"},
	})...)
	rows = append(rows,
		row{id: "WC-30", surface: WasmCore, attack: "spin forever without calling the host", want: "E-RUN-003 deadline",
			run: trapAttack("hostile-spin", false, "spin", nil, 300*time.Millisecond, 0)},
		row{id: "WC-31", surface: WasmCore, attack: "sleep 5 s in one poll_oneoff past a 300 ms deadline", want: "E-RUN-003 deadline",
			run: trapAttack("hostile-spin", false, "sleep 5", nil, 300*time.Millisecond, 0)},
		row{id: "WC-32", surface: WasmCore, attack: "allocate without bound past a 64 MiB limit", want: "E-RUN-003 memory_limit",
			run: trapAttack("hostile-grow", false, "grow", nil, 0, 64<<20)},
		row{id: "WC-33", surface: WasmCore, attack: "proc_exit(3) in the middle of a call", want: "E-RUN-003 exit",
			run: trapAttack("hostile-spin", false, "exit 3", nil, 0, 0)},
		row{id: "WC-34", surface: WasmCore, attack: "panic (nil map write) in the middle of a call", want: "status error",
			run: trapAttack("hostile-spin", false, "panic", nil, 0, 0)},
	)
	for i, mode := range []struct{ mode, input string }{
		{"ret-oob", ""}, {"str-len-4g", ""}, {"str-ptr-oob", ""}, {"utf8", ""}, {"enum", ""}, {"option", ""}, {"list-len", ""},
		{"realloc-zero", "input"}, {"realloc-oob", "input"}, {"import-ret-oob", ""}, {"import-str-len-4g", ""}, {"import-utf8", ""},
	} {
		rows = append(rows, row{id: fmt.Sprintf("WC-%d", 40+i), surface: WasmCore,
			attack: "break the canonical ABI: " + mode.mode, want: "E-RUN-003 abi",
			run: trapAttack("hostile-abi", false, mode.input, []string{"HOSTILE_ABI=" + mode.mode}, 0, 0)})
	}
	rows = append(rows,
		row{id: "WC-60", surface: WasmCore, attack: "read host credentials from the environment (SECRET_API_KEY set on the host)", want: "env exactly GuestEnv",
			run: envAttack(false, "env")},
		row{id: "WC-61", surface: WasmCore, attack: "read the process environment through /proc/self/environ", want: "guest no /proc",
			run: envAttack(false, "proc")},
		row{id: "WC-62", surface: WasmCore, attack: "a manifest granting itself SECRET_API_KEY in env.allow", want: manifest.CodeCredentialEnv, check: true,
			run: func(t *testing.T, s *suite) outcome {
				_, err := manifest.Parse([]byte("name: hostile\nversion: 1.0.0\ncapabilities:\n  env:\n    allow: [TZ, SECRET_API_KEY]\n"), "murmur.yaml")
				if e := errs.Find(err, manifest.CodeCredentialEnv); e != nil {
					return blocked(e.Code)
				}
				return outcome{class: fmt.Sprint(errs.Codes(err)), escaped: "the manifest was accepted: " + fmt.Sprint(err)}
			}},
	)
	for i, c := range []struct{ attack, url, want string }{
		{"a host not in network.allow", "http://evil.example.com:{forbiddenport}/", "denied guest"},
		{"loopback on a port not allowed", "http://127.0.0.1:{forbiddenport}/", "denied guest"},
		{"the cloud metadata address", "http://169.254.169.254/latest/meta-data/", "denied guest"},
		{"loopback as an IPv4-mapped IPv6 literal", "http://[::ffff:127.0.0.1]:{forbiddenport}/", "denied guest"},
		{"loopback in hex", "http://0x7f000001:{forbiddenport}/", "denied guest"},
		{"loopback as one decimal number", "http://2130706433:{forbiddenport}/", "denied guest"},
		{"an allowed name resolving to loopback (rebinding)", "http://api.example.com:{forbiddenport}/", "denied guest"},
		{"an allowed host redirecting to a forbidden one", "http://{allowed}/redirect", "response 302 not followed"},
		{"an allowed host redirecting to the metadata address", "http://{allowed}/redirect-metadata", "response 307 not followed"},
	} {
		rows = append(rows, row{id: fmt.Sprintf("WC-%d", 70+i), surface: WasmCore, attack: "capsulegate:http/outgoing to " + c.attack,
			want: c.want, run: netAttack(c.url)})
	}
	rows = append(rows, row{id: "WC-80", surface: WasmCore, attack: "nest tool-registry invokes 1,000 deep through a re-entering host",
		want: fmt.Sprintf("invoke refused at depth %d", murmur.MaxInvokeDepth), run: invokeAttack})
	return rows
}

func wasmComponentRows() []row {
	rows := guestFSRows(WasmComponent, "WP", true, []fsCase{
		{"passwd by absolute path", "read /etc/passwd", "guest ENOENT"},
		{"passwd by raw ../ to the adapter", "rawread ../../../../../../../../etc/passwd", "guest EPERM"},
		{"secret by raw ../", "rawread ../outside/secret.txt", "guest EPERM"},
		{"passwd via a planted symlink to /etc", "read /hostetc/passwd", "guest EPERM"},
		{"passwd via a planted link, then ../", "read /deep", "guest EPERM"},
		{"secret via an absolute folder link", "read /link/secret.txt", "guest EPERM"},
		{"secret via a relative folder link", "read /rel/secret.txt", "guest EPERM"},
		{"secret via a file link", "read /secretlink", "guest EPERM"},
		{"list the outside folder via a link", "ls /link", "guest EPERM"},
		{"write beside the workdir by raw ../", "rawwrite ../escape.txt", "guest EPERM"},
		{"write via an absolute folder link", "write /link/new.txt", "guest EPERM"},
		{"create the target of a dangling link", "write /dangling", "guest EPERM"},
		{"move a planted link to the outside folder's host path", "rename /secretlink {outside}/moved", "guest ENOENT"},
	})
	return append(rows,
		row{id: "WP-30", surface: WasmComponent, attack: "spin forever without calling the host", want: "E-RUN-003 deadline",
			run: trapAttack("hostile-spin", true, "spin", nil, 300*time.Millisecond, 0)},
		row{id: "WP-31", surface: WasmComponent, attack: "sleep 5 s past a 300 ms deadline", want: "E-RUN-003 deadline",
			run: trapAttack("hostile-spin", true, "sleep 5", nil, 300*time.Millisecond, 0)},
		row{id: "WP-32", surface: WasmComponent, attack: "allocate without bound past a 64 MiB limit", want: "E-RUN-003 memory_limit",
			run: trapAttack("hostile-grow", true, "grow", nil, 0, 64<<20)},
		row{id: "WP-33", surface: WasmComponent, attack: "proc_exit(3) through the adapter's wasi:cli/exit", want: "E-RUN-003 exit",
			run: trapAttack("hostile-spin", true, "exit 3", nil, 0, 0)},
		row{id: "WP-34", surface: WasmComponent, attack: "panic in the middle of a call", want: "status error",
			run: trapAttack("hostile-spin", true, "panic", nil, 0, 0)},
		row{id: "WP-35", surface: WasmComponent, attack: "a component importing wasi:filesystem symlink-at and link-at, to plant links out", want: "E-COMP-010",
			run: func(t *testing.T, s *suite) outcome {
				e := s.wasmEngine(t)
				core := guestbuild.Wasm(t, "../testguests/hostile-link")
				bin := watbuild.Component(t, core, watbuild.RunOnlyWIT(t, "../../../wit/murmur-tool-0.1.0.wit", "tool-component"), "tool-component")
				_, err := murmur.Compile(context.Background(), e, capsuleName, "hostile-link-component", manifest.RoleTool, bin)
				if err == nil {
					return outcome{class: "compiled", escaped: "a component planting links compiled"}
				}
				if !strings.Contains(err.Error(), "symlink-at") {
					t.Errorf("the refusal does not name symlink-at: %v", err)
				}
				return blocked(errs.Code(err))
			}},
		row{id: "WP-40", surface: WasmComponent, attack: "read host credentials from wasi:cli/environment", want: "env exactly GuestEnv",
			run: envAttack(true, "env")},
		row{id: "WP-41", surface: WasmComponent, attack: "read /proc/self/environ", want: "guest no /proc",
			run: envAttack(true, "proc")},
	)
}

// fsCase is one hostile-fs command: "<op> <path>", {outside} standing for the outside
// folder's host path.
type fsCase struct{ attack, cmd, want string }

func guestFSRows(sf Surface, prefix string, component bool, cases []fsCase) []row {
	return guestFSRowsOf("hostile-fs", sf, prefix, component, cases)
}

// guestFSRowsOf makes a row of each case, run by the guest dir.
func guestFSRowsOf(dir string, sf Surface, prefix string, component bool, cases []fsCase) []row {
	var rows []row
	for i, c := range cases {
		rows = append(rows, row{id: fmt.Sprintf("%s-%02d", prefix, i+1), surface: sf, attack: c.attack + ": " + c.cmd, want: c.want,
			run: func(t *testing.T, s *suite) outcome {
				f := s.hostFiles(t)
				mod := s.module(t, dir, manifest.RoleTool, component)
				g := wasm.Grants{FS: s.workFS(t), MemoryBytes: 256 << 20, Deadline: 30 * time.Second}
				cmd := strings.ReplaceAll(c.cmd, "{outside}", f.outside)
				res, err := murmur.CallTool(context.Background(), s.engine, mod, g, nil, abi.ToolInput{Data: some(cmd)})
				return outcome{class: classifyCall(res, err), escaped: join(leaked(deref(res.Data)+deref(res.Summary)), f.escaped())}
			}})
	}
	return rows
}

// workFS is the shared workdir as every guest's "/".
func (s *suite) workFS(t *testing.T) *guestfs.FS {
	if s.gfs == nil {
		s.gfs = s.guestFS(t, s.hostFiles(t).work)
	}
	return s.gfs
}

// trapAttack calls guest dir with input and env under a deadline and memory limit (0:
// generous ones) and classifies the failure. The attack also fails when it held the
// call past its deadline by more than a second, moved a trap counter other than its
// reason's, or left the module unable to answer the next well-formed call.
func trapAttack(dir string, component bool, input string, env []string, deadline time.Duration, memory int64) func(*testing.T, *suite) outcome {
	return trapAttackOn(func(t *testing.T, s *suite) *wasm.Module { return s.module(t, dir, manifest.RoleTool, component) },
		dir == "hostile-abi", input, env, deadline, memory)
}

// trapAttackOn is trapAttack on the tool module of. A module that may fail its warm-up
// call (hostile-abi answers nothing well-formed) says so with warmFails.
func trapAttackOn(of func(*testing.T, *suite) *wasm.Module, warmFails bool, input string, env []string, deadline time.Duration, memory int64) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		mod := of(t, s)
		e := s.engine
		g := wasm.Grants{FS: s.guestFS(t, t.TempDir()), MemoryBytes: 256 << 20, Deadline: 30 * time.Second}
		ok := g
		if deadline > 0 {
			// Warm up first, so the deadline covers the attack, not the first load.
			if _, err := murmur.CallTool(context.Background(), e, mod, g, nil, abi.ToolInput{Data: some("ok")}); err != nil && !warmFails {
				t.Fatalf("warm-up call: %v", err)
			}
			g.Deadline = deadline
		}
		if memory > 0 {
			g.MemoryBytes = memory
		}
		g.Env = env
		before := trapCounts(e, mod)
		start := time.Now()
		res, err := murmur.CallTool(context.Background(), e, mod, g, nil, abi.ToolInput{Data: some(input)})
		elapsed := time.Since(start)
		class := classifyCall(res, err)
		if err != nil {
			// What the WASI 0.2 host refused, under the engine's classification.
			if c := wasi2Code.FindString(err.Error()); c != "" {
				class += " " + c
			}
		}
		var out []string
		if deadline > 0 && elapsed > deadline+time.Second {
			out = append(out, fmt.Sprintf("held the call for %v past a %v deadline", elapsed, deadline))
		}
		if err != nil && (res.Status != 0 || res.Summary != nil || res.Data != nil) {
			out = append(out, fmt.Sprintf("a partial result crossed: %+v", res))
		}
		if strings.HasSuffix(class, wasm.ReasonABI) && !errors.Is(err, abi.ErrABI) {
			t.Errorf("an abi failure that is not abi.ErrABI: %v", err)
		}
		var ge *wasm.GuestError
		if errors.As(err, &ge) {
			after := trapCounts(e, mod)
			for r, n := range after {
				want := before[r]
				if r == ge.Reason {
					want++
				}
				if n != want {
					t.Errorf("capsule_guest_traps_total{reason=%q} went %v → %v, want %v", r, before[r], n, want)
				}
			}
		}
		// The gateway is unharmed: the same module answers the next call.
		if res, err := murmur.CallTool(context.Background(), e, mod, ok, nil, abi.ToolInput{Data: some("ok")}); err != nil || res.Status != abi.StatusPassed {
			t.Errorf("the next well-formed call failed: %v %+v", err, res)
		}
		return outcome{class: class, escaped: strings.Join(out, "; ")}
	}
}

var wasi2Code = regexp.MustCompile(`E-WASI2-\d{3}`)

var trapReasons = []string{wasm.ReasonDeadline, wasm.ReasonMemoryLimit, wasm.ReasonTrap, wasm.ReasonExit, wasm.ReasonABI}

func trapCounts(e *wasm.Engine, mod *wasm.Module) map[string]float64 {
	c := map[string]float64{}
	for _, r := range trapReasons {
		c[r] = testutil.ToFloat64(e.Metrics().Traps.WithLabelValues(mod.Capsule, mod.Artifact, string(mod.Role), r))
	}
	return c
}

// envAttack runs hostile-env with the environment GuestEnv builds from a manifest that
// (as if validation had been bypassed) lists credential variables set on the host. part
// "env" judges the variables the guest listed, "proc" its try at /proc/self/environ.
func envAttack(component bool, part string) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		t.Setenv("SECRET_API_KEY", hostSecret)
		t.Setenv("GITHUB_TOKEN", hostSecret)
		t.Setenv("ESCAPE_TZ", "UTC")
		m, err := manifest.Parse([]byte("name: hostile\nversion: 1.0.0\ncapabilities:\n  env:\n    allow: [ESCAPE_TZ]\n"), "murmur.yaml")
		if err != nil {
			t.Fatal(err)
		}
		m.Capabilities.Env.Allow = append(m.Capabilities.Env.Allow, "SECRET_API_KEY", "GITHUB_TOKEN")
		env := runtime.GuestEnv(m, os.LookupEnv, runtime.RuntimeEnv(m, "ses_escape", "http://gw/agents/hostile/"))
		mod := s.module(t, "hostile-env", manifest.RoleTool, component)
		g := wasm.Grants{FS: s.guestFS(t, t.TempDir()), MemoryBytes: 256 << 20, Deadline: 30 * time.Second, Env: env}
		res, err := murmur.CallTool(context.Background(), s.engine, mod, g, nil, abi.ToolInput{})
		if err != nil {
			t.Fatal(err)
		}
		seen := deref(res.Data) + "\n" + deref(res.Summary)
		escaped := leaked(seen)
		for _, name := range []string{"SECRET_API_KEY", "GITHUB_TOKEN", "PATH="} {
			if strings.Contains(seen, name) {
				escaped = join(escaped, "the guest saw "+name)
			}
		}
		class := "guest " + deref(res.Summary)
		if part == "env" {
			class = "env differs from GuestEnv"
			// GuestEnv's, and nothing else but the Go runtime's pacing the engine adds.
			if slices.Equal(strings.Split(deref(res.Data), "\n"), wasm.InstanceEnv(g)) {
				class = "env exactly GuestEnv"
			}
		}
		return outcome{class: class, escaped: escaped}
	}
}

// wasmNet is the outgoing-HTTP fixture of the guest network rows: an allowed server,
// a forbidden sentinel server that must never be reached, and the Outgoing host with
// rules allowing the first and api.example.com (which resolves to loopback).
type wasmNet struct {
	host          *murmur.Imports
	allowed       string // host:port
	forbiddenPort string
	forbiddenHits atomic.Int64
}

func (s *suite) wasmNet(t *testing.T) *wasmNet {
	if s.wnet != nil {
		return s.wnet
	}
	n := &wasmNet{}
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.forbiddenHits.Add(1)
		w.Write([]byte("forbidden server reached"))
	}))
	s.top.Cleanup(forbidden.Close)
	fu, _ := url.Parse(forbidden.URL)
	n.forbiddenPort = fu.Port()
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
	s.top.Cleanup(allowed.Close)
	au, _ := url.Parse(allowed.URL)
	n.allowed = au.Host
	rules, err := netpolicy.ParseRules([]string{"127.0.0.1:" + au.Port(), "api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	e := s.wasmEngine(t)
	out := &murmur.Outgoing{Capsule: capsuleName, Rules: rules, Metrics: e.Metrics(), Resolver: staticResolver{
		"api.example.com":  {netip.MustParseAddr("127.0.0.1")},
		"evil.example.com": {netip.MustParseAddr("127.0.0.1")},
	}}
	out.Init()
	n.host = &murmur.Imports{HTTP: out, Who: "hostile-net"}
	s.wnet = n
	return n
}

// staticResolver answers fixed addresses, standing in for DNS.
type staticResolver map[string][]netip.Addr

func (r staticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

// netAttack sends GET url from hostile-net: a refusal must be a failure the guest sees,
// counted once in capsule_network_denied_total{source="guest"}; a redirect must come
// back as itself; the forbidden server must see nothing.
func netAttack(rawURL string) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		n := s.wasmNet(t)
		mod := s.module(t, "hostile-net", manifest.RoleTool, false)
		e := s.engine
		u := strings.NewReplacer("{forbiddenport}", n.forbiddenPort, "{allowed}", n.allowed).Replace(rawURL)
		denied := func() float64 { return testutil.ToFloat64(e.Metrics().Denied.WithLabelValues(capsuleName, "guest")) }
		before, hits := denied(), n.forbiddenHits.Load()
		g := wasm.Grants{FS: s.guestFS(t, t.TempDir()), MemoryBytes: 256 << 20, Deadline: 30 * time.Second}
		res, err := murmur.CallTool(context.Background(), e, mod, g, n.host, abi.ToolInput{Data: some(u)})
		var class string
		switch {
		case err != nil:
			class = classifyCall(res, err)
		case res.Status == abi.StatusFailed && strings.Contains(deref(res.Summary), "network policy") && denied() == before+1:
			class = "denied guest"
		case res.Status == abi.StatusPassed:
			md := map[string]string{}
			for _, kv := range res.Metadata {
				md[kv[0]] = kv[1]
			}
			class = "response " + md["status"]
			if md["location"] != "" && denied() == before {
				class += " not followed"
			}
		default:
			class = classifyCall(res, err) + " (denied counter " + strconv.FormatFloat(denied()-before, 'f', -1, 64) + ")"
		}
		escaped := leaked(deref(res.Data))
		if got := n.forbiddenHits.Load(); got != hits {
			escaped = join(escaped, fmt.Sprintf("the forbidden server was reached %d times", got-hits))
		}
		if strings.Contains(deref(res.Data), "forbidden server reached") {
			escaped = join(escaped, "the guest read the forbidden server's answer")
		}
		return outcome{class: class, escaped: escaped}
	}
}

// invokeAttack: a script capsule asks the host to run itself, 1,000 deep; the host's
// Invoke re-enters the capsule, and the runtime must stop the nesting at MaxInvokeDepth
// with an error the guest sees, not a trap, and not after more entries than the cap.
func invokeAttack(t *testing.T, s *suite) outcome {
	mod := s.module(t, "hostile-invoke", murmur.RoleCapsule, false)
	e := s.engine
	work := t.TempDir()
	gfs := s.guestFS(t, work)
	grants := func(depth string) wasm.Grants {
		return wasm.Grants{FS: gfs, MemoryBytes: 256 << 20, Deadline: 30 * time.Second, Env: []string{"HOSTILE_INVOKE=recurse", "HOSTILE_DEPTH=" + depth}}
	}
	var entries atomic.Int64
	host := &murmur.Imports{}
	host.Invoke = func(ctx context.Context, name string, in abi.ToolInput) (abi.ToolResult, error) {
		entries.Add(1)
		if name != "self" || in.Data == nil {
			return abi.ToolResult{}, fmt.Errorf("no tool %q", name)
		}
		if err := murmur.RunScript(ctx, e, mod, grants(*in.Data), host); err != nil {
			return abi.ToolResult{}, err
		}
		return abi.ToolResult{Status: abi.StatusPassed}, nil
	}
	if err := murmur.RunScript(context.Background(), e, mod, grants("0"), host); err != nil {
		return outcome{class: classifyCall(abi.ToolResult{}, err)}
	}
	b, _ := os.ReadFile(filepath.Join(work, "out", "levels.txt"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var escaped string
	if n := entries.Load(); n > murmur.MaxInvokeDepth {
		escaped = fmt.Sprintf("the host was re-entered %d times, over the cap of %d", n, murmur.MaxInvokeDepth)
	}
	last := lines[len(lines)-1]
	if want := fmt.Sprintf("%d: err: tool-registry: invoke nested more than %d deep", murmur.MaxInvokeDepth, murmur.MaxInvokeDepth); last == want {
		return outcome{class: fmt.Sprintf("invoke refused at depth %d", murmur.MaxInvokeDepth), escaped: escaped}
	}
	return outcome{class: "last level: " + last, escaped: escaped}
}
