package escape

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/shell"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/guestfs"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// suite holds what rows share, made on first use and kept for the whole run: one wasm
// Engine and each guest compiled once, one sandbox, one set of listeners. Cleanups go to
// the top-level test, so a fixture outlives the row that made it.
type suite struct {
	top *testing.T

	tierOnce sync.Once
	tier     shell.TierReport
	cgOnce   sync.Once
	cgLacks  string // why this host cannot apply a session's cgroup limits ("" when it can)

	engine *wasm.Engine
	mods   map[string]*wasm.Module

	files *hostFiles
	gfs   *guestfs.FS // files.work as a guest's "/"
	wnet  *wasmNet

	sb    *sandboxFixture
	net   *netFixture
	a2a   *a2aFixture
	jwt   *jwtFixture
	parts *partsFixture
	reg   *registryFixture
	peers *peersFixture
	hf    *harnessFixture
	mb    *bridgeFixture
	gwBin string // the built gateway
	gw    *gwFixture
	// gwFailed says why the gateway fixture could not be made, so the rows after the
	// first fail at once rather than each start a gateway.
	gwFailed string
}

func newSuite(t *testing.T) *suite {
	return &suite{top: t, mods: map[string]*wasm.Module{}}
}

// lacks says why the host cannot run a row needing need ("" when it can).
func (s *suite) lacks(need string) string {
	switch need {
	case "":
		return ""
	case needSealed:
		s.tierOnce.Do(func() { s.tier = shell.DetectTier() })
		if s.tier.Tier != shell.TierSealed {
			return "the OS sandbox gives tier " + s.tier.Tier + " here: " + strings.Join(s.tier.Reasons, "; ")
		}
		return ""
	case needHarness:
		if why := s.lacks(needSealed); why != "" {
			return why
		}
		s.cgOnce.Do(func() { s.cgLacks = s.cgroupLacks() })
		return s.cgLacks
	}
	return "unknown requirement " + need
}

// cgroupLacks opens a sandbox with a cgroup limit, as a harness capsule's session does,
// and says why it could not.
func (s *suite) cgroupLacks() string {
	dir := s.top.TempDir()
	work, records := filepath.Join(dir, "work"), filepath.Join(dir, "records")
	os.Mkdir(work, 0o755)
	os.Mkdir(records, 0o755)
	sb, err := shell.New(shell.Config{Workdir: work, Records: records, Cgroup: shell.CgroupLimits{Pids: 64}})
	if err != nil {
		return "cgroup limits: " + err.Error()
	}
	sb.Close()
	return ""
}

// Sentinels: what must never reach a guest, a tool or a response.
const (
	secret     = "ESCAPE-SENTINEL-7f3a91"      // the content of the file outside every workdir
	hostSecret = "ESCAPE-HOST-ENV-SENTINEL-c4" // the value of a host variable no capsule may see
)

// hostFiles is a workdir beside a folder it must not reach: root/work is the guest's or
// tool's "/" (or workdir), root/outside holds secret.txt, and the workdir holds links a
// hostile neighbour planted to the outside.
type hostFiles struct {
	root, work, outside string
}

func (s *suite) hostFiles(t *testing.T) *hostFiles {
	if s.files != nil {
		return s.files
	}
	root, err := filepath.EvalSymlinks(s.top.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &hostFiles{root: root, work: filepath.Join(root, "work"), outside: filepath.Join(root, "outside")}
	for _, d := range []string{f.work, f.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.outside, "secret.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"link":       f.outside,                                 // absolute, to the folder outside
		"rel":        "../outside",                              // relative, climbing out
		"passwd":     "/etc/passwd",                             // absolute, to a host file
		"hostetc":    "/etc",                                    // absolute, to a host folder
		"dangling":   filepath.Join(f.outside, "planted.txt"),   // absolute, to a file not there yet
		"secretlink": filepath.Join(f.outside, "secret.txt"),    // absolute, to the secret itself
		"chain":      "rel",                                     // a link to a link out
		"deep":       "hostetc/../../../../../../../etc/passwd", // through a link, then climbing
	} {
		if err := os.Symlink(target, filepath.Join(f.work, name)); err != nil {
			t.Fatal(err)
		}
	}
	s.files = f
	return f
}

// escaped reports what changed outside the workdir: a file created beside it or in the
// outside folder, or secret.txt changed. Every row touching files checks it.
func (f *hostFiles) escaped() string {
	var out []string
	if ents, _ := os.ReadDir(f.root); len(ents) != 2 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		out = append(out, "the folder holding the workdir now holds "+strings.Join(names, ", "))
	}
	if ents, _ := os.ReadDir(f.outside); len(ents) != 1 || ents[0].Name() != "secret.txt" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		out = append(out, "the outside folder now holds "+strings.Join(names, ", "))
	}
	if b, err := os.ReadFile(filepath.Join(f.outside, "secret.txt")); err != nil || string(b) != secret {
		out = append(out, "secret.txt changed: "+string(b))
	}
	return strings.Join(out, "; ")
}

