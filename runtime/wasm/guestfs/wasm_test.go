package guestfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// escapeWasm builds testdata/escape for wasip1 once per source version,
// caching the binary under os.TempDir keyed by the source and Go version.
func escapeWasm(t *testing.T) []byte {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "escape", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goBin); err != nil {
			t.Skip("no go toolchain to build the wasip1 guest")
		}
	}
	h := sha256.New()
	h.Write(src)
	h.Write([]byte(runtime.Version()))
	cached := filepath.Join(os.TempDir(), "guestfs-escape-"+hex.EncodeToString(h.Sum(nil))[:16]+".wasm")
	if b, err := os.ReadFile(cached); err == nil && len(b) > 0 {
		return b
	}
	tmp := fmt.Sprintf("%s.%d.tmp", cached, os.Getpid())
	cmd := exec.Command(goBin, "build", "-o", tmp, "./testdata/escape")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the wasip1 guest: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, cached); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(cached)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type guestRunner struct {
	rt  wazero.Runtime
	mod wazero.CompiledModule
}

var compileOnce sync.Mutex

func newGuestRunner(t *testing.T) *guestRunner {
	t.Helper()
	compileOnce.Lock()
	defer compileOnce.Unlock()
	ctx := context.Background()
	cfg := wazero.NewRuntimeConfig()
	if cache, err := wazero.NewCompilationCacheWithDir(filepath.Join(os.TempDir(), "guestfs-wazero-cache")); err == nil {
		cfg = cfg.WithCompilationCache(cache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	t.Cleanup(func() { rt.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	mod, err := rt.CompileModule(ctx, escapeWasm(t))
	if err != nil {
		t.Fatal(err)
	}
	return &guestRunner{rt: rt, mod: mod}
}

// run instantiates the guest with gfs mounted as "/" and returns its one
// line of output.
func (g *guestRunner) run(t *testing.T, gfs experimentalsys.FS, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cfg := wazero.NewModuleConfig().
		WithFSConfig(wazero.NewFSConfig().(sysfs.FSConfig).WithSysFSMount(gfs, "/")).
		WithArgs(append([]string{"escape"}, args...)...).
		WithStdout(&stdout).WithStderr(&stderr).
		WithName("")
	mod, err := g.rt.InstantiateModule(ctx, g.mod, cfg)
	if mod != nil {
		mod.Close(ctx)
	}
	var exitErr *sys.ExitError
	if err != nil && !(errors.As(err, &exitErr) && exitErr.ExitCode() == 0) {
		t.Fatalf("guest %v: %v\nstdout: %s\nstderr: %s", args, err, stdout.String(), stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// TestThroughWazero runs a real WASI guest against the FS mounted as its
// root: escapes fail inside the guest, ordinary work succeeds, and relative
// and absolute names are the same file.
func TestThroughWazero(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a wasip1 guest")
	}
	g := newGuestRunner(t)
	fx := newFixture(t)

	steps := []struct {
		args []string
		want string // exact, or a prefix when it ends in "*"
	}{
		// Host files are not reachable by name.
		{[]string{"read", "/etc/passwd"}, "err ENOENT"},
		{[]string{"read", "../../../../etc/passwd"}, "err ENOENT"},
		{[]string{"read", "../outside"}, "err ENOENT"}, // ".." stops at "/"
		{[]string{"readdir", ".."}, "ok *"},            // the root itself
		// Planted links leading out are refused.
		{[]string{"read", "abs"}, "err EPERM"},
		{[]string{"read", "passwd"}, "err EPERM"},
		{[]string{"read", "/passwd"}, "err EPERM"},
		{[]string{"read", "rel"}, "err EPERM"},
		{[]string{"read", "deep"}, "err EPERM"},
		{[]string{"read", "chain2"}, "err EPERM"},
		{[]string{"read", "absin"}, "err EPERM"},
		{[]string{"read", "dirlink/f"}, "err EPERM"},
		{[]string{"readdir", "dirlink"}, "err EPERM"},
		{[]string{"stat", "abs"}, "err EPERM"},
		{[]string{"lstat", "abs"}, "ok L*"},
		{[]string{"readlink", "passwd"}, "ok /etc/passwd"},
		// Writes outside are impossible.
		{[]string{"write", "abs", "pwned"}, "err EPERM"},
		{[]string{"append", "rel", "pwned"}, "err EPERM"},
		{[]string{"truncate", "chain", "0"}, "err EPERM"},
		{[]string{"write", "dirlink/new", "pwned"}, "err EPERM"},
		{[]string{"write", "outnew", "pwned"}, "err EPERM"},
		{[]string{"mkdir", "dirlink/d"}, "err EPERM"},
		{[]string{"rename", "dirlink/f", "stolen"}, "err EPERM"},
		{[]string{"rename", "file.txt", "dirlink/planted"}, "err EPERM"},
		{[]string{"link", "dirlink/f", "stolen"}, "err EPERM"},
		{[]string{"remove", "dirlink/f"}, "err EPERM"},
		{[]string{"chtimes", "abs"}, "err EPERM"},
		{[]string{"symlink", "/etc/passwd", "mine"}, "err EPERM"},
		{[]string{"symlink", "../../outside", "dir/mine"}, "err EPERM"},
		{[]string{"write", "../outside", "inside"}, "ok"}, // lands in the root
		// Ordinary work inside the root.
		{[]string{"read", "file.txt"}, "ok hello"},
		{[]string{"read", "/file.txt"}, "ok hello"},
		{[]string{"read", "dir/nested.txt"}, "ok nested"},
		{[]string{"read", "good"}, "ok hello"},
		{[]string{"read", "gooddir/nested.txt"}, "ok nested"},
		{[]string{"mkdir", "out"}, "ok"},
		{[]string{"mkdir", "/out"}, "err EEXIST"},
		{[]string{"write", "out/result.txt", "answer"}, "ok"},
		{[]string{"read", "/out/result.txt"}, "ok answer"},
		{[]string{"write", "/out/result.txt", "answer2"}, "ok"},
		{[]string{"read", "out/result.txt"}, "ok answer2"},
		{[]string{"append", "out/result.txt", "+"}, "ok"},
		{[]string{"readdir", "out"}, "ok result.txt"},
		{[]string{"readdir", "/dir"}, "ok nested.txt"},
		{[]string{"stat", "/out"}, "ok d*"},
		{[]string{"rename", "out/result.txt", "/out/final.txt"}, "ok"},
		{[]string{"read", "out/result.txt"}, "err ENOENT"},
		{[]string{"symlink", "final.txt", "out/l"}, "ok"},
		{[]string{"read", "out/l"}, "ok answer2+"},
		{[]string{"link", "out/final.txt", "out/hard"}, "ok"},
		{[]string{"readdir", "out"}, "ok final.txt,hard,l"},
		{[]string{"remove", "out/hard"}, "ok"},
		{[]string{"truncate", "out/final.txt", "6"}, "ok"},
		{[]string{"chtimes", "out/final.txt"}, "ok"},
		{[]string{"mkdir", "out/sub"}, "ok"},
		{[]string{"remove", "out/sub"}, "ok"},
		{[]string{"remove", "out"}, "err ENOTEMPTY"},
	}
	for _, st := range steps {
		got := g.run(t, fx.fs, st.args...)
		ok := got == st.want
		if prefix, isPrefix := strings.CutSuffix(st.want, "*"); isPrefix {
			ok = strings.HasPrefix(got, prefix)
		}
		if !ok {
			t.Errorf("guest %v = %q, want %q", st.args, got, st.want)
		}
	}

	// What the guest did is visible on the host, inside the root only.
	if b, err := os.ReadFile(filepath.Join(fx.root, "out", "final.txt")); err != nil || string(b) != "answer" {
		t.Errorf("out/final.txt = %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(fx.root, "out", "final.txt")); err != nil || fi.ModTime().Unix() != 1_000_000_000 {
		t.Errorf("out/final.txt mtime: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(fx.root, "outside")); err != nil || string(b) != "inside" {
		t.Errorf("root/outside = %q, %v", b, err)
	}
	// The fixture's cleanup checks that the host outside the root is untouched.
}

// TestThroughWazeroControl shows that the guest's probes are real: with
// wazero's own sysfs.DirFS on the same folder, the planted links do lead out.
func TestThroughWazeroControl(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a wasip1 guest")
	}
	g := newGuestRunner(t)
	fx := newFixture(t)
	dirfs := sysfs.DirFS(fx.root)
	if got := g.run(t, dirfs, "read", "abs"); got != "ok secret" {
		t.Errorf("DirFS read abs = %q; expected the escape guestfs prevents", got)
	}
	if got := g.run(t, dirfs, "read", "dirlink/f"); got != "ok secret2" {
		t.Errorf("DirFS read dirlink/f = %q; expected the escape guestfs prevents", got)
	}
	if got := g.run(t, fx.fs, "read", "abs"); got != "err EPERM" {
		t.Errorf("guestfs read abs = %q", got)
	}
}

// TestThroughWazeroReadOnly: a read-only mount reads but refuses writes.
func TestThroughWazeroReadOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a wasip1 guest")
	}
	g := newGuestRunner(t)
	fx := newFixture(t, readOnly())
	steps := [][2]string{
		{"read file.txt", "ok hello"},
		{"readdir dir", "ok nested.txt"},
		{"write file.txt x", "err EROFS"},
		{"write new.txt x", "err EROFS"},
		{"mkdir d", "err EROFS"},
		{"remove file.txt", "err EROFS"},
		{"rename file.txt x", "err EROFS"},
		{"read abs", "err EPERM"},
	}
	for _, st := range steps {
		if got := g.run(t, fx.fs, strings.Fields(st[0])...); got != st[1] {
			t.Errorf("guest %s = %q, want %q", st[0], got, st[1])
		}
	}
}
