package registry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/digest"
	"github.com/capsulegate/capsulegate/manifest"
)

// MaxSkillBytes bounds a local skill's text.
const MaxSkillBytes = 1 << 20

// Mode says how Resolve treats the lock.
type Mode int

const (
	// Verify requires a lock and refuses any difference from it (stage, `verify`).
	Verify Mode = iota
	// Install pins what the lock lacks or pins at another version, and still refuses
	// bytes that differ from an existing pin of the same version (`install`).
	Install
)

// Resolved is one artifact of a capsule, fetched and verified.
type Resolved struct {
	Name    string
	Version string // "" for a local source
	Role    manifest.Role
	// Platform is the platform the bytes are for, "" when they serve every platform.
	Platform string
	SHA256   string   // lowercase hex of Data
	Data     []byte   // the .mur.zip bytes (nil for a local source)
	Archive  *Archive // the opened archive (nil for a local source)
	// Source is the local skill's file (absolute), Text its content; set for local sources.
	Source string
	Text   []byte
}

// Resolution is a capsule's artifacts, every one verified, and the lock that pins them.
type Resolution struct {
	Artifacts []Resolved
	Lock      *Lock
	// Warnings are what went wrong without refusing anything: an archive the artifact
	// cache could not keep (W-REG-001).
	Warnings []*errs.Error
}

// Progress reports one artifact's outcome as Resolve goes.
type Progress struct {
	Index, Total int
	Name         string
	Version      string
	Platform     string
	SHA256       string
	Bytes        int
	Status       string // "verified", "pinned", "local" or "refused"
	Err          error
}

// Options configure Resolve.
type Options struct {
	Registry Registry
	Lock     *Lock // required in Verify mode; may be nil in Install mode
	Mode     Mode
	Platform string // defaults to HostPlatform()
	Progress func(Progress)
	// LockPath is the lock VerifyLock reads; "" means murmur.lock beside the manifest.
	LockPath string
}

