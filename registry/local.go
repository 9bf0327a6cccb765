package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/capsulegate/capsulegate/internal/atomicfile"
	"github.com/capsulegate/capsulegate/internal/digest"
	"github.com/capsulegate/capsulegate/manifest"
)

// Ref names what to fetch.
type Ref struct {
	Name, Version string
	Platform      string // "" = any: only a platform-independent file will do
}

func (r Ref) String() string {
	if r.Platform == "" {
		return r.Name + "@" + r.Version
	}
	return r.Name + "@" + r.Version + " (" + r.Platform + ")"
}

// Blob is an artifact's bytes as a registry serves them.
type Blob struct {
	Name, Version string
	Platform      string // "" for a platform-independent file
	Data          []byte
	SHA256        string // lowercase hex, as the registry states it
	// Archive is the archive Data stands for when Data is not itself a .mur.zip: a plain
	// wasm component from an OCI registry, read as a tool artifact. nil otherwise.
	Archive *Archive
}

// Registry resolves (name, version, platform) to bytes and their sha256
// (docs/reference/archive.md "The local registry").
// A registry verifies the bytes against its own stated hash before answering.
type Registry interface {
	Fetch(ctx context.Context, ref Ref) (*Blob, error)
}

// Verifying is a Registry whose every Fetch has hashed the bytes it returns and found
// them to match Blob.SHA256, so Resolve need not hash them a second time: a gateway
// staging thousands of capsules naming one artifact then hashes it at most once each.
type Verifying interface {
	Registry
	VerifiesSHA256()
}

// VerifiesSHA256 marks Local as Verifying: fetchOnce checks every file it returns
// against its .sha256.
func (l *Local) VerifiesSHA256() {}

// Meta is the <name>-<version>[-<platform>].meta.json beside a published archive.
type Meta struct {
	Name           string        `json:"name"`
	Version        string        `json:"version"`
	Runtime        manifest.Role `json:"runtime"`
	Implementation string        `json:"implementation,omitempty"`
	Platform       string        `json:"platform,omitempty"`
	SHA256         string        `json:"sha256"`
	Size           int64         `json:"size"`
	Description    string        `json:"description,omitempty"`
	Tags           []string      `json:"tags,omitempty"`
	Published      time.Time     `json:"published"`
}

// MaxArchiveFileBytes bounds an archive file read from disk: the decompressed cap plus room
// for zip headers of stored entries.
const MaxArchiveFileBytes = DefaultMaxBytes + 32<<20

// Local is a registry in a directory (docs/reference/archive.md "Folder layout"):
// <Root>/<name>/<version>/<name>-<version>[-<platform>].{mur.zip,sha256,meta.json}.
type Local struct {
	Root string
	now  func() time.Time
}

// NewLocal returns the local registry rooted at root; the folder is created on the
// first Publish.
func NewLocal(root string) *Local { return &Local{Root: root} }

func fileBase(name, version, platform string) string {
	if platform == "" {
		return name + "-" + version
	}
	return name + "-" + version + "-" + platform
}

func checkRef(ref Ref) error {
	if !manifest.ValidName(ref.Name) {
		return refuse(CodeArtifactName, fmt.Sprintf("artifact name %q breaks the naming rule: [a-z0-9-], 1–100 characters, no leading or trailing '-'", ref.Name),
			"use the artifact's exact name")
	}
	if why := manifest.CheckVersion(ref.Version); why != "" {
		return refuse(CodeArtifactVersion, fmt.Sprintf("artifact %s: version %q is not usable: %s", ref.Name, ref.Version, why),
			"ask for a concrete version such as 1.0.0")
	}
	if ref.Platform != "" && !ValidPlatform(ref.Platform) {
		return badPlatform(ref.Platform)
	}
	return nil
}

func badPlatform(p string) error {
	return refuse(CodePlatform, fmt.Sprintf("platform %q is not one of %s", p, strings.Join(Platforms(), ", ")), "use one of the supported platform names")
}

func (l *Local) storeErr(err error, what string) error {
	return refuseWrap(err, CodeStore, fmt.Sprintf("registry %s: %s", l.Root, what), "check that the registry folder exists and its permissions")
}

