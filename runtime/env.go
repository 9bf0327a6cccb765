package runtime

import (
	"strings"

	"github.com/capsulegate/capsulegate/manifest"
)

// GuestEnv builds a guest's environment (docs/reference/guest-abi.md "Environment"): it
// starts empty; then the names of env.allow that are set on the host and not
// credential-shaped, in manifest order; then the runtime's own values (KEY=VALUE), which
// replace anything of the same name. Host values of the names the runtime sets itself
// (reservedEnv: MURMUR_CAPSULE_*, MURMUR_SESSION_ID, MURMUR_INFERENCE_*) never pass
// through env.allow, even where the runtime sets none for this guest, so no host value
// can pose as the runtime's; other MURMUR_ names pass like any. A host value that holds a driver's
// gateway key is never passed either, whatever its variable is called: keys stay in the
// host (docs/reference/guest-abi.md "Gateway keys and retries").
func GuestEnv(m *manifest.Manifest, lookup func(string) (string, bool), own []string) []string {
	keys := map[string]bool{}
	for _, a := range m.Artifacts {
		if a.Gateway != nil && a.Gateway.APIKey != "" {
			keys[a.Gateway.APIKey] = true
		}
	}
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	caps := m.Capabilities
	for _, name := range caps.Env.Allow {
		if reservedEnv(name) || manifest.CredentialShaped(name, caps.Shell.StripEnv) {
			continue
		}
		if v, ok := lookup(name); ok && !holdsKey(v, keys) {
			set(name, v)
		}
	}
	for _, kv := range own {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	return out
}

// RuntimeEnv returns the runtime-owned variables every guest of the capsule sees.
func RuntimeEnv(m *manifest.Manifest, sessionID, capsuleURL string) []string {
	return []string{
		"MURMUR_CAPSULE_NAME=" + m.Name,
		"MURMUR_CAPSULE_VERSION=" + m.Version,
		"MURMUR_SESSION_ID=" + sessionID,
		"MURMUR_CAPSULE_URL=" + capsuleURL,
	}
}

// reservedEnv reports whether name is one the runtime sets (RuntimeEnv, and a driver's
// MURMUR_INFERENCE_* values): never taken from the host.
func reservedEnv(name string) bool {
	return name == "MURMUR_SESSION_ID" || strings.HasPrefix(name, "MURMUR_CAPSULE_") || strings.HasPrefix(name, "MURMUR_INFERENCE_")
}

// perSessionEnv names the runtime's variables whose values differ per session: guests of
// every session share one init snapshot, and each gets its own value (runtime/wasm
// sessionenv.go).
var perSessionEnv = []string{"MURMUR_SESSION_ID"}

// holdsKey reports whether v contains one of the gateway keys.
func holdsKey(v string, keys map[string]bool) bool {
	for k := range keys {
		if strings.Contains(v, k) {
			return true
		}
	}
	return false
}
