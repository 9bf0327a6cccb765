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
		{"https refused", "https://registry.example.com", "", "", CodeRemote},
		{"oci from the environment refused", "", "oci://x/y", "", CodeRemote},
		{"any scheme refused", "s3://bucket", "", "", CodeRemote},
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
