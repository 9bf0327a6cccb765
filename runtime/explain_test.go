package runtime

import (
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/shell"
)

// TestExplain: the grants of a capsule with network rules, a shell tool and peers, on a
// host with and without the sealed tier: what each rule reaches, what the weaker tier
// cannot protect here, which peers its rules grant.
func TestExplain(t *testing.T) {
	m, err := manifest.Parse([]byte(`name: explained
version: 1.0.0
artifacts:
  - {name: echo, version: 1.0.0}
peers:
  - {name: near, url: "https://api.example.com/agents/near/"}
capabilities:
  network: {allow: ["https://api.example.com", "*.cdn.example.com:8443", "127.0.0.1:9000", localhost]}
  env: {allow: [TZ]}
  shell: {allow: [bash], min_tier: scoped}
  limits: {memory_bytes: 67108864, deadline_seconds: 30, peer_depth: 2, peer_calls: 4}
`), "murmur.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := &Staged{Manifest: m}
	for _, tc := range []struct {
		name        string
		host        Host
		tier        string
		unprotected bool
	}{
		{"sealed", Host{Tier: shell.TierReport{Tier: shell.TierSealed}}, shell.TierSealed, false},
		{"scoped", Host{Tier: shell.TierReport{Tier: shell.TierScoped, Reasons: []string{"sealed: no user namespaces"}}}, shell.TierScoped, true},
		{"not detected", Host{}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := Explain(s, tc.host)
			if g.Shell == nil || g.Shell.Tier != tc.tier || (len(g.Shell.Unprotected) > 0) != tc.unprotected || g.Shell.MinTier != "scoped" {
				t.Fatalf("shell: %+v", g.Shell)
			}
			if tc.unprotected && !strings.Contains(strings.Join(g.Shell.Unprotected, " "), "network") {
				t.Errorf("the scoped tier's unprotected: %v", g.Shell.Unprotected)
			}
		})
	}
	g := Explain(s, Host{})
	reach := map[string]Reach{}
	for _, r := range g.Reach {
		reach[r.Rule] = r
	}
	for rule, want := range map[string]string{
		"https://api.example.com": "https api.example.com 443 any public",
		"*.cdn.example.com:8443":  "http or https *.cdn.example.com 8443 any public",
		"127.0.0.1:9000":          "http or https 127.0.0.1 9000 this address only",
		"localhost":               "http or https localhost any loopback only",
	} {
		r, ok := reach[rule]
		got := strings.Join([]string{r.Scheme, r.Host, r.Port, r.Addresses}, " ")
		if !ok || !strings.HasPrefix(got, want) {
			t.Errorf("rule %s: %q, want %q… (%v)", rule, got, want, g.Reach)
		}
	}
	if len(g.Peers) != 1 || !g.Peers[0].Granted {
		t.Errorf("peers: %+v", g.Peers)
	}
	if g.Limits == nil || g.Limits.PeerDepth != 2 || g.Limits.PeerCalls != 4 || g.DeadlineSeconds != 30 {
		t.Errorf("limits: %+v, %v s", g.Limits, g.DeadlineSeconds)
	}
	if len(g.Artifacts) != 1 || g.Artifacts[0].Name != "echo" || g.Artifacts[0].Runs != "native" && g.Artifacts[0].Runs != "wasm" {
		t.Errorf("artifacts: %+v", g.Artifacts)
	}
}
