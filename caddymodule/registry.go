package caddymodule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/filesum"
	"github.com/capsulegate/capsulegate/internal/samefile"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime"
)

// sharedRegistry is the app's local registry as its capsules see it: an artifact many
// capsules name is read and hashed once, and every capsule gets the same bytes. A later
// Fetch still reads the registry's files and compares them with what it verified, so a
// changed or replaced archive is fetched (and verified) afresh.
type sharedRegistry struct {
	local *registry.Local
	sums  *filesum.Cache // the archives' and their .sha256 files' sums, by file identity
	mu    sync.Mutex
	blobs map[registry.Ref]sharedBlob
}

// sharedBlob is a verified blob and the .sha256 file it was verified against.
type sharedBlob struct {
	blob       *registry.Blob
	sidecar    []byte
	sidecarSum string
}

func newSharedRegistry(root string) *sharedRegistry {
	return &sharedRegistry{local: registry.NewLocal(root), sums: filesum.New(), blobs: map[registry.Ref]sharedBlob{}}
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
	since := time.Now()
	b, err := s.local.Fetch(ctx, ref)
	if err != nil {
		return nil, err
	}
	// The sidecar read after the fetch: should it have changed in between, the next
	// Fetch finds it differs and fetches again.
	sidecarPath := s.path(b.Name, b.Version, b.Platform, ".sha256")
	sidecar, err := os.ReadFile(sidecarPath)
	if err == nil {
		sum := sha256.Sum256(sidecar)
		sb := sharedBlob{blob: b, sidecar: sidecar, sidecarSum: hex.EncodeToString(sum[:])}
		// Both files read from since on: recorded only if unchanged since well before.
		s.sums.Record(s.path(b.Name, b.Version, b.Platform, ".mur.zip"), b.SHA256, since)
		s.sums.Record(sidecarPath, sb.sidecarSum, since)
		s.mu.Lock()
		s.blobs[ref] = sb
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
	zip, sidecar := s.path(b.Name, b.Version, b.Platform, ".mur.zip"), s.path(b.Name, b.Version, b.Platform, ".sha256")
	if z, ok := s.sums.Lookup(zip); ok && z == b.SHA256 {
		if c, ok := s.sums.Lookup(sidecar); ok && c == prev.sidecarSum {
			return true // neither file changed since they were verified
		}
	}
	if same, err := samefile.Holds(sidecar, prev.sidecar); err != nil || !same {
		return false
	}
	same, err := samefile.Holds(zip, b.Data)
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

// openRegistry returns the registry the app's capsules stage from: the local folder
// shared by its capsules, or a remote registry with the app's credentials and its cache.
func (a *App) openRegistry(src registry.Source) (registry.Registry, error) {
	if !src.Remote() {
		return newSharedRegistry(src.Dir), nil
	}
	cache, err := registry.OpenCache(a.RegistryCache, a.RegistryCacheSize)
	if err != nil {
		return nil, err
	}
	return registry.Open(src, registry.OpenOptions{Auth: a.registryAuth(), Cache: cache})
}

// holdArtifacts keeps a staged capsule's artifacts in the registry's cache for as long
// as the capsule is served; the returned release lets them go (a no-op without a cache).
func holdArtifacts(reg registry.Registry, staged []registry.Resolved) (func(), error) {
	c, ok := reg.(registry.Caching)
	if !ok {
		return func() {}, nil
	}
	sums := make([]string, 0, len(staged))
	for _, a := range staged {
		if a.Version != "" {
			sums = append(sums, a.SHA256)
		}
	}
	return c.Cache().Hold(sums)
}

// openPulls opens the trust policy's registries, with the app's credentials and its
// artifact cache, where runtime pulls keep their bytes.
func (a *App) openPulls() (*runtime.PullPolicy, error) {
	rp := a.RuntimePulls
	if rp == nil {
		return nil, nil
	}
	cache, err := registry.OpenCache(a.RegistryCache, a.RegistryCacheSize)
	if err != nil {
		return nil, err
	}
	policy := &runtime.PullPolicy{Pins: map[string]string{}, Cache: cache}
	for k, v := range rp.Pins {
		policy.Pins[k] = strings.TrimPrefix(v, "sha256:")
	}
	for _, spec := range rp.Registries {
		src, err := registry.ParseSource(spec)
		if err != nil {
			return nil, err
		}
		var reg registry.Registry
		if !src.Remote() {
			dir, err := filepath.Abs(src.Dir)
			if err != nil {
				return nil, errs.Wrap(err, CodeAppConfig, "caddy", fmt.Sprintf("cannot resolve the runtime_pulls registry %q", spec), "use an absolute path")
			}
			reg = registry.NewLocal(dir)
		} else if reg, err = registry.Open(src, registry.OpenOptions{Auth: a.registryAuth()}); err != nil {
			return nil, err
		}
		policy.Sources = append(policy.Sources, runtime.PullSource{Spec: src.Spec, Registry: reg})
	}
	return policy, nil
}

// registryAuth is the app's registry_auth as the registries take it (placeholders
// replaced in Provision).
func (a *App) registryAuth() registry.Auth {
	ra := a.RegistryAuth
	if ra == nil {
		return registry.Auth{}
	}
	return registry.Auth{Token: ra.Token, Username: ra.Username, Password: ra.Password, DockerConfig: ra.DockerConfig}
}
