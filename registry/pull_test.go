package registry

import (
	"context"
	"encoding/json"
	"github.com/capsulegate/capsulegate/internal/digest"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPullVerified: a runtime pull is checked against the trust policy's pin when there
// is one, else against what the registry states in its own records — a folder's
// .sha256, a Nexus listing's sha256 — never a download header alone.
func TestPullVerified(t *testing.T) {
	rig, arts := publishedRig(t, "")
	echo := digest.Hex(arts["echo"])
	ref := Ref{Name: "echo", Version: "1.0.0", Platform: PlatformLinuxX86_64}
	nexus := nexusAt(t, rig.base, "", nil)

	// A Nexus that serves the same bytes and headers but lists no sha256 (as Murmur's does),
	// or lists a wrong one.
	lister := func(sha string) *Nexus {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/v1/artifacts") {
				item := map[string]any{"name": "echo", "version": "1.0.0", "runtime": "wasm", "artifact_runtime": "tool"}
				if sha != "" {
					item["sha256"] = sha
				}
				json.NewEncoder(w).Encode([]any{item})
				return
			}
			rig.srv.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		return nexusAt(t, srv.URL, "", nil)
	}
	for _, tt := range []struct {
		name   string
		reg    Registry
		pinned string
		code   string
	}{
		{"folder, its .sha256", rig.srv.Local, "", ""},
		{"folder, the pin", rig.srv.Local, echo, ""},
		{"folder, another pin", rig.srv.Local, strings.Repeat("0", 64), CodePullDigest},
		{"Nexus, its listing", nexus, "", ""},
		{"Nexus, the pin", nexus, echo, ""},
		{"Nexus listing no sha256", lister(""), "", CodePullUnstated},
		{"Nexus listing no sha256, the pin", lister(""), echo, ""},
		{"Nexus listing a wrong sha256", lister(strings.Repeat("ab", 32)), "", CodePullDigest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			blob, arc, err := PullVerified(context.Background(), tt.reg, ref, tt.pinned)
			if code := codeOf(err); code != tt.code {
				t.Fatalf("code %q, want %q: %v", code, tt.code, err)
			}
			if err != nil {
				if tt.code == CodePullDigest && !strings.Contains(err.Error(), echo) {
					t.Fatalf("the refusal does not name the bytes' digest: %v", err)
				}
				return
			}
			if blob.SHA256 != echo || arc.Manifest().Name != "echo" {
				t.Fatalf("blob %s, archive %s", blob.SHA256, arc.Manifest().Name)
			}
		})
	}
}

func codeOf(err error) string {
	if err == nil {
		return ""
	}
	return asErrList(err)[0].Code
}
