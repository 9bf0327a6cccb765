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
		"MURMUR_CAPSULE_NAME": "forged", "MURMUR_INFERENCE_MODEL": "forged", "MURMUR_TEST_ALLOWED_VAR": "visible",
	}
	lookup := func(k string) (string, bool) { v, ok := host[k]; return v, ok }
	m, err := manifest.Parse([]byte("name: c\nversion: 1.0.0\ncapabilities:\n  env:\n    allow: [TZ, LANG, MISSING, MURMUR_SESSION_ID, MURMUR_CAPSULE_NAME, MURMUR_INFERENCE_MODEL, MURMUR_TEST_ALLOWED_VAR]\n"), "m.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The runtime's names never come from the host, even allowed; other MURMUR_ names do.
	got := GuestEnv(m, lookup, RuntimeEnv(m, "ses_1", "http://x/agents/c/"))
	want := []string{"TZ=UTC", "LANG=C.UTF-8", "MURMUR_TEST_ALLOWED_VAR=visible", "MURMUR_CAPSULE_NAME=c", "MURMUR_CAPSULE_VERSION=1.0.0", "MURMUR_SESSION_ID=ses_1", "MURMUR_CAPSULE_URL=http://x/agents/c/"}
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
	// A variable holding a driver's gateway key never passes, whatever its name.
	keyed, err := manifest.Parse([]byte("name: c\nversion: 1.0.0\nartifacts:\n  - {name: d, version: 1.0.0, runtime: driver, gateway: {endpoint: \"http://127.0.0.1:1\", api_key: sk-test-9}}\n"+
		"inference: {driver: {artifact: d}, model: m}\ncapabilities:\n  env:\n    allow: [TEST_KEY, PLAIN]\n"), "m.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TEST_KEY": "sk-test-9", "PLAIN": "p"}
	got = GuestEnv(keyed, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	if fmt.Sprint(got) != "[PLAIN=p]" {
		t.Errorf("env with a key-holding variable = %v", got)
	}
}
