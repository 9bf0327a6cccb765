package registry

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/atomicfile"
	"github.com/capsulegate/capsulegate/internal/digest"
	"github.com/capsulegate/capsulegate/manifest"
)

// LockFileName is the lock's name beside its manifest.
const LockFileName = "murmur.lock"

// LockVersion is the only lock format this release reads and writes.
const LockVersion = 2

// Lock is a murmur.lock (docs/reference/lock.md "Format"): the exact version and sha256
// of every registry artifact a capsule uses.
type Lock struct {
	LockVersion int         `yaml:"lock_version" required:"true"`
	Artifacts   []LockEntry `yaml:"artifacts"`

	pos manifest.Positions // where entries stand, when the lock was read from a file
}

// position returns "file:line:col" of an entry's key (e.g. ".resolved_version") when
// the lock was read from a file, else the lock's path.
func (l *Lock) position(fallback, name, key string) string {
	for i := range l.Artifacts {
		if l.Artifacts[i].Name == name {
			if at := l.pos.At(fmt.Sprintf("artifacts[%d]%s", i, key)); at != "" {
				return at
			}
		}
	}
	return fallback
}

// LockEntry pins one artifact.
type LockEntry struct {
	Name            string     `yaml:"name" required:"true"`
	ResolvedVersion string     `yaml:"resolved_version" required:"true"`
	SHA256          LockHashes `yaml:"sha256" required:"true"`
}

// LockHashes holds either one hash for every platform (wasm and skill artifacts) or one
// per platform (native artifacts).
type LockHashes struct {
	Any       string            `yaml:"any"`
	Platforms map[string]string `yaml:"platforms"`
}

// Entry returns the entry for name, or nil.
func (l *Lock) Entry(name string) *LockEntry {
	if l == nil {
		return nil
	}
	for i := range l.Artifacts {
		if l.Artifacts[i].Name == name {
			return &l.Artifacts[i]
		}
	}
	return nil
}

// Pin returns the pinned hash for platform ("" when the entry has none for it) and
// whether the pin is platform-specific.
func (e *LockEntry) Pin(platform string) (sum string, specific bool) {
	if e.SHA256.Any != "" {
		return e.SHA256.Any, false
	}
	return e.SHA256.Platforms[platform], true
}

func lockErr(code, pos, msg, fix string) *errs.Error {
	return &errs.Error{Code: code, Part: "lock", Pos: pos, Msg: msg, Fix: fix}
}

// ReadLock reads and validates the lock at path. A missing file is reported with an
// error matching fs.ErrNotExist and code E-LOCK-010.
func ReadLock(path string) (*Lock, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &errs.Error{Code: CodeLockFileMissing, Part: "lock", Pos: path, Msg: "no lock file", Err: err,
				Fix: "run `caddy capsule install <manifest>` to resolve the artifacts and write it"}
		}
		return nil, &errs.Error{Code: CodeLockMalformed, Part: "lock", Pos: path, Msg: "cannot read the lock", Err: err, Fix: "check its permissions"}
	}
	return ParseLock(data, path)
}