// Fetch returns the archive for ref: the platform-specific file when ref.Platform has
// one, else the platform-independent file. The bytes are checked against the registry's
// own .sha256.
func (l *Local) Fetch(ctx context.Context, ref Ref) (*Blob, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	// A publisher may finish between a miss and its explanation; published files never
	// go away, so looking again settles it.
	for range 3 {
		b, err := l.fetchOnce(ref)
		if b != nil || err != nil {
			return b, err
		}
		if !l.hasFileFor(ref) {
			break
		}
	}
	return nil, l.notFound(ref)
}

// candidates lists the platforms whose file can answer ref, best first.
func (r Ref) candidates() []string {
	if r.Platform == "" {
		return []string{""}
	}
	return []string{r.Platform, ""}
}

func (l *Local) hasFileFor(ref Ref) bool {
	for _, p := range ref.candidates() {
		if fileExists(filepath.Join(l.Root, ref.Name, ref.Version, fileBase(ref.Name, ref.Version, p)+".mur.zip")) {
			return true
		}
	}
	return false
}

// fetchOnce returns the best file for ref, or nil, nil if there is none.
func (l *Local) fetchOnce(ref Ref) (*Blob, error) {
	vdir := filepath.Join(l.Root, ref.Name, ref.Version)
	for _, p := range ref.candidates() {
		base := fileBase(ref.Name, ref.Version, p)
		zipPath := filepath.Join(vdir, base+".mur.zip")
		data, err := readCapped(zipPath, MaxArchiveFileBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, l.storeErr(err, "cannot read "+zipPath)
		}
		want, err := readHashFile(filepath.Join(vdir, base+".sha256"))
		if err != nil {
			return nil, err
		}
		if got := digest.Hex(data); got != want {
			return nil, refuse(CodeHashMismatch,
				fmt.Sprintf("artifact %s: %s hashes to sha256 %s, but the registry states %s", ref, zipPath, got, want),
				"the registry copy is damaged or was altered: publish the artifact again from a trusted build")
		}
		return &Blob{Name: ref.Name, Version: ref.Version, Platform: p, Data: data, SHA256: want}, nil
	}
	return nil, nil
}

// notFound explains a failed Fetch: which versions, or which platforms, do exist.
func (l *Local) notFound(ref Ref) error {
	vers, err := l.Versions(ref.Name)
	if err != nil {
		return err
	}
	published := false
	for _, v := range vers {
		published = published || v == ref.Version
	}
	if !published {
		if len(vers) == 0 {
			return refuse(CodeNotFound, fmt.Sprintf("artifact %s: registry %s has no artifact named %s", ref, l.Root, ref.Name),
				"check the name, or publish it with `caddy capsule publish`")
		}
		return refuse(CodeNotFound, fmt.Sprintf("artifact %s: registry %s has no version %s of %s (it has %s)", ref, l.Root, ref.Version, ref.Name, strings.Join(vers, ", ")),
			"use one of the published versions, or publish this one")
	}
	plats := l.platformsOf(ref.Name, ref.Version)
	want := ref.Platform
	if want == "" {
		want = "any platform"
	}
	if len(plats) == 0 || l.hasFileFor(ref) { // it changed while we looked
		return refuse(CodeNotFound, fmt.Sprintf("artifact %s: registry %s changed while it was read", ref, l.Root), "try again")
	}
	return refuse(CodeNoVariant, fmt.Sprintf("artifact %s: no file for %s; it is published only for %s", ref, want, strings.Join(plats, ", ")),
		"run on one of those platforms, or publish a build for this one")
}

// platformsOf lists the platform-specific files published for name@version.
func (l *Local) platformsOf(name, version string) []string {
	var out []string
	for _, p := range Platforms() {
		if fileExists(filepath.Join(l.Root, name, version, fileBase(name, version, p)+".mur.zip")) {
			out = append(out, p)
		}
	}
	return out
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func readCapped(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, refuse(CodeDeclaredSize, fmt.Sprintf("%s is larger than %d bytes", p, limit), "keep an artifact under 500 MiB")
	}
	return data, nil
}

