//go:build linux

package shell

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// spareOf waits for the refill after a command and returns the ready wrapper.
func spareOf(t *testing.T, s *Sandbox) *launch {
	t.Helper()
	s.filling.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spare == nil {
		t.Fatal("no wrapper was started for the next command")
	}
	return s.spare
}

// TestSpare: a command without input runs in the wrapper started after the previous
// one, which is as fresh as a wrapper started for it (its own /tmp and processes in
// sealed); a ready wrapper that died is not used, and Close ends the ready one.
func TestSpare(t *testing.T) {
	for _, tier := range tiers(t) {
		for _, tc := range []struct {
			name string
			kill bool // kill the ready wrapper before the second command
		}{
			{"ready", false},
			{"died while ready", true},
		} {
			t.Run(tier+"/"+tc.name, func(t *testing.T) {
				s := newSandbox(t, Config{tier: tier})
				r := bash(t, s, "echo one > /tmp/mark; echo ok")
				if out, _ := streams(t, r); r.ExitCode != 0 || strings.TrimSpace(out) != "ok" {
					t.Fatalf("first command: %s", r.Text)
				}
				first := spareOf(t, s)
				if tc.kill {
					first.w.cmd.Process.Kill()
					var info unix.Siginfo // wait for the death, leaving it for takeSpare to find
					if err := unix.Waitid(unix.P_PID, first.w.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
						t.Fatal(err)
					}
				}
				r = bash(t, s, "cat /tmp/mark 2>/dev/null || echo fresh")
				out, _ := streams(t, r)
				if r.ExitCode != 0 {
					t.Fatalf("second command: %s", r.Text)
				}
				if tier == TierSealed && strings.TrimSpace(out) != "fresh" {
					t.Errorf("second command saw %q in /tmp, want a fresh /tmp", strings.TrimSpace(out))
				}
				if tc.kill && first.w.cmd.ProcessState == nil {
					t.Error("the dead wrapper was not reaped")
				}
				last := spareOf(t, s)
				if last == first {
					t.Fatal("the used wrapper is still the ready one")
				}
				s.Close()
				if last.w.cmd.ProcessState == nil {
					t.Error("Close left the ready wrapper running")
				}
				if r, err := s.RunShell(t.Context(), "bash", []byte(`{"command": "true"}`)); err == nil {
					t.Errorf("a command after Close ran: %s", r.Text)
				}
			})
		}
	}
}
