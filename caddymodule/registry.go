package caddymodule

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/capsulegate/capsulegate/internal/samefile"
	"github.com/capsulegate/capsulegate/registry"
)

// sharedRegistry is the app's local registry as its capsules see it: an artifact many
// capsules name is read and hashed once, and every capsule gets the same bytes. A later
// Fetch still reads the registry's files and compares them with what it verified, so a
// changed or replaced archive is fetched (and verified) afresh.
type sharedRegistry struct {
	local *registry.Local
	mu    sync.Mutex
	blobs map[registry.Ref]sharedBlob
}

// sharedBlob is a verified blob and the .sha256 file it was verified against.
type sharedBlob struct {
	blob    *registry.Blob
	sidecar []byte
}

func newSharedRegistry(root string) *sharedRegistry {
	return &sharedRegistry{local: registry.NewLocal(root), blobs: map[registry.Ref]sharedBlob{}}
}

// VerifiesSHA256 marks the registry as registry.Verifying: a blob it returns was
// verified by the Local underneath, its bytes unchanged since.
func (s *sharedRegistry) VerifiesSHA256() {}

// Fetch returns the blob verified before for ref when the registry's files still hold
// it, else the Local's answer.
func (s *sharedRegistry) Fetch(ctx context.Context, ref registry.Ref) (*registry.Blob, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	prev, ok := s.blobs[ref]
	s.mu.Unlock()
	if ok && s.unchanged(ref, prev) {
		return prev.blob, nil
	}
	b, err := s.local.Fetch(ctx, ref)
	if err != nil {
		return nil, err
	}
	// The sidecar read after the fetch: should it have changed in between, the next
	// Fetch finds it differs and fetches again.
	sidecar, err := os.ReadFile(s.path(b.Name, b.Version, b.Platform, ".sha256"))
	if err == nil {
		s.mu.Lock()
		s.blobs[ref] = sharedBlob{blob: b, sidecar: sidecar}
		s.mu.Unlock()
	}
	return b, nil
}

// unchanged reports whether the Local would answer ref with prev now: no file for a
// better platform has appeared, and the archive and its .sha256 hold the same bytes.
func (s *sharedRegistry) unchanged(ref registry.Ref, prev sharedBlob) bool {
	if ref.Platform != "" && prev.blob.Platform == "" {
		if _, err := os.Stat(s.path(ref.Name, ref.Version, ref.Platform, ".mur.zip")); !errors.Is(err, fs.ErrNotExist) {
			return false
		}
	}
	b := prev.blob
	if same, err := samefile.Holds(s.path(b.Name, b.Version, b.Platform, ".sha256"), prev.sidecar); err != nil || !same {
		return false
	}
	same, err := samefile.Holds(s.path(b.Name, b.Version, b.Platform, ".mur.zip"), b.Data)
	return err == nil && same
}

// path is a file of the registry's layout (docs/reference/archive.md "The local
// registry"): <root>/<name>/<version>/<name>-<version>[-<platform>]<ext>.
func (s *sharedRegistry) path(name, version, platform, ext string) string {
	base := name + "-" + version
	if platform != "" {
		base += "-" + platform
	}
	return filepath.Join(s.local.Root, name, version, base+ext)
}
