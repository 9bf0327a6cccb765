//go:build linux

package shell

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// BenchmarkSpawn times one `true` per op, side by side in one run: a bare exec, and the
// shell tool's own path (Sandbox.RunShell) in each tier this host gives, with a minimal
// policy (no network, a fresh temporary workdir). Ops follow each other at once, so on
// a busy machine this is the throughput of spawns; BenchmarkSpawnPaced is the latency of
// one (docs/benchmarks.md "Sandboxed shell spawn"). SPAWN_BENCH_WRAPPER names another
// binary to run as the wrapper (Config.WrapperPath): the built helper
// (cmd/capsulegate-sandbox), or a built gateway, whose package initialisation the test
// binary does not have.
func BenchmarkSpawn(b *testing.B) { benchSpawn(b, 0) }

// BenchmarkSpawnPaced is BenchmarkSpawn with an untimed pause between ops, as a model
// thinks between tool calls: it times one spawn's latency rather than how many fit in a
// second, and lets the wrapper started for the next command get ready.
func BenchmarkSpawnPaced(b *testing.B) { benchSpawn(b, 50*time.Millisecond) }

func benchSpawn(b *testing.B, pause time.Duration) {
	// think pauses between ops with the timer stopped; the pause models the caller and
	// orders nothing.
	think := func(b *testing.B) {
		if pause > 0 {
			b.StopTimer()
			time.Sleep(pause)
			b.StartTimer()
		}
	}
	b.Run("bare", func(b *testing.B) {
		for range b.N { // not b.Loop, which times think's pauses too
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
			think(b)
		}
	})
	host := DetectTier()
	for _, tier := range []string{TierSealed, TierScoped, TierEnvOnly} {
		b.Run(tier, func(b *testing.B) {
			if rank(host.Tier) < rank(tier) {
				b.Skipf("this host gives tier %q: %s", host.Tier, strings.Join(host.Reasons, "; "))
			}
			s, err := New(Config{Workdir: b.TempDir(), Records: b.TempDir(), Allow: []string{"true"}, tier: tier,
				WrapperPath: os.Getenv("SPAWN_BENCH_WRAPPER")})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if s.Tier() != tier {
				b.Fatalf("tier %q, want %q", s.Tier(), tier)
			}
			ctx := context.Background()
			in := []byte(`{"command": "true"}`)
			b.ResetTimer()
			for range b.N {
				r, err := s.RunShell(ctx, "true", in)
				if err != nil {
					b.Fatal(err)
				}
				if r.ExitCode != 0 || r.Status != "passed" {
					b.Fatalf("exit %d, status %s: %s", r.ExitCode, r.Status, r.Text)
				}
				think(b)
			}
		})
	}
}