// Resolve fetches every artifact the manifest names, checks it against the lock
// (docs/reference/lock.md "Verifying"), opens every archive with all hardening rules and
// checks that it is the artifact the manifest means. It writes nothing: the caller writes
// the returned lock (Install) or stages the artifacts, only once every check has passed.
// All refusals found are returned together.
func Resolve(ctx context.Context, m *manifest.Manifest, opts Options) (*Resolution, error) {
	platform := opts.Platform
	if platform == "" {
		platform = HostPlatform()
	}
	if opts.Mode == Verify && opts.Lock == nil && needsLock(m) {
		return nil, lockErr(CodeLockFileMissing, LockPath(m.File), "the capsule has registry artifacts but no lock",
			"run `caddy capsule install "+m.File+"` to resolve them and write the lock")
	}
	res := &Resolution{Lock: &Lock{LockVersion: LockVersion}}
	var problems errs.List
	for i, a := range m.Artifacts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r, entry, status, err := resolveOne(ctx, m, a, opts, platform, &res.Warnings)
		p := Progress{Index: i + 1, Total: len(m.Artifacts), Name: a.Name, Version: a.Version, Status: status}
		if err != nil {
			p.Status, p.Err = "refused", err
			problems = append(problems, asErrList(err)...)
		} else {
			p.Platform, p.SHA256, p.Bytes = r.Platform, r.SHA256, len(r.Data)
			if r.Source != "" {
				p.Bytes = len(r.Text)
			}
			res.Artifacts = append(res.Artifacts, *r)
			if entry != nil {
				res.Lock.Artifacts = append(res.Lock.Artifacts, *entry)
			}
		}
		if opts.Progress != nil {
			opts.Progress(p)
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return res, nil
}

func needsLock(m *manifest.Manifest) bool {
	for _, a := range m.Artifacts {
		if !a.IsLocal() {
			return true
		}
	}
	return false
}

// resolveOne resolves one artifact and returns the lock entry that pins it (nil for a
// local source).
func resolveOne(ctx context.Context, m *manifest.Manifest, a manifest.ArtifactRef, opts Options, platform string, warns *[]*errs.Error) (*Resolved, *LockEntry, string, error) {
	if a.IsLocal() {
		r, err := loadLocalSkill(m, a)
		return r, nil, "local", err
	}
	id := a.Name + "@" + a.Version
	var pinned *LockEntry
	if e := opts.Lock.Entry(a.Name); e != nil {
		pinned = e
	}
	if opts.Mode == Verify {
		switch {
		case pinned == nil:
			return nil, nil, "", lockErr(CodeLockMissing, m.Position(pathOf(m, a.Name)+".name"),
				fmt.Sprintf("artifact %s has no entry in the lock (manifest wants version %s, lock has none)", a.Name, a.Version),
				"run `caddy capsule install "+m.File+"` to pin it")
		case pinned.ResolvedVersion != a.Version:
			return nil, nil, "", lockErr(CodeLockVersionPin, opts.Lock.position(LockPath(m.File), a.Name, ".resolved_version"),
				fmt.Sprintf("artifact %s: manifest wants version %s, lock pins %s", a.Name, a.Version, pinned.ResolvedVersion),
				"run `caddy capsule install "+m.File+"` to re-pin, or set the manifest back to "+pinned.ResolvedVersion)
		}
	} else if pinned != nil && pinned.ResolvedVersion != a.Version {
		pinned = nil // Install re-pins a changed version.
	}
	cache := cacheOf(opts.Registry)
	blob, cachedSum := fromCache(cache, a, pinned, platform)
	if blob == nil {
		var err error
		if blob, err = opts.Registry.Fetch(ctx, Ref{Name: a.Name, Version: a.Version, Platform: platform}); err != nil {
			return nil, nil, "", err
		}
	}
	var sum string
	if _, ok := opts.Registry.(Verifying); (ok && blob.SHA256 != "") || cachedSum != "" {
		sum = blob.SHA256 // hashed and checked by the registry, or by the cache as it read it
	} else {
		sum = digest.Hex(blob.Data)
	}
	if blob.SHA256 != "" && blob.SHA256 != sum {
		// Registries check this themselves; a second look costs nothing and covers any
		// Registry implementation that does not.
		return nil, nil, "", &errs.Error{Code: CodeLockHash, Part: "registry",
			Msg: fmt.Sprintf("artifact %s: registry states sha256 %s but its bytes hash to %s", id, blob.SHA256, sum),
			Fix: "the registry copy is damaged or tampered with: republish it"}
	}
	status := "pinned"
	if pinned != nil {
		want, specific := pinned.Pin(blob.Platform)
		switch {
		case want == "" || (specific && blob.Platform == "") || (!specific && blob.Platform != ""):
			if opts.Mode == Verify {
				return nil, nil, "", lockErr(CodeLockPlatform, opts.Lock.position(LockPath(m.File), a.Name, ".sha256"),
					fmt.Sprintf("artifact %s: the lock has no pin for the bytes the registry serves for %s (lock pins %s; registry serves %s)", id, platform, describePins(pinned), describeBlob(blob)),
					"run `caddy capsule install "+m.File+"` on this platform to add its pin")
			}
			pinned = nil
		case want != sum:
			return nil, nil, "", lockErr(CodeLockHash, opts.Lock.position(LockPath(m.File), a.Name, pinKey(specific, blob.Platform)),
				fmt.Sprintf("artifact %s%s: lock pins sha256 %s but the registry's bytes hash to %s", id, platSuffix(blob.Platform), want, sum),
				"if the change is expected, delete its lock entry and run `caddy capsule install`; otherwise the registry copy has been altered")
		default:
			status = "verified"
		}
	}
	arc := blob.Archive
	if arc == nil {
		var err error
		if arc, err = openedArchives.open(blob.Data, sum); err != nil {
			return nil, nil, "", fmt.Errorf("artifact %s: %w", id, err)
		}
	}
	am := arc.Manifest()
	if am.Name != a.Name || am.Version != a.Version {
		return nil, nil, "", &errs.Error{Code: CodeIdentity, Part: "registry",
			Msg: fmt.Sprintf("the registry's file for %s holds %s@%s", id, am.Name, am.Version),
			Fix: "republish the right archive under that name and version"}
	}
	role := a.Runtime
	if role == "" {
		role = manifest.RoleTool
	}
	if am.Runtime != role {
		return nil, nil, "", &errs.Error{Code: CodeRole, Part: "registry",
			Msg: fmt.Sprintf("artifact %s is a %s, but the capsule manifest declares runtime %s", id, am.Runtime, role),
			Fix: fmt.Sprintf("set runtime: %s on the artifact in the capsule manifest", am.Runtime)}
	}
	if cache != nil && cachedSum == "" {
		// Only now, with the bytes checked against the lock (or about to be pinned by
		// it) and opened with every rule, are they kept.
		// A cache that cannot keep them costs the next outage, not this stage.
		if _, err := cache.Put(sum, blob.Data); err != nil {
			*warns = append(*warns, &errs.Error{Code: WarnCache, Part: "registry",
				Msg: fmt.Sprintf("artifact %s (sha256 %s) is verified but not cached, so staging it again needs the registry: %v", id, sum, err),
				Fix: "check the artifact cache folder's permissions and free space"})
		}
	}
	entry := mergePin(opts.Lock.Entry(a.Name), a, blob.Platform, sum)
	return &Resolved{Name: a.Name, Version: a.Version, Role: role, Platform: blob.Platform, SHA256: sum, Data: blob.Data, Archive: arc},
		entry, status, nil
}

// cacheOf returns the cache a registry keeps its verified archives in, or nil.
func cacheOf(r Registry) *Cache {
	if c, ok := r.(Caching); ok {
		return c.Cache()
	}
	return nil
}

// fromCache returns the blob the lock pins for a on platform when the cache holds it,
// and its sha256 (checked as the cache read it); nil, "" otherwise. A cached plain wasm
// component is read as a tool artifact again.
func fromCache(c *Cache, a manifest.ArtifactRef, pinned *LockEntry, platform string) (*Blob, string) {
	if c == nil || pinned == nil {
		return nil, ""
	}
	want, specific := pinned.Pin(platform)
	if want == "" {
		return nil, ""
	}
	data, ok := c.Get(want)
	if !ok {
		return nil, ""
	}
	b := &Blob{Name: a.Name, Version: a.Version, Data: data, SHA256: want}
	if specific {
		b.Platform = platform
	}
	if IsWasm(data) {
		arc, err := WasmToolArchive(a.Name, a.Version, data)
		if err != nil {
			return nil, ""
		}
		b.Archive = arc
	}
	return b, want
}

// ArchiveOf opens cached bytes as the archive they stand for: a .mur.zip as itself,
// a plain wasm component as the tool archive WasmToolArchive makes of it.
func ArchiveOf(name, version string, data []byte) (*Archive, error) {
	if IsWasm(data) {
		return WasmToolArchive(name, version, data)
	}
	return openedArchives.open(data, digest.Hex(data))
}

// mergePin returns the lock entry pinning sum for platform, keeping an old entry's pins
// for other platforms when the version is unchanged.
func mergePin(old *LockEntry, a manifest.ArtifactRef, platform, sum string) *LockEntry {
	e := &LockEntry{Name: a.Name, ResolvedVersion: a.Version}
	if platform == "" {
		e.SHA256.Any = sum
		return e
	}
	e.SHA256.Platforms = map[string]string{}
	if old != nil && old.ResolvedVersion == a.Version {
		for p, s := range old.SHA256.Platforms {
			e.SHA256.Platforms[p] = s
		}
	}
	e.SHA256.Platforms[platform] = sum
	return e
}

// loadLocalSkill reads a skill from its source: a file, or a folder holding skill.md
// (name matched case-insensitively).
func loadLocalSkill(m *manifest.Manifest, a manifest.ArtifactRef) (*Resolved, error) {
	p := a.Source
	if !filepath.IsAbs(p) {
		p = filepath.Join(m.Dir, p)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		abs = p
	}
	missing := func(err error, msg string) error {
		return &errs.Error{Code: manifest.CodeSourceMissing, Part: "manifest", Pos: m.Position(pathOf(m, a.Name) + ".source"),
			Msg: fmt.Sprintf("skill %s: %s", a.Name, msg), Err: err,
			Fix: "point source at the skill's text file, or at a folder holding skill.md"}
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, missing(err, fmt.Sprintf("source %q cannot be read", a.Source))
	}
	if fi.IsDir() {
		entries, err := os.ReadDir(abs)
		if err != nil {
			return nil, missing(err, fmt.Sprintf("source folder %q cannot be read", a.Source))
		}
		found := ""
		for _, e := range entries {
			if strings.EqualFold(e.Name(), "skill.md") && !e.IsDir() {
				if found != "" {
					return nil, missing(nil, fmt.Sprintf("source folder %q holds both %s and %s", a.Source, found, e.Name()))
				}
				found = e.Name()
			}
		}
		if found == "" {
			return nil, missing(fs.ErrNotExist, fmt.Sprintf("source folder %q holds no skill.md", a.Source))
		}
		abs = filepath.Join(abs, found)
		if fi, err = os.Stat(abs); err != nil {
			return nil, missing(err, fmt.Sprintf("%q cannot be read", abs))
		}
	}
	if !fi.Mode().IsRegular() {
		return nil, missing(nil, fmt.Sprintf("source %q is not a regular file", a.Source))
	}
	if fi.Size() > MaxSkillBytes {
		return nil, missing(nil, fmt.Sprintf("source %q is %d bytes, over the %d-byte limit", a.Source, fi.Size(), MaxSkillBytes))
	}
	text, err := os.ReadFile(abs)
	if err != nil {
		return nil, missing(err, fmt.Sprintf("source %q cannot be read", a.Source))
	}
	return &Resolved{Name: a.Name, Role: manifest.RoleSkill, SHA256: digest.Hex(text), Source: abs, Text: text}, nil
}

func pathOf(m *manifest.Manifest, name string) string {
	for i, a := range m.Artifacts {
		if a.Name == name {
			return fmt.Sprintf("artifacts[%d]", i)
		}
	}
	return "artifacts"
}

// pinKey is the lock key path of a pin, for positions in messages.
func pinKey(specific bool, platform string) string {
	if specific {
		return ".sha256.platforms." + platform
	}
	return ".sha256.any"
}

func platSuffix(p string) string {
	if p == "" {
		return ""
	}
	return " (" + p + ")"
}

func describePins(e *LockEntry) string {
	if e.SHA256.Any != "" {
		return "any platform"
	}
	if len(e.SHA256.Platforms) == 0 {
		return "nothing"
	}
	return "platforms " + strings.Join(sortedKeys(e.SHA256.Platforms), ", ")
}

func describeBlob(b *Blob) string {
	if b.Platform == "" {
		return "one file for every platform"
	}
	return "a " + b.Platform + " file"
}

func asErrList(err error) errs.List {
	var l errs.List
	if errors.As(err, &l) {
		return l
	}
	var e *errs.Error
	if errors.As(err, &e) {
		// Keep the context the caller added around the coded error.
		if err.Error() != e.Error() {
			c := *e
			c.Msg = strings.TrimSuffix(err.Error(), ": "+e.Error()) + ": " + e.Msg
			return errs.List{&c}
		}
		return errs.List{e}
	}
	return errs.List{{Code: CodeUnclassified, Part: "registry", Msg: err.Error(), Fix: "see the cause"}}
}
