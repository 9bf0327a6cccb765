//go:build linux

package shell

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// startBash starts a bash script in s as a long-running command.
func startBash(t *testing.T, ctx context.Context, s *Sandbox, script string, spec HarnessSpec) *Harness {
	t.Helper()
	spec.Path, spec.Args = lookPath("bash"), []string{"bash", "-c", script}
	p, err := s.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill("test over"); p.Wait() })
	return p
}

// TestStart runs long-running commands in each tier the host gives: stdout is read as
// it is written, stdin stays open for more, an interrupt reaches the command's own
// handler through the wrapper, a kill (or the context's end) stops it and says why, and
// the exit keeps the end of stderr.
func TestStart(t *testing.T) {
	for _, tier := range append(tiers(t), TierEnvOnly) {
		t.Run(tier, func(t *testing.T) {
			s := newSandbox(t, Config{tier: tier})
			ctx := context.Background()

			t.Run("conversation", func(t *testing.T) {
				p := startBash(t, ctx, s, `echo one; read x; echo "got $x"; echo oops >&2; exit 3`, HarnessSpec{KeepStdinOpen: true, Env: []string{"EXTRA=1"}})
				r := bufio.NewReader(p.Stdout)
				if l, _ := r.ReadString('\n'); l != "one\n" {
					t.Fatalf("first line %q", l)
				}
				// The command is waiting for this: its first line came before its input.
				if err := p.WriteStdin([]byte("hi\n")); err != nil {
					t.Fatal(err)
				}
				if l, _ := r.ReadString('\n'); l != "got hi\n" {
					t.Errorf("second line %q", l)
				}
				x := p.Wait()
				if x.Code != 3 || x.Killed != "" || !strings.Contains(x.StderrTail, "oops") {
					t.Errorf("exit %+v", x)
				}
			})
			t.Run("env and stdin", func(t *testing.T) {
				p := startBash(t, ctx, s, `echo "extra=$EXTRA"; cat`, HarnessSpec{Env: []string{"EXTRA=yes"}, Stdin: []byte("from stdin\n")})
				r := bufio.NewScanner(p.Stdout)
				var lines []string
				for r.Scan() {
					lines = append(lines, r.Text())
				}
				if strings.Join(lines, "|") != "extra=yes|from stdin" || p.Wait().Code != 0 {
					t.Errorf("lines %q, exit %+v", lines, p.Wait())
				}
			})
			t.Run("the plan's variables replace the session's", func(t *testing.T) {
				// HOME is the session's too. The command's environ is read raw (env(1), not a
				// shell, which would keep one of two entries itself): one HOME, the plan's.
				p, err := s.Start(ctx, HarnessSpec{Path: lookPath("env"), Args: []string{"env"}, Env: []string{"HOME=/plan-home"}})
				if err != nil {
					t.Fatal(err)
				}
				out, _ := io.ReadAll(p.Stdout)
				var homes []string
				for _, l := range strings.Split(string(out), "\n") {
					if strings.HasPrefix(l, "HOME=") {
						homes = append(homes, l)
					}
				}
				if len(homes) != 1 || homes[0] != "HOME=/plan-home" || p.Wait().Code != 0 {
					t.Errorf("HOME entries %q", homes)
				}
			})
			t.Run("interrupt", func(t *testing.T) {
				p := startBash(t, ctx, s, `trap 'echo interrupted; exit 7' INT; echo ready; while :; do sleep 0.05; done`, HarnessSpec{})
				r := bufio.NewReader(p.Stdout)
				if l, _ := r.ReadString('\n'); l != "ready\n" {
					t.Fatalf("first line %q", l)
				}
				if err := p.Interrupt(); err != nil {
					t.Fatal(err)
				}
				if l, _ := r.ReadString('\n'); l != "interrupted\n" {
					t.Errorf("after the interrupt %q", l)
				}
				if x := p.Wait(); x.Code != 7 || x.Killed != "" {
					t.Errorf("exit %+v", x)
				}
			})
			t.Run("kill", func(t *testing.T) {
				p := startBash(t, ctx, s, `echo ready; sleep 1000 & wait`, HarnessSpec{})
				r := bufio.NewReader(p.Stdout)
				if l, _ := r.ReadString('\n'); l != "ready\n" {
					t.Fatalf("first line %q", l)
				}
				p.Kill("the inactivity timeout")
				if x := p.Wait(); x.Killed != "the inactivity timeout" || x.Code == 0 {
					t.Errorf("exit %+v", x)
				}
			})
			t.Run("reach", func(t *testing.T) {
				allowed, other := echoServer(t), echoServer(t)
				script := `exec 3<>/dev/tcp/127.0.0.1/` + port(allowed) + ` && echo ping >&3 && read -t 10 x <&3 && echo "reached $x $NO_PROXY"
(exec 4<>/dev/tcp/127.0.0.1/` + port(other) + ` && echo leaked) 2>/dev/null || echo blocked`
				p := startBash(t, ctx, s, script, HarnessSpec{Reach: []string{allowed}})
				want := "reached ping 127.0.0.1,localhost\nblocked\n"
				if tier == TierEnvOnly {
					want = "reached ping 127.0.0.1,localhost\nleaked\n" // env-only confines no network (docs/sandbox.md)
				}
				wantOutput(t, p, want)
			})
			t.Run("reach the same port again", func(t *testing.T) {
				// A later run of the session may get a port an earlier one had.
				addr := echoServer(t)
				for range 2 {
					p := startBash(t, ctx, s, `exec 3<>/dev/tcp/127.0.0.1/`+port(addr)+` && echo again >&3 && read -t 10 x <&3 && echo "$x"`, HarnessSpec{Reach: []string{addr}})
					if out, _ := io.ReadAll(p.Stdout); string(out) != "again\n" {
						t.Errorf("output %q (exit %+v)", out, p.Wait())
					}
					p.Wait()
				}
			})
			t.Run("granted paths", func(t *testing.T) {
				rw, ro, other := t.TempDir(), t.TempDir(), t.TempDir()
				rwFile := filepath.Join(t.TempDir(), "creds.json")
				if err := os.Chmod(ro, 0o755); err != nil { // read by the sealed tier's uid 65534 as root
					t.Fatal(err)
				}
				for path, body := range map[string]string{rwFile: "old", filepath.Join(ro, "f"): "readable", filepath.Join(other, "f"): "secret"} {
					if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				script := `echo made > ` + rw + `/new && echo made
echo new > ` + rwFile + ` && echo rewritten
cat ` + ro + `/f; echo
(echo x > ` + ro + `/y) 2>/dev/null && echo wrote-ro || echo ro-refused
cat ` + other + `/f 2>/dev/null || echo other-hidden`
				p := startBash(t, ctx, s, script, HarnessSpec{ReadOnly: []string{ro}, ReadWrite: []string{rw, rwFile}})
				want := "made\nrewritten\nreadable\nro-refused\nother-hidden\n"
				if tier == TierEnvOnly {
					want = "made\nrewritten\nreadable\nwrote-ro\nsecret" // env-only confines no files (docs/sandbox.md)
				}
				wantOutput(t, p, want)
				for path, body := range map[string]string{filepath.Join(rw, "new"): "made\n", rwFile: "new\n"} {
					if b, err := os.ReadFile(path); err != nil || string(b) != body {
						t.Errorf("%s holds %q (%v), want %q", path, b, err, body)
					}
				}
			})
			t.Run("context ends", func(t *testing.T) {
				cctx, cancel := context.WithCancel(ctx)
				p := startBash(t, cctx, s, `echo ready; sleep 1000`, HarnessSpec{})
				r := bufio.NewReader(p.Stdout)
				if l, _ := r.ReadString('\n'); l != "ready\n" {
					t.Fatalf("first line %q", l)
				}
				cancel()
				if x := p.Wait(); !strings.Contains(x.Killed, "canceled") {
					t.Errorf("exit %+v", x)
				}
			})
		})
	}
}

// wantOutput reads all of p's stdout and compares it with want.
func wantOutput(t *testing.T, p *Harness, want string) {
	t.Helper()
	if out, _ := io.ReadAll(p.Stdout); string(out) != want {
		t.Errorf("output %q, want %q (stderr %q)", out, want, p.Wait().StderrTail)
	}
}

// echoServer listens on 127.0.0.1 and echoes each line back; it returns its address.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}
