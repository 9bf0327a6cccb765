package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/registry"
)

func newEnv(terminal bool, vars map[string]string) (*Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &Env{Stdout: &out, Stderr: &errb, Terminal: terminal, lookup: func(k string) string { return vars[k] }}, &out, &errb
}

// TestRegistrySource checks the wiring to registry.Choose (whose own test has the rule):
// the flag, the environment, Caddy's data folder; a URL of no kind served is refused.
func TestRegistrySource(t *testing.T) {
	tests := []struct {
		flag string
		vars map[string]string
		want string
		code string
	}{
		{"/flag", map[string]string{"CAPSULE_REGISTRY": "/env"}, "/flag", ""},
		{"", map[string]string{"CAPSULE_REGISTRY": "/env", "HOME": "/h"}, "/env", ""},
		{"", map[string]string{"HOME": "/h"}, "/data/caddy/capsule/registry", ""},
		{"", map[string]string{"CAPSULE_REGISTRY": "oci://ghcr.io/acme"}, "oci://ghcr.io/acme", ""},
		{"https://registry.example.com", nil, "", registry.CodeRemote},
	}
	for _, tt := range tests {
		e, _, _ := newEnv(false, tt.vars)
		e.DataDir = "/data/caddy"
		src, err := e.RegistrySource(tt.flag)
		got := src.Dir
		if src.Remote() {
			got = src.Spec
		}
		if errs.Code(err) != tt.code || got != tt.want {
			t.Errorf("%q %v: got %q, %v; want %q, code %q", tt.flag, tt.vars, got, err, tt.want, tt.code)
		}
	}
}

// writeExample lays out an artifact folder and a capsule using it.
func writeExample(t *testing.T) (artifactDir, manifestPath string) {
	t.Helper()
	root := t.TempDir()
	artifactDir = filepath.Join(root, "greeting")
	os.MkdirAll(artifactDir, 0o755)
	os.WriteFile(filepath.Join(artifactDir, "murmur.yaml"), []byte("name: greeting\nversion: 1.0.0\nruntime: skill\n"), 0o644)
	os.WriteFile(filepath.Join(artifactDir, "skill.md"), []byte("# hi\n"), 0o644)
	capDir := filepath.Join(root, "cap")
	os.MkdirAll(capDir, 0o755)
	manifestPath = filepath.Join(capDir, "murmur.yaml")
	os.WriteFile(manifestPath, []byte("name: cap\nversion: 1.0.0\nartifacts:\n  - {name: greeting, version: 1.0.0, runtime: skill}\nunknwon: 1\n"), 0o644)
	return artifactDir, manifestPath
}

func TestCommandsEndToEnd(t *testing.T) {
	ctx := context.Background()
	artifactDir, manifestPath := writeExample(t)
	reg := filepath.Join(t.TempDir(), "reg")
	zipPath := filepath.Join(t.TempDir(), "g.mur.zip")
	c := Common{Registry: reg}
	cj := Common{Registry: reg, JSON: true}

	e, out, _ := newEnv(false, nil)
	if code := Pack(ctx, e, cj, artifactDir, zipPath); code != ExitOK {
		t.Fatalf("pack: %d %s", code, out)
	}
	var packed struct {
		OK     bool   `json:"ok"`
		SHA256 string `json:"sha256"`
		Output string `json:"output"`
	}
	if err := json.Unmarshal(out.Bytes(), &packed); err != nil || !packed.OK || len(packed.SHA256) != 64 || packed.Output != zipPath {
		t.Fatalf("pack --json: %s (%v)", out, err)
	}

	e, out, errb := newEnv(false, nil)
	if code := Publish(ctx, e, c, zipPath, ""); code != ExitOK {
		t.Fatalf("publish: %d %s", code, errb)
	}
	if !strings.Contains(out.String(), packed.SHA256) {
		t.Errorf("publish output lacks the hash: %s", out)
	}

	// Install on a terminal: per-artifact lines plus a bar that is cleared at the end;
	// the unknown key is warned about with the nearest known key.
	e, out, errb = newEnv(true, nil)
	if code := Install(ctx, e, c, manifestPath); code != ExitOK {
		t.Fatalf("install: %s", errb)
	}
	for _, want := range []string{"W-MAN-001", `"unknwon"`, "[1/1] pinned   greeting 1.0.0", "[###", "\r\033[K"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("install stderr lacks %q:\n%q", want, errb)
		}
	}
	if !strings.Contains(out.String(), "lock written") {
		t.Errorf("install stdout: %s", out)
	}

	e, out, errb = newEnv(false, nil)
	if code := Verify(ctx, e, cj, manifestPath); code != ExitOK {
		t.Fatalf("verify: %s %s", out, errb)
	}
	if strings.Contains(errb.String(), "\033") {
		t.Errorf("escape codes on a non-terminal: %q", errb)
	}

	// A refusal in --json mode is one object with the code, position and fix.
	os.WriteFile(manifestPath, []byte("name: Cap\nversion: latest\n"), 0o644)
	e, out, _ = newEnv(false, nil)
	if code := Verify(ctx, e, cj, manifestPath); code != ExitRefused {
		t.Fatalf("verify of a bad manifest exited %d", code)
	}
	var refused struct {
		OK     bool          `json:"ok"`
		Errors []errorObject `json:"errors"`
	}
	if err := json.Unmarshal(out.Bytes(), &refused); err != nil || refused.OK || len(refused.Errors) != 2 {
		t.Fatalf("refusal --json: %s (%v)", out, err)
	}
	if e := refused.Errors[0]; e.Code != "E-MAN-004" || !strings.HasSuffix(e.Position, "murmur.yaml:1:7") || e.Path != "name" || e.Fix == "" {
		t.Errorf("first error = %+v", e)
	}
}