// ParseLock decodes and validates lock bytes; file names them in errors.
func ParseLock(data []byte, file string) (*Lock, error) {
	regen := fmt.Sprintf("delete %s and run `caddy capsule install <manifest>` to regenerate it", file)
	// Read lock_version first, so an old format is named as such rather than as a
	// pile of unknown-key complaints.
	var head struct {
		LockVersion int `yaml:"lock_version"`
	}
	if _, _, err := manifest.DecodeStrict(data, file, &head); err != nil {
		return nil, relabel(err, regen)
	}
	switch head.LockVersion {
	case LockVersion:
	case 1:
		return nil, lockErr(CodeLockV1, file, "lock_version 1 is an older format this release does not read", regen)
	case 0:
		return nil, lockErr(CodeLockMalformed, file, "lock_version is missing", regen)
	default:
		return nil, lockErr(CodeLockVersion, file, fmt.Sprintf("lock_version %d is not supported (this release reads %d)", head.LockVersion, LockVersion),
			"use the capsulegate release that wrote it, or "+regen)
	}
	var l Lock
	pos, warns, err := manifest.DecodeStrict(data, file, &l)
	if err != nil {
		return nil, relabel(err, regen)
	}
	if len(warns) > 0 {
		// A lock is machine-written: an unknown key means it is not ours.
		return nil, relabel(errs.List(warns), regen)
	}
	var problems errs.List
	seen := map[string]bool{}
	for i, e := range l.Artifacts {
		at := fmt.Sprintf("artifacts[%d]", i)
		bad := func(key, msg string) {
			p := at + key
			problems = append(problems, &errs.Error{Code: CodeLockEntry, Part: "lock", Pos: pos.At(p), Path: p, Msg: msg, Fix: regen})
		}
		if !manifest.ValidName(e.Name) {
			bad(".name", fmt.Sprintf("name %q is not a valid artifact name", e.Name))
		}
		if seen[e.Name] {
			bad(".name", fmt.Sprintf("artifact %q is pinned twice", e.Name))
		}
		seen[e.Name] = true
		if why := manifest.CheckVersion(e.ResolvedVersion); why != "" {
			bad(".resolved_version", fmt.Sprintf("artifact %q resolved_version %q: %s", e.Name, e.ResolvedVersion, why))
		}
		switch {
		case e.SHA256.Any != "" && len(e.SHA256.Platforms) > 0:
			bad(".sha256", fmt.Sprintf("artifact %q has both sha256.any and sha256.platforms", e.Name))
		case e.SHA256.Any == "" && len(e.SHA256.Platforms) == 0:
			bad(".sha256", fmt.Sprintf("artifact %q has no sha256", e.Name))
		case e.SHA256.Any != "" && !digest.Valid(e.SHA256.Any):
			bad(".sha256.any", fmt.Sprintf("artifact %q sha256.any %q is not 64 lowercase hex digits", e.Name, e.SHA256.Any))
		}
		for _, p := range sortedKeys(e.SHA256.Platforms) {
			if !ValidPlatform(p) {
				bad(".sha256.platforms."+p, fmt.Sprintf("artifact %q pins unknown platform %q (known: %s)", e.Name, p, strings.Join(Platforms(), ", ")))
			}
			if !digest.Valid(e.SHA256.Platforms[p]) {
				bad(".sha256.platforms."+p, fmt.Sprintf("artifact %q sha256.platforms.%s %q is not 64 lowercase hex digits", e.Name, p, e.SHA256.Platforms[p]))
			}
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	l.pos = pos
	return &l, nil
}

// relabel turns decoder errors into lock errors, keeping their position and message.
func relabel(err error, fix string) error {
	var out errs.List
	for _, code := range errs.Codes(err) {
		e := errs.Find(err, code)
		c := *e
		c.Code, c.Part, c.Fix = CodeLockMalformed, "lock", fix
		out = append(out, &c)
	}
	if len(out) == 0 {
		return lockErr(CodeLockMalformed, "", err.Error(), fix)
	}
	return out
}

// Marshal renders the lock in its canonical form: entries sorted by name, platforms
// sorted, versions quoted.
func (l *Lock) Marshal() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Written by capsulegate. Pins every registry artifact of the capsule; regenerate with `caddy capsule install`.\n")
	fmt.Fprintf(&b, "lock_version: %d\n", LockVersion)
	entries := append([]LockEntry(nil), l.Artifacts...)
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	if len(entries) == 0 {
		b.WriteString("artifacts: []\n")
		return b.Bytes()
	}
	b.WriteString("artifacts:\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "  - name: %s\n    resolved_version: %q\n    sha256:\n", e.Name, e.ResolvedVersion)
		if e.SHA256.Any != "" {
			fmt.Fprintf(&b, "      any: %s\n", e.SHA256.Any)
			continue
		}
		b.WriteString("      platforms:\n")
		for _, p := range sortedKeys(e.SHA256.Platforms) {
			fmt.Fprintf(&b, "        %s: %s\n", p, e.SHA256.Platforms[p])
		}
	}
	return b.Bytes()
}

// WriteLock replaces the lock at path atomically: readers see the old lock or the new
// one, never a torn file.
func WriteLock(path string, l *Lock) error {
	if err := atomicfile.Write(path, l.Marshal(), 0o644); err != nil {
		return &errs.Error{Code: CodeLockWrite, Part: "lock", Pos: path, Msg: "cannot write the lock", Err: err,
			Fix: "check that the manifest's folder is writable"}
	}
	return nil
}

// LockPath is where the lock of the manifest at manifestPath lives.
func LockPath(manifestPath string) string {
	return filepath.Join(filepath.Dir(manifestPath), LockFileName)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
