package caddymodule

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/capsulegate/capsulegate/registry"
)

// TestSharedRegistry fetches one artifact twice (one blob, shared) and again after its
// archive was altered in the registry: the change is seen and refused, not served from
// what was verified before.
func TestSharedRegistry(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "reg")
	art := filepath.Join(t.TempDir(), "note")
	os.MkdirAll(art, 0o755)
	os.WriteFile(filepath.Join(art, "murmur.yaml"), []byte("name: note\nversion: 1.0.0\nruntime: skill\n"), 0o644)
	os.WriteFile(filepath.Join(art, "SKILL.md"), []byte("# note\n"), 0o644)
	data, _, err := registry.Pack(art)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := registry.NewLocal(root).Publish(ctx, data, ""); err != nil {
		t.Fatal(err)
	}
	s := newSharedRegistry(root)
	ref := registry.Ref{Name: "note", Version: "1.0.0"}
	a, err := s.Fetch(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Fetch(ctx, ref)
	if err != nil || a != b {
		t.Fatalf("second fetch: %p, %v; want the first blob %p", b, err, a)
	}
	zip := s.path("note", "1.0.0", "", ".mur.zip")
	altered := append([]byte(nil), a.Data...)
	altered[len(altered)-1] ^= 1
	if err := os.WriteFile(zip, altered, 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Fetch(ctx, ref); err == nil {
		t.Fatalf("altered archive served: %p", c)
	}
}
