//go:build linux

package shell

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The uid TestSealedUnprivileged runs its child as: a gateway without root.
const unprivUID = 43210

// TestSealedUnprivileged runs the sealed tier as an ordinary user, the usual production
// setup: this test binary, copied where that user can run it, runs
// TestUnprivilegedChild as uid 43210.
func TestSealedUnprivileged(t *testing.T) {
	if os.Getenv("CAPSULE_SHELL_CHILD") != "" {
		t.Skip("inside the child")
	}
	if os.Geteuid() != 0 {
		t.Skip("this test process is already unprivileged: every other sealed test covers that path")
	}
	requireTier(t, TierSealed)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // both made 0700 by the testing package
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "shell.test")
	copyFile(t, exe, bin)
	work, rec := filepath.Join(dir, "work"), filepath.Join(dir, "records")
	mine := filepath.Join(dir, "mine.txt") // the user's own file, outside the workdir
	writeFile(t, mine, "SENTINEL-OWN-FILE")
	for _, p := range []string{work, rec, mine} {
		os.MkdirAll(p, 0o755)
		if err := os.Chown(p, unprivUID, unprivUID); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(mine, 0o600)
	cmd := exec.Command(bin, "-test.run=^TestUnprivilegedChild$", "-test.v", "-test.count=1")
	cmd.Env = []string{"CAPSULE_SHELL_CHILD=" + strings.Join([]string{work, rec, mine}, "|"), "PATH=/usr/bin:/bin", "TMPDIR=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: unprivUID, Gid: unprivUID}}
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestUnprivilegedChild") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if _, err := os.Lstat(filepath.Join(dir, "new")); err == nil {
		t.Error("the tool wrote next to the workdir on the host")
	}
	st, err := os.Stat(filepath.Join(work, "made-inside"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != unprivUID {
		t.Errorf("a file the tool made belongs to uid %d, want the gateway's %d", uid, unprivUID)
	}
}

func TestUnprivilegedChild(t *testing.T) {
	v := os.Getenv("CAPSULE_SHELL_CHILD")
	if v == "" {
		t.Skip("run by TestSealedUnprivileged")
	}
	p := strings.Split(v, "|")
	work, rec, mine := p[0], p[1], p[2]
	s := newSandbox(t, Config{Workdir: work, Records: rec, MinTier: TierSealed, Allow: []string{"bash", "python3"}})
	for _, cmd := range []string{"cat /etc/shadow", "cat " + mine, "cat /proc/self/root" + mine} {
		if r := bash(t, s, cmd); r.ExitCode == 0 || strings.Contains(r.Text, "SENTINEL") {
			t.Errorf("`%s` was allowed:\n%s", cmd, r.Text)
		}
	}
	// Above the workdir the sealed root has a private tmpfs: a write there stays there.
	bash(t, s, "echo x > "+filepath.Join(filepath.Dir(mine), "new"))
	if r := bash(t, s, "echo ok > made-inside && cat made-inside"); r.ExitCode != 0 {
		t.Errorf("cannot write the workdir:\n%s", r.Text)
	}
	// Scoped, as an ordinary user: the process limit is headroom over the user's tasks.
	scoped := newSandbox(t, Config{Workdir: work, Records: rec, Allow: []string{"python3"}, tier: TierScoped})
	for _, sb := range []*Sandbox{s, scoped} {
		forkCount(t, sb)
	}
}

func forkCount(t *testing.T, s *Sandbox) {
	r := runTool(t, s, "python3", `
import os, time
n = 0
for i in range(400):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(120)
        os._exit(0)
    n += 1
print("forked", n)
`, time.Minute)
	if out, _ := streams(t, r); !strings.HasPrefix(out, "forked 1") || len(out) != len("forked 123\n") {
		t.Errorf("process limit (%s): %s", s.Tier(), r.Text)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
