//go:build linux

package shell

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestEnvironment: a credential in the gateway's environment reaches no subprocess, in
// any tier; HOME, PATH and TMPDIR are the sandbox's own.
func TestEnvironment(t *testing.T) {
	const sentinel = "sk-sentinel-7d41c0ffee"
	t.Setenv("CAPSULE_TEST_API_KEY", sentinel)
	t.Setenv("GITHUB_TOKEN", sentinel)
	for _, tier := range append(tiers(t), TierEnvOnly) {
		t.Run(tier, func(t *testing.T) {
			work := t.TempDir()
			s := newSandbox(t, Config{Workdir: work, tier: tier,
				Env: []string{"LANG=C.UTF-8", "HOME=/root", "PATH=/root/bin", "MURMUR_SESSION_ID=ses_1"}})
			r := bash(t, s, `env; cat /proc/*/environ 2>/dev/null | tr '\0' '\n'; cat /proc/1/cmdline 2>/dev/null`)
			if strings.Contains(r.Text, sentinel) {
				t.Fatalf("the sentinel reached the subprocess:\n%s", r.Text)
			}
			out, _ := streams(t, r)
			for _, want := range []string{"HOME=" + filepath.Join(work, ".capsule-home") + "\n", "PATH=" + sandboxPATH + "\n",
				"TMPDIR=" + filepath.Join(work, ".capsule-home", "tmp") + "\n", "LANG=C.UTF-8\n", "MURMUR_SESSION_ID=ses_1\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("env lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, stageEnv) || strings.Contains(out, "HOME=/root") {
				t.Errorf("wrapper or host values leaked:\n%s", out)
			}
		})
	}
}

// TestOutputCap: 10 MiB of output is cut at 16 KiB per stream in the result and kept
// whole in work/logs, named in full_output_path.
func TestOutputCap(t *testing.T) {
	work := t.TempDir()
	s := newSandbox(t, Config{Workdir: work})
	r := bash(t, s, `head -c 10485760 /dev/zero | tr '\0' x; head -c 20000 /dev/zero | tr '\0' y >&2; exit 3`)
	if r.ExitCode != 3 || r.Status != "passed" {
		t.Fatalf("exit %d status %s", r.ExitCode, r.Status)
	}
	rel := r.Metadata["full_output_path"]
	if !strings.HasPrefix(rel, "logs/shell-") || !strings.HasSuffix(rel, ".log") {
		t.Fatalf("full_output_path %q", rel)
	}
	out, errOut := streams(t, r)
	if want := strings.Repeat("x", OutputCap) + "\n[output cut at 16384 of 10485760 bytes; full output in " + rel + "]\n"; out != want {
		t.Errorf("stdout: %d bytes, ends %q", len(out), out[max(0, len(out)-120):])
	}
	if want := strings.Repeat("y", OutputCap) + "\n[output cut at 16384 of 20000 bytes; full output in " + rel + "]"; errOut != want {
		t.Errorf("stderr: %d bytes, ends %q", len(errOut), errOut[max(0, len(errOut)-120):])
	}
	if r.Bytes != 10485760+20000 {
		t.Errorf("Bytes = %d", r.Bytes)
	}
	// What on-shell hooks get: each stream's kept head and its full size.
	if r.Stdout != strings.Repeat("x", OutputCap) || r.Stderr != strings.Repeat("y", OutputCap) || r.StdoutBytes != 10485760 || r.StderrBytes != 20000 {
		t.Errorf("streams for hooks: %d and %d bytes kept of %d and %d", len(r.Stdout), len(r.Stderr), r.StdoutBytes, r.StderrBytes)
	}
	full, err := os.ReadFile(filepath.Join(work, rel))
	if err != nil {
		t.Fatal(err)
	}
	want := "$ head -c 10485760 /dev/zero | tr '\\0' x; head -c 20000 /dev/zero | tr '\\0' y >&2; exit 3\nExit code: 3\nStdout:\n" +
		strings.Repeat("x", 10485760) + "\nStderr:\n" + strings.Repeat("y", 20000)
	if string(full) != want {
		t.Errorf("the log (%d bytes) is not the whole output (%d bytes): starts %q", len(full), len(want), full[:min(len(full), 120)])
	}
	// The gateway's spill files are gone, and short output writes no log.
	r = bash(t, s, "echo short")
	if _, ok := r.Metadata["full_output_path"]; ok {
		t.Error("short output got a log")
	}
	left, _ := filepath.Glob(filepath.Join(s.private, "spill-*"))
	if len(left) > 0 {
		t.Errorf("spill files left: %v", left)
	}
}

// TestLogLinkRefused: a link the tool plants where logs go cannot redirect the
// gateway's write of the full log.
func TestLogLinkRefused(t *testing.T) {
	work, outside := t.TempDir(), t.TempDir()
	s := newSandbox(t, Config{Workdir: work})
	if err := os.Symlink(outside, filepath.Join(work, "logs")); err != nil {
		t.Fatal(err)
	}
	r := bash(t, s, `head -c 20000 /dev/zero`)
	if _, ok := r.Metadata["full_output_path"]; ok {
		t.Errorf("the log was written through the link: %v", r.Metadata)
	}
	if entries, _ := os.ReadDir(outside); len(entries) > 0 {
		t.Errorf("the gateway wrote outside the workdir: %v", entries)
	}
}

