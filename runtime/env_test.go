package runtime

import (
	"fmt"
	"testing"

	"github.com/capsulegate/capsulegate/manifest"
)

func TestGuestEnv(t *testing.T) {
	host := map[string]string{
		"LANG": "C.UTF-8", "TZ": "UTC", "SECRET_API_KEY": "s1", "GITHUB_TOKEN": "s2",
		"CORP_ID": "c", "MURMUR_SESSION_ID": "forged", "UNLISTED": "u",
	}
	lookup := func(k string) (string, bool) { v, ok := host[k]; return v, ok }
	m, err := manifest.Parse([]byte("name: c\nversion: 1.0.0\ncapabilities:\n  env:\n    allow: [TZ, LANG, MISSING, MURMUR_SESSION_ID]\n"), "m.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := GuestEnv(m, lookup, RuntimeEnv(m, "ses_1", "http://x/agents/c/"))
	want := []string{"TZ=UTC", "LANG=C.UTF-8", "MURMUR_CAPSULE_NAME=c", "MURMUR_CAPSULE_VERSION=1.0.0", "MURMUR_SESSION_ID=ses_1", "MURMUR_CAPSULE_URL=http://x/agents/c/"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("env = %v\nwant  %v", got, want)
	}
	// Credential-shaped names never pass, even if a manifest got past validation.
	m.Capabilities.Env.Allow = append(m.Capabilities.Env.Allow, "SECRET_API_KEY", "GITHUB_TOKEN")
	for _, kv := range GuestEnv(m, lookup, nil) {
		if kv == "SECRET_API_KEY=s1" || kv == "GITHUB_TOKEN=s2" {
			t.Errorf("credential passed: %s", kv)
		}
	}
}
