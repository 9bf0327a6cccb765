//go:build linux

package shell

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/errs"
)

// answering writes an executable script at path that answers the protocol query with
// proto, as a helper of that protocol would.
func answering(t *testing.T, path, proto string) {
	t.Helper()
	script(t, path, "echo "+wrapperArg0+" protocol "+proto, 0o755)
}

// script writes a shell script with mode exactly (whatever the umask).
func script(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// fakeGateway stands for the gateway's executable: only its folder matters, for a
// simulated host or a helper beside it.
func fakeGateway(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestChooseWrapper: New takes the helper next to the gateway's executable (symlinks
// resolved) when it speaks this gateway's protocol, else the gateway itself with
// W-SEC-004 saying why and how to fix it; a configured wrapper is used as it is, or
// refused with E-SEC-005 naming it. The test binary, which imports this package, is a
// working wrapper.
func TestChooseWrapper(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// setup lays out the gateway (and a helper) in dir and returns the gateway's
		// executable as os.Executable reports it, and Config.WrapperPath.
		setup      func(t *testing.T, dir string) (exe, configured string)
		kind, path string // the wrapper chosen; path relative to dir
		why        string // part of W-SEC-004's message when kind is self
		code       string // New's refusal instead
		msg        string // part of the refusal
	}{
		{name: "helper next to the gateway", kind: WrapperHelper, path: HelperName,
			setup: func(t *testing.T, dir string) (string, string) {
				symlink(t, self, filepath.Join(dir, HelperName))
				return filepath.Join(dir, "caddy"), ""
			}},
		{name: "no helper", kind: WrapperSelf, path: "caddy", why: "there is no capsulegate-sandbox next to it",
			setup: func(t *testing.T, dir string) (string, string) { return filepath.Join(dir, "caddy"), "" }},
		{name: "helper not executable", kind: WrapperSelf, path: "caddy", why: "is not executable (mode -rw-r--r--)",
			setup: func(t *testing.T, dir string) (string, string) {
				script(t, filepath.Join(dir, HelperName), "echo "+wrapperArg0+" protocol "+Protocol(), 0o644)
				return filepath.Join(dir, "caddy"), ""
			}},
		{name: "helper a folder", kind: WrapperSelf, path: "caddy", why: "is not a regular file",
			setup: func(t *testing.T, dir string) (string, string) {
				os.Mkdir(filepath.Join(dir, HelperName), 0o755)
				return filepath.Join(dir, "caddy"), ""
			}},
		{name: "helper of another protocol", kind: WrapperSelf, path: "caddy", why: "speaks sandbox protocol 0-other and this gateway " + Protocol(),
			setup: func(t *testing.T, dir string) (string, string) {
				answering(t, filepath.Join(dir, HelperName), "0-other")
				return filepath.Join(dir, "caddy"), ""
			}},
		{name: "helper that does not answer", kind: WrapperSelf, path: "caddy", why: "does not answer the sandbox protocol query",
			setup: func(t *testing.T, dir string) (string, string) {
				script(t, filepath.Join(dir, HelperName), "echo usage >&2; exit 2", 0o755)
				return filepath.Join(dir, "caddy"), ""
			}},
		{name: "helper not a program", kind: WrapperSelf, path: "caddy", why: "exec format error",
			setup: func(t *testing.T, dir string) (string, string) {
				if err := os.WriteFile(filepath.Join(dir, HelperName), []byte{0, 1, 2, 3}, 0o755); err != nil {
					t.Fatal(err)
				}
				return filepath.Join(dir, "caddy"), ""
			}},
		{name: "gateway through a symlink", kind: WrapperHelper, path: "real/" + HelperName,
			setup: func(t *testing.T, dir string) (string, string) {
				os.Mkdir(filepath.Join(dir, "real"), 0o755)
				os.Mkdir(filepath.Join(dir, "bin"), 0o755)
				fakeGateway(t, filepath.Join(dir, "real", "caddy"))
				answering(t, filepath.Join(dir, "real", HelperName), Protocol())
				symlink(t, filepath.Join(dir, "real", "caddy"), filepath.Join(dir, "bin", "caddy"))
				return filepath.Join(dir, "bin", "caddy"), ""
			}},
		{name: "helper beside the symlink only", kind: WrapperSelf, path: "bin/caddy", why: "no capsulegate-sandbox next to it in",
			setup: func(t *testing.T, dir string) (string, string) {
				os.Mkdir(filepath.Join(dir, "real"), 0o755)
				os.Mkdir(filepath.Join(dir, "bin"), 0o755)
				fakeGateway(t, filepath.Join(dir, "real", "caddy"))
				answering(t, filepath.Join(dir, "bin", HelperName), Protocol())
				symlink(t, filepath.Join(dir, "real", "caddy"), filepath.Join(dir, "bin", "caddy"))
				return filepath.Join(dir, "bin", "caddy"), ""
			}},
		{name: "configured", kind: WrapperConfigured, path: "wrapper",
			setup: func(t *testing.T, dir string) (string, string) {
				symlink(t, self, filepath.Join(dir, "wrapper"))
				answering(t, filepath.Join(dir, HelperName), "0-ignored") // not even asked
				return filepath.Join(dir, "caddy"), filepath.Join(dir, "wrapper")
			}},
		{name: "configured missing", code: CodeHelper, msg: "nope does not exist",
			setup: func(t *testing.T, dir string) (string, string) {
				return filepath.Join(dir, "caddy"), filepath.Join(dir, "nope")
			}},
		{name: "configured not executable", code: CodeHelper, msg: "is not executable",
			setup: func(t *testing.T, dir string) (string, string) {
				script(t, filepath.Join(dir, "h"), "echo "+wrapperArg0+" protocol "+Protocol(), 0o644)
				return filepath.Join(dir, "caddy"), filepath.Join(dir, "h")
			}},
		{name: "configured of another protocol", code: CodeHelper, msg: "speaks sandbox protocol 0-other",
			setup: func(t *testing.T, dir string) (string, string) {
				answering(t, filepath.Join(dir, "h"), "0-other")
				return filepath.Join(dir, "caddy"), filepath.Join(dir, "h")
			}},
		{name: "configured relative", code: CodeHelper, msg: "is not an absolute path",
			setup: func(t *testing.T, dir string) (string, string) {
				return filepath.Join(dir, "caddy"), "bin/" + HelperName
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			exe, configured := tc.setup(t, dir)
			if _, err := os.Lstat(exe); err != nil {
				fakeGateway(t, exe)
			}
			s, err := New(Config{Workdir: t.TempDir(), Records: t.TempDir(), WrapperPath: configured,
				executable: func() (string, error) { return exe, nil }, probe: simulated(TierReport{Tier: TierSealed})})
			if tc.code != "" {
				if err == nil {
					s.Close()
					t.Fatalf("not refused; wrapper %v", s.Wrapper())
				}
				e := errs.Find(err, tc.code)
				if e == nil || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), strconv.Quote(configured)) || e.Fix == "" {
					t.Fatalf("refusal %v: want %s naming %q, saying %q, with a fix", err, tc.code, configured, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			w := s.Wrapper()
			if w.Kind != tc.kind || w.Path != filepath.Join(dir, tc.path) {
				t.Errorf("wrapper %+v, want %s %s", w, tc.kind, filepath.Join(dir, tc.path))
			}
			var warned *errs.Error
			for _, e := range s.Warnings() {
				if e.Code == WarnSelfWrapper {
					warned = e
				}
			}
			if tc.kind != WrapperSelf {
				if warned != nil {
					t.Errorf("warned %v", warned)
				}
				return
			}
			if warned == nil {
				t.Fatalf("no %s among %v", WarnSelfWrapper, s.Warnings())
			}
			real, _ := filepath.EvalSymlinks(exe)
			for _, want := range []string{w.Path, tc.why, "slower"} {
				if !strings.Contains(warned.Msg, want) {
					t.Errorf("%s says %q, lacking %q", WarnSelfWrapper, warned.Msg, want)
				}
			}
			if want := "go build -o " + filepath.Join(filepath.Dir(real), HelperName) + " " + helperImport; !strings.Contains(warned.Fix, want) {
				t.Errorf("%s's fix %q lacks %q", WarnSelfWrapper, warned.Fix, want)
			}
		})
	}
}

// TestHelperAnswerKept: a helper is asked its protocol once while its file stays the
// same, and again once it is replaced.
func TestHelperAnswerKept(t *testing.T) {
	dir := t.TempDir()
	helper, count := filepath.Join(dir, HelperName), filepath.Join(dir, "asked")
	write := func(proto string, mtime time.Time) {
		script(t, helper, "echo x >> "+count+"\necho "+wrapperArg0+" protocol "+proto, 0o755)
		if err := os.Chtimes(helper, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	asked := func() int {
		b, _ := os.ReadFile(count)
		return strings.Count(string(b), "x")
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	write(Protocol(), t0)
	for range 3 {
		if err := CheckHelper(helper); err != nil {
			t.Fatal(err)
		}
	}
	if n := asked(); n != 1 {
		t.Errorf("asked %d times, want once", n)
	}
	write("0-other", t0.Add(time.Second)) // a reinstall from other source
	for range 2 {
		if err := CheckHelper(helper); errs.Code(err) != CodeHelper || !strings.Contains(err.Error(), "0-other") {
			t.Errorf("replaced helper: %v, want %s", err, CodeHelper)
		}
	}
	if n := asked(); n != 2 {
		t.Errorf("asked %d times, want twice", n)
	}
}

// buildHelper builds cmd/capsulegate-sandbox into dir, as `make caddy` does next to the
// gateway.
func buildHelper(t *testing.T, dir string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the helper: %v", err)
	}
	out := filepath.Join(dir, HelperName)
	build := exec.Command(gobin, "build", "-o", out, helperImport)
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the helper: %v\n%s", err, b)
	}
	return out
}

// TestHelperRunsSealed builds the real helper next to a gateway and runs commands
// through it in the sealed tier: New chooses it, the waiting wrapper process is that
// binary, and the commands are confined.
func TestHelperRunsSealed(t *testing.T) {
	requireTier(t, TierSealed)
	dir := t.TempDir()
	helper := buildHelper(t, dir)
	gateway := filepath.Join(dir, "caddy")
	fakeGateway(t, gateway)
	s := newSandbox(t, Config{MinTier: TierSealed, executable: func() (string, error) { return gateway, nil }})
	if w := s.Wrapper(); w.Kind != WrapperHelper || w.Path != helper {
		t.Fatalf("wrapper %+v, want the helper %s", w, helper)
	}
	if s.Tier() != TierSealed {
		t.Fatalf("tier %s", s.Tier())
	}
	r := bash(t, s, "cat /etc/shadow && echo shadow-read; hostname; echo made > made && cat made")
	out, _ := streams(t, r)
	if strings.Contains(out, "shadow-read") || !strings.Contains(out, "capsule\nmade") {
		t.Errorf("not confined as sealed:\n%s", r.Text)
	}
	// The wrapper started for the next command is the helper's binary (its inner stage
	// is too: the outer stage starts /proc/self/exe).
	pid := spareOf(t, s).w.cmd.Process.Pid
	if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err != nil || exe != helper {
		t.Errorf("the waiting wrapper runs %q (%v), want %s", exe, err, helper)
	}
	if slices.ContainsFunc(s.Warnings(), func(e *errs.Error) bool { return e.Code == WarnSelfWrapper }) {
		t.Errorf("warnings %v", s.Warnings())
	}
}
