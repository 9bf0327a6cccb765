package registry

import (
	"testing"

	"github.com/capsulegate/capsulegate/errs"
)

func TestLocalDir(t *testing.T) {
	for _, tt := range []struct {
		name, configured, env, want, code string
	}{
		{"configured wins", "/flag", "/env", "/flag", ""},
		{"then the environment", "", "/env", "/env", ""},
		{"then the data folder", "", "", "/data/caddy/capsule/registry", ""},
		{"relative kept as given", "reg", "", "reg", ""},
		{"a remote registry is not a folder", "oci://x/y", "", "", CodeRemote},
		{"nor one from the environment", "", "nexus+https://x", "", CodeRemote},
	} {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == EnvDir {
					return tt.env
				}
				return ""
			}
			got, err := LocalDir(tt.configured, getenv, "/data/caddy")
			if errs.Code(err) != tt.code || got != tt.want {
				t.Errorf("LocalDir = %q, %v; want %q, code %q", got, err, tt.want, tt.code)
			}
		})
	}
}

func TestParseSource(t *testing.T) {
	for _, tt := range []struct {
		spec, kind, base string
		plain            bool
		code             string
	}{
		{"/srv/registry", KindLocal, "", false, ""},
		{"oci://ghcr.io/acme/capsules", KindOCI, "ghcr.io/acme/capsules", false, ""},
		{"oci://registry.example.com:5000/a/b/", KindOCI, "registry.example.com:5000/a/b", false, ""},
		{"oci+http://127.0.0.1:5000/capsules", KindOCI, "127.0.0.1:5000/capsules", true, ""},
		{"oci+http://[::1]:5000/capsules", KindOCI, "[::1]:5000/capsules", true, ""},
		{"nexus+https://nexus.example.com", KindNexus, "https://nexus.example.com", false, ""},
		{"nexus+https://example.com/nexus/", KindNexus, "https://example.com/nexus", false, ""},
		{"nexus+http://localhost:7800", KindNexus, "http://localhost:7800", true, ""},
		{"oci+http://registry.example.com/capsules", "", "", false, CodeRemote},
		{"nexus+http://10.0.0.1:7800", "", "", false, CodeRemote},
		{"oci://ghcr.io", "", "", false, CodeRemote},
		{"oci://ghcr.io/Acme", "", "", false, CodeRemote},
		{"oci://user:secret@ghcr.io/acme", "", "", false, CodeRemote},
		{"oci://user:secret@host:port/repo", "", "", false, CodeRemote},
		{"oci://user:secret%zz@host/repo", "", "", false, CodeRemote},
		{"nexus+https://user:secret x@host", "", "", false, CodeRemote},
		{"https://registry.example.com", "", "", false, CodeRemote},
		{"s3://bucket", "", "", false, CodeRemote},
		{"nexus+https://x.example.com/?a=b", "", "", false, CodeRemote},
	} {
		t.Run(tt.spec, func(t *testing.T) {
			src, err := ParseSource(tt.spec)
			if errs.Code(err) != tt.code {
				t.Fatalf("ParseSource(%q) = %v; want code %q", tt.spec, err, tt.code)
			}
			if err != nil {
				if got := err.Error(); len(got) == 0 || containsSecret(got) {
					t.Fatalf("message %q", got)
				}
				return
			}
			if src.Kind != tt.kind || src.Base != tt.base || src.PlainHTTP != tt.plain {
				t.Fatalf("ParseSource(%q) = %+v", tt.spec, src)
			}
		})
	}
}

func containsSecret(s string) bool {
	for i := 0; i+6 <= len(s); i++ {
		if s[i:i+6] == "secret" {
			return true
		}
	}
	return false
}