// leaked reports a sentinel or host file content found in text.
func leaked(text string) string {
	for _, s := range []string{secret, hostSecret, "root:x:0:0"} {
		if strings.Contains(text, s) {
			return "the attacker saw " + s
		}
	}
	return ""
}

// join joins the non-empty escape descriptions.
func join(parts ...string) string {
	parts = slices.DeleteFunc(parts, func(s string) bool { return s == "" })
	return strings.Join(parts, "; ")
}

// wasmEngine is the suite's one Engine; compiled code is cached under the guest build
// cache, so each guest is compiled by wazero once across runs.
func (s *suite) wasmEngine(t *testing.T) *wasm.Engine {
	if s.engine != nil {
		return s.engine
	}
	ctx := context.Background()
	e, err := wasm.NewEngine(ctx, murmur.Install(), wasm.WithMetrics(prometheus.NewRegistry()),
		wasm.WithCacheDir(guestbuild.WazeroCache()))
	if err != nil {
		t.Fatal(err)
	}
	s.top.Cleanup(func() { e.Close(ctx) })
	s.engine = e
	return e
}

const capsuleName = "escape"

// module returns the test guest internal/testkit/testguests/<dir> compiled for role, as a core
// module, or with component set as a component made by jco's preview1 adapter.
func (s *suite) module(t *testing.T, dir string, role manifest.Role, component bool) *wasm.Module {
	key := dir + "/" + string(role)
	if component {
		key += "/component"
	}
	if m := s.mods[key]; m != nil {
		return m
	}
	e := s.wasmEngine(t)
	bin := guestbuild.Wasm(t, "../testguests/"+dir)
	if component {
		bin = watbuild.Component(t, bin, watbuild.RunOnlyWIT(t, "../../../wit/murmur-tool-0.1.0.wit", "tool-component"), "tool-component")
	}
	world := string(role)
	if role == murmur.RoleCapsule {
		world = murmur.ScriptWorld
	}
	mod, err := murmur.Compile(context.Background(), e, capsuleName, strings.ReplaceAll(key, "/", "-"), role, bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := murmur.CheckWorld(mod, world); err != nil {
		t.Fatal(err)
	}
	s.mods[key] = mod
	return mod
}

// guestFS serves dir as a guest's "/" for the rest of the run.
func (s *suite) guestFS(t *testing.T, dir string) *guestfs.FS {
	gfs, err := guestfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.top.Cleanup(func() { gfs.Close() })
	return gfs
}

// errnoNames name the errors a guest sees by the text WASI libc or Go gives them.
var errnoNames = []struct{ text, name string }{
	{"Operation not permitted", "EPERM"},
	{"operation not permitted", "EPERM"},
	{"No such file", "ENOENT"},
	{"no such file", "ENOENT"},
	{"Permission denied", "EACCES"},
	{"permission denied", "EACCES"},
	{"not supported", "ENOTSUP"},
	{"Not supported", "ENOTSUP"},
	{"Read-only file system", "EROFS"},
	{"read-only file system", "EROFS"},
	{"Invalid argument", "EINVAL"},
	{"invalid argument", "EINVAL"},
	{"Bad file", "EBADF"},
	{"Is a directory", "EISDIR"},
	{"Not a directory", "ENOTDIR"},
	{"not a directory", "ENOTDIR"},
	{"Cross-device", "EXDEV"},
	{"cross-device", "EXDEV"},
	{"File exists", "EEXIST"},
}

// errnoOf names the first known error text in msg, or returns msg cut short.
func errnoOf(msg string) string {
	for _, e := range errnoNames {
		if strings.Contains(msg, e.text) {
			return e.name
		}
	}
	if len(msg) > 80 {
		msg = msg[:80]
	}
	return "unrecognised: " + msg
}

// classifyCall names how a guest call ended: "E-RUN-003 <reason>" for a classified
// guest failure, "guest <ERRNO>" for a tool that failed on a refused operation, "passed".
func classifyCall(res abi.ToolResult, err error) string {
	if err != nil {
		var ge *wasm.GuestError
		if errors.As(err, &ge) {
			return errs.Code(err) + " " + ge.Reason
		}
		return "call error: " + err.Error()
	}
	switch res.Status {
	case abi.StatusFailed:
		return "guest " + errnoOf(deref(res.Summary))
	case abi.StatusPassed:
		return "passed"
	}
	return "status " + res.Status.String()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func some(s string) *string { return &s }