// TestProcessLimit: a sealed sandbox holds at most Limits.Processes processes.
func TestProcessLimit(t *testing.T) {
	requireTier(t, TierSealed)
	s := newSandbox(t, Config{Allow: []string{"python3"}})
	r := runTool(t, s, "python3", `
import os, time
n = 0
for i in range(400):
    try:
        pid = os.fork()
    except OSError as e:
        print("fork failed errno", e.errno)
        break
    if pid == 0:
        time.sleep(120)
        os._exit(0)
    n += 1
print("forked", n)
`, time.Minute)
	out, _ := streams(t, r)
	var n int
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "forked "); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	if !strings.Contains(out, "fork failed errno 11") || n >= 128 || n < 100 {
		t.Fatalf("forked %d children, want EAGAIN below 128:\n%s", n, r.Text)
	}
}

// TestForkBomb: a fork bomb under a deadline is bounded, killed at the deadline, and
// leaves the host (this test process) healthy and the sandbox usable.
func TestForkBomb(t *testing.T) {
	requireTier(t, TierSealed)
	s := newSandbox(t, Config{})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	// The sleep keeps the command alive, so the bomb runs until the deadline.
	r, err := s.RunShell(ctx, "bash", []byte(`{"command": ":(){ :|:& };:; sleep 60"}`))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the bomb took %v to end", took)
	}
	if r.Status != "error" || !strings.Contains(r.Text, "[killed: context deadline exceeded]") || !strings.Contains(r.Text, "Resource temporarily unavailable") {
		t.Errorf("want a bounded bomb killed at the deadline; got %s\n%.300s\n…%s", r.Status, r.Text, r.Text[max(0, len(r.Text)-200):])
	}
	if err := exec.Command("true").Run(); err != nil {
		t.Fatalf("the host cannot start a process after the bomb: %v", err)
	}
	if r := bash(t, s, "echo alive"); !strings.Contains(r.Text, "alive") {
		t.Errorf("the sandbox is unusable after the bomb:\n%s", r.Text)
	}
}

// TestCancelKillsTree: cancelling the context kills the command and everything it
// started, background processes included.
func TestCancelKillsTree(t *testing.T) {
	for _, tier := range append(tiers(t), TierEnvOnly) {
		t.Run(tier, func(t *testing.T) {
			work := t.TempDir()
			s := newSandbox(t, Config{Workdir: work, tier: tier})
			fifo := filepath.Join(work, "ready")
			if err := syscall.Mkfifo(fifo, 0o666); err != nil {
				t.Fatal(err)
			}
			marker := "999." + strconv.Itoa(os.Getpid()) + strconv.Itoa(int(time.Now().UnixNano()%1000))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				// Opening blocks until the tool opens the other end: the tool is running.
				f, err := os.Open(fifo)
				if err == nil {
					f.Read(make([]byte, 8))
					f.Close()
				}
				cancel()
			}()
			in, _ := json.Marshal(map[string]string{"command": "sleep " + marker + " & (setsid sleep " + marker + " &) ; sleep " + marker + " & echo go > ready; wait"})
			r, err := s.RunShell(ctx, "bash", in)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(r.Text, "[killed: context canceled]") {
				t.Errorf("not reported as killed:\n%s", r.Text)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				alive := processesWith(marker)
				if len(alive) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("processes survived the cancel: %v", alive)
				}
				time.Sleep(20 * time.Millisecond) // polling for death, not synchronising
			}
		})
	}
}

// processesWith lists live (not zombie) processes whose command line contains s.
func processesWith(s string) []int {
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmd, []byte(s)) {
			continue
		}
		if st, err := os.ReadFile("/proc/" + d.Name() + "/stat"); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// TestConcurrentCommands: commands of one sandbox run side by side without mixing.
func TestConcurrentCommands(t *testing.T) {
	s := newSandbox(t, Config{})
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			want := "n" + strconv.Itoa(i)
			r := bash(t, s, "echo "+want+" > "+want+".txt; cat "+want+".txt")
			if out, _ := streams(t, r); out != want+"\n" {
				t.Errorf("got %q, want %q", out, want)
			}
		}()
	}
	close(start)
	wg.Wait()
}

// TestLeftoversKilled: background processes a finished command leaves behind are
// killed, and do not hold its result back through the inherited output pipe.
func TestLeftoversKilled(t *testing.T) {
	for _, tier := range append(tiers(t), TierEnvOnly) {
		t.Run(tier, func(t *testing.T) {
			s := newSandbox(t, Config{tier: tier})
			marker := "998." + strconv.Itoa(os.Getpid()) + strconv.Itoa(int(time.Now().UnixNano()%1000))
			start := time.Now()
			r := bash(t, s, "sleep "+marker+" & (setsid sleep "+marker+" &); echo done")
			if took := time.Since(start); took > 10*time.Second || !strings.Contains(r.Text, "done") || r.ExitCode != 0 {
				t.Fatalf("took %v:\n%s", took, r.Text)
			}
			if alive := processesWith(marker); len(alive) > 0 {
				t.Errorf("left running: %v", alive)
				for _, pid := range alive {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		})
	}
}