// readHashFile reads a .sha256: 64 lowercase hex characters, optionally followed by
// whitespace and anything (sha256sum's "<hex>  <file>").
func readHashFile(p string) (string, error) {
	data, err := readCapped(p, 4096)
	if err != nil {
		return "", refuseWrap(err, CodeHashFile, "cannot read "+p, "publish the artifact again so the registry states its sha256")
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 || !digest.Valid(fields[0]) {
		return "", refuse(CodeHashFile, p+" does not start with a sha256 in 64 lowercase hex characters", "publish the artifact again so the registry states its sha256")
	}
	return fields[0], nil
}

// Versions returns the published versions of name (those with at least one .mur.zip),
// in natural order; none if the name is unknown.
func (l *Local) Versions(name string) ([]string, error) {
	if !manifest.ValidName(name) {
		return nil, refuse(CodeArtifactName, fmt.Sprintf("artifact name %q breaks the naming rule: [a-z0-9-], 1–100 characters, no leading or trailing '-'", name),
			"use the artifact's exact name")
	}
	ents, err := os.ReadDir(filepath.Join(l.Root, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, l.storeErr(err, "cannot list the versions of "+name)
	}
	var out []string
	for _, e := range ents {
		v := e.Name()
		if manifest.CheckVersion(v) != "" {
			continue
		}
		if fileExists(filepath.Join(l.Root, name, v, fileBase(name, v, "")+".mur.zip")) || len(l.platformsOf(name, v)) > 0 {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return naturalLess(out[i], out[j]) })
	return out, nil
}

// naturalLess orders strings with runs of digits compared as numbers: 1.9 < 1.10.
func naturalLess(a, b string) bool {
	x, y := a, b
	for x != "" && y != "" {
		dx, dy := isDigit(x[0]), isDigit(y[0])
		if dx && dy {
			nx, ny := digitRun(x), digitRun(y)
			tx, ty := strings.TrimLeft(x[:nx], "0"), strings.TrimLeft(y[:ny], "0")
			if len(tx) != len(ty) {
				return len(tx) < len(ty)
			}
			if tx != ty {
				return tx < ty
			}
			x, y = x[nx:], y[ny:]
			continue
		}
		if x[0] != y[0] {
			return x[0] < y[0]
		}
		x, y = x[1:], y[1:]
	}
	if len(x) != len(y) {
		return len(x) < len(y)
	}
	return a < b
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitRun(s string) int {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

// Publish adds an archive to the registry (`caddy capsule publish`,
// docs/reference/archive.md "Publishing"). The archive is opened with every hardening
// rule first; platform is required for native tools and refused otherwise. The .sha256,
// the .meta.json and the .mur.zip are each written atomically, the zip last, under an
// exclusive lock of the version folder. Publishing identical bytes again succeeds without
// change; different bytes under an existing name, version and platform are refused.
func (l *Local) Publish(ctx context.Context, data []byte, platform string) (*Blob, error) {
	a, err := openForPublish(ctx, data, platform)
	if err != nil {
		return nil, err
	}
	return l.publish(ctx, a, data, platform, false)
}

// openForPublish is what every registry checks before it keeps or sends an archive: the
// context, its size, every hardening rule, and the platform rules (checkPublishPlatform).
func openForPublish(ctx context.Context, data []byte, platform string) (*Archive, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if int64(len(data)) > MaxArchiveFileBytes {
		return nil, refuse(CodeDeclaredSize, fmt.Sprintf("the archive is %d bytes, over the %d-byte limit", len(data), int64(MaxArchiveFileBytes)), "keep an artifact under 500 MiB")
	}
	a, err := OpenArchive(data)
	if err != nil {
		return nil, err
	}
	if err := checkPublishPlatform(a.Manifest(), platform); err != nil {
		return nil, err
	}
	return a, nil
}

// checkPublishPlatform applies the platform rules of publishing: required for native
// tools, refused otherwise, and one of Platforms.
func checkPublishPlatform(m *manifest.ArtifactManifest, platform string) error {
	id := m.Name + "@" + m.Version
	switch native := m.Implementation == manifest.ImplNative; {
	case native && platform == "":
		return refuse(CodePlatformNeeded, fmt.Sprintf("artifact %s is a native tool, and no platform was given", id),
			"give the platform the binary is built for: "+strings.Join(Platforms(), ", "))
	case !native && platform != "":
		return refuse(CodePlatformExtra, fmt.Sprintf("artifact %s is a %s %s and runs everywhere, but platform %q was given", id, implOf(m), m.Runtime, platform),
			"publish it without a platform")
	case platform != "" && !ValidPlatform(platform):
		return badPlatform(platform)
	}
	return nil
}

// publish adds a, opened from data, as Publish describes. With refuseExisting, a file
// already published under the same name, version and platform is refused even when it
// holds the same bytes, as Nexus refuses every republication (NexusServer); the check is
// made under the version folder's lock, so two uploads cannot both succeed.
// a is opened and its platform rules checked by the caller (openForPublish).
func (l *Local) publish(ctx context.Context, a *Archive, data []byte, platform string, refuseExisting bool) (*Blob, error) {
	m := a.Manifest()
	id := m.Name + "@" + m.Version
	sum := digest.Hex(data)
	blob := &Blob{Name: m.Name, Version: m.Version, Platform: platform, Data: data, SHA256: sum}
	vdir := filepath.Join(l.Root, m.Name, m.Version)
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return nil, l.storeErr(err, "cannot create "+vdir)
	}
	unlock, err := lockDir(ctx, vdir)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, l.storeErr(err, "cannot lock "+vdir)
	}
	defer unlock()

	base := filepath.Join(vdir, fileBase(m.Name, m.Version, platform))
	zipPath, sumPath := base+".mur.zip", base+".sha256"
	sumLine := []byte(sum + "  " + filepath.Base(zipPath) + "\n")
	if refuseExisting && fileExists(zipPath) {
		return nil, refuse(CodeConflict,
			fmt.Sprintf("artifact %s%s is already published, and this registry never replaces a published file, even with the same bytes (the archive given has sha256 %s)", id, platSuffixOf(platform), sum),
			"published versions never change: bump the version in murmur.yaml and publish again")
	}
	old, err := readCapped(zipPath, MaxArchiveFileBytes)
	switch {
	case err == nil:
		if have := digest.Hex(old); have != sum {
			return nil, refuse(CodeConflict,
				fmt.Sprintf("artifact %s%s is already published with sha256 %s; the archive given has sha256 %s", id, platSuffixOf(platform), have, sum),
				"published versions never change: bump the version in murmur.yaml and publish again")
		}
		// Same bytes: nothing to do, unless a sidecar went missing or bad.
		if stated, err := readHashFile(sumPath); err == nil && stated == sum {
			return blob, nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, l.storeErr(err, "cannot read "+zipPath)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	meta := Meta{Name: m.Name, Version: m.Version, Runtime: m.Runtime, Implementation: m.Implementation, Platform: platform,
		SHA256: sum, Size: int64(len(data)), Description: m.Description, Tags: m.Tags, Published: l.clock().UTC().Truncate(time.Second)}
	metaJSON, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return nil, l.storeErr(err, "cannot encode the metadata of "+id)
	}
	for _, w := range []struct {
		path string
		data []byte
	}{{sumPath, sumLine}, {base + ".meta.json", append(metaJSON, '\n')}, {zipPath, data}} {
		if err := atomicfile.Write(w.path, w.data, 0o644); err != nil {
			return nil, l.storeErr(err, "cannot write "+w.path)
		}
	}
	return blob, nil
}

func implOf(m *manifest.ArtifactManifest) string {
	if m.Implementation == "" {
		return "platform-independent"
	}
	return m.Implementation
}

func platSuffixOf(p string) string {
	if p == "" {
		return ""
	}
	return " for " + p
}

func (l *Local) clock() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

// lockDir takes the exclusive flock of dir, giving up when ctx ends. A lock obtained
// after ctx ended is released at once.
func lockDir(ctx context.Context, dir string) (func(), error) {
	type result struct {
		unlock func()
		err    error
	}
	ch := make(chan result, 1)
	go func() {
		u, err := atomicfile.LockDir(dir)
		ch <- result{u, err}
	}()
	select {
	case r := <-ch:
		return r.unlock, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.err == nil {
				r.unlock()
			}
		}()
		return nil, ctx.Err()
	}
}

var _ Registry = (*Local)(nil)
