//go:build linux

package shell

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
)

// TestDetectTier reports the host; on this project's CI machine it must be sealed, so
// nothing else here skips silently.
func TestDetectTier(t *testing.T) {
	r := DetectTier()
	t.Logf("tier %s, Landlock ABI %d, seccomp %v, namespaces %v, reasons %q", r.Tier, r.Landlock, r.Seccomp, r.Namespaces, r.Reasons)
	if rank(r.Tier) == 0 {
		t.Fatalf("unknown tier %q", r.Tier)
	}
	if r.Tier == TierSealed && (len(r.Reasons) > 0 || !r.Namespaces || r.Landlock < 1 || !r.Seccomp) {
		t.Errorf("sealed with %+v", r)
	}
	if r.Tier != TierSealed && len(r.Reasons) == 0 {
		t.Error("a weaker tier without a reason")
	}
}

func simulated(r TierReport) func(string, string, string) TierReport {
	return func(string, string, string) TierReport { return r }
}

// TestMinTier: a capsule demanding more than the host gives is refused with both tiers,
// the reason and the fix; never a silent downgrade.
func TestMinTier(t *testing.T) {
	scoped := TierReport{Tier: TierScoped, Landlock: 7, Seccomp: true, Reasons: []string{"sealed: simulated: user namespaces are disabled"}}
	envOnly := TierReport{Tier: TierEnvOnly, Reasons: []string{"sealed and scoped: simulated: no Landlock"}}
	for _, tc := range []struct {
		host    TierReport
		min     string
		refused bool
	}{
		{scoped, TierSealed, true},
		{scoped, TierScoped, false},
		{scoped, TierEnvOnly, false},
		{scoped, "", false},
		{envOnly, TierScoped, true},
		{envOnly, TierSealed, true},
		{TierReport{Tier: TierSealed}, TierSealed, false},
	} {
		s, err := New(Config{Workdir: t.TempDir(), Records: t.TempDir(), MinTier: tc.min, probe: simulated(tc.host)})
		if !tc.refused {
			if err != nil {
				t.Errorf("host %s, min %q: %v", tc.host.Tier, tc.min, err)
				continue
			}
			if s.Tier() != tc.host.Tier {
				t.Errorf("tier %q, want %q", s.Tier(), tc.host.Tier)
			}
			s.Close()
			continue
		}
		if err == nil {
			s.Close()
			t.Errorf("host %s, min %q: not refused", tc.host.Tier, tc.min)
			continue
		}
		e := errs.Find(err, CodeMinTier)
		if e == nil {
			t.Errorf("host %s, min %q: %v lacks %s", tc.host.Tier, tc.min, err, CodeMinTier)
			continue
		}
		for _, want := range []string{`"` + tc.min + `"`, `"` + tc.host.Tier + `"`, "simulated", "fix: "} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q lacks %q", err, want)
			}
		}
	}
	// A refusal leaves nothing in the records.
	rec := t.TempDir()
	if _, err := New(Config{Workdir: t.TempDir(), Records: rec, MinTier: TierSealed, probe: simulated(envOnly)}); err == nil {
		t.Fatal("not refused")
	}
	if entries, _ := os.ReadDir(rec); len(entries) != 0 {
		t.Errorf("a refusal left %v", entries)
	}
}

func TestConfigRefusals(t *testing.T) {
	work, rec := t.TempDir(), t.TempDir()
	host := simulated(TierReport{Tier: TierSealed})
	for name, cfg := range map[string]Config{
		"unknown tier":      {Workdir: work, Records: rec, MinTier: "paranoid"},
		"relative workdir":  {Workdir: "work", Records: rec},
		"missing records":   {Workdir: work, Records: filepath.Join(rec, "nope")},
		"records in work":   {Workdir: work, Records: work},
		"bad proxy address": {Workdir: work, Records: rec, ProxyAddr: "localhost"},
	} {
		cfg.probe = host
		if _, err := New(cfg); errs.Code(err) != CodeConfig {
			t.Errorf("%s: %v, want %s", name, err, CodeConfig)
		}
	}
}

func codes(es []*errs.Error) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Code)
	}
	return out
}

// TestWarnings: W-SEC-003 when an interpreter may use the network and the tier cannot
// confine its connections; W-SEC-001 for any tier below sealed; W-SEC-002 for a missing
// binary.
func TestWarnings(t *testing.T) {
	envOnly := TierReport{Tier: TierEnvOnly, Reasons: []string{"simulated"}}
	scoped := TierReport{Tier: TierScoped, Landlock: 7, Seccomp: true, Reasons: []string{"simulated"}}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host  TierReport
		allow []string
		proxy string
		want  []string
	}{
		{envOnly, []string{"git", "bash"}, "127.0.0.1:9", []string{WarnWeakTier, WarnNetwork}},
		{envOnly, []string{"python3"}, "127.0.0.1:9", []string{WarnWeakTier, WarnNetwork}},
		{envOnly, []string{"bash"}, "", []string{WarnWeakTier}},
		{envOnly, []string{"git"}, "127.0.0.1:9", []string{WarnWeakTier}},
		{scoped, []string{"bash"}, "127.0.0.1:9", []string{WarnWeakTier}},
		{TierReport{Tier: TierSealed}, []string{"bash"}, "127.0.0.1:9", nil},
		{TierReport{Tier: TierSealed}, []string{"bash", "no-such-binary-5e1"}, "", []string{WarnNoBinary}},
	} {
		// The test binary as a configured wrapper: no W-SEC-004 (TestChooseWrapper has it).
		s, err := New(Config{Workdir: t.TempDir(), Records: t.TempDir(), Allow: tc.allow, ProxyAddr: tc.proxy, probe: simulated(tc.host), WrapperPath: self})
		if err != nil {
			t.Fatal(err)
		}
		ws := s.Warnings()
		s.Close()
		if got := codes(ws); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %v proxy %q: %v, want %v", tc.host.Tier, tc.allow, tc.proxy, ws, tc.want)
		}
		for _, w := range ws {
			if w.Code == WarnNetwork && (!strings.Contains(w.Msg, "env-only") || w.Fix == "") {
				t.Errorf("W-SEC-003 does not say why and how to fix: %v", w)
			}
		}
	}
}

func TestSeccompFilterAssembles(t *testing.T) {
	for _, scoped := range []bool{false, true} {
		for _, noUnix := range []bool{false, true} {
			f, err := seccompFilter(scoped, noUnix)
			if err != nil || len(f) == 0 || len(f) > 4096 {
				t.Errorf("scoped=%v noUnix=%v: %d instructions, %v", scoped, noUnix, len(f), err)
			}
		}
	}
}
