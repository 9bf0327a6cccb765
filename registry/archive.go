package registry

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/atomicfile"
	"github.com/capsulegate/capsulegate/manifest"
)

// Archive limits (docs/reference/archive.md "Sizes").
const (
	DefaultMaxBytes   = 500 << 20 // decompressed bytes, declared and actual, in total
	DefaultMaxEntries = 10000
)

// ManifestFile is the artifact manifest at an archive's root.
const ManifestFile = "murmur.yaml"

// OpenOption changes a limit of OpenArchive.
type OpenOption func(*openConfig)

type openConfig struct {
	maxBytes   int64
	maxEntries int
}

func newOpenConfig(opts []OpenOption) openConfig {
	c := openConfig{maxBytes: DefaultMaxBytes, maxEntries: DefaultMaxEntries}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithMaxBytes caps the decompressed size of the whole archive; n <= 0 keeps the default.
func WithMaxBytes(n int64) OpenOption {
	return func(c *openConfig) {
		if n > 0 {
			c.maxBytes = n
		}
	}
}

// WithMaxEntries caps the number of entries; n <= 0 keeps the default.
func WithMaxEntries(n int) OpenOption {
	return func(c *openConfig) {
		if n > 0 {
			c.maxEntries = n
		}
	}
}

// PayloadKind is what runs or is read when an artifact is used.
type PayloadKind string

// The payload kinds.
const (
	PayloadWasm   PayloadKind = "wasm"
	PayloadNative PayloadKind = "native"
	PayloadSkill  PayloadKind = "skill"
)

// Payload names an archive's payload file (docs/reference/archive.md "Payload").
type Payload struct {
	Kind PayloadKind
	Path string // entry name inside the archive, e.g. "capsule.wasm", "bin/git-helper"
}

// Archive is an opened, fully checked .mur.zip. Every entry has been decompressed once
// and matched its declared size and CRC; nothing has touched the disk.
type Archive struct {
	zr      *zip.Reader
	entries map[string]*zip.File // regular files by exact name
	files   []string             // sorted
	dirs    []string             // explicit folder entries, without the trailing slash, sorted
	size    int64                // decompressed bytes in total
	man     *manifest.ArtifactManifest
	warns   []*errs.Error
	payload Payload
	// kept holds every file's content from the checking pass when the archive is small
	// enough (KeepInflatedBytes), so ReadFile does not inflate a second time.
	kept map[string][]byte
}

// KeepInflatedBytes is the largest decompressed total an Archive keeps in memory after
// its checking pass; larger archives are inflated again on each ReadFile.
const KeepInflatedBytes = 64 << 20

func refuse(code, msg, fix string) *errs.Error {
	return &errs.Error{Code: code, Part: "registry", Msg: msg, Fix: fix}
}

func refuseWrap(err error, code, msg, fix string) *errs.Error {
	return &errs.Error{Code: code, Part: "registry", Msg: msg, Fix: fix, Err: err}
}

const fixRebuild = "rebuild the archive with `caddy capsule pack`"

// OpenArchive checks a .mur.zip held in memory against every rule of
// docs/reference/archive.md "Opening an archive" and returns it opened. It keeps its own
// copy of data.
func OpenArchive(data []byte, opts ...OpenOption) (*Archive, error) {
	cfg := newOpenConfig(opts)
	data = bytes.Clone(data)
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // names are checked below
		return nil, refuseWrap(err, CodeNotZip, fmt.Sprintf("the %d bytes given are not a readable zip archive", len(data)), fixRebuild)
	}
	if len(zr.File) > cfg.maxEntries {
		return nil, refuse(CodeTooManyEntries, fmt.Sprintf("the archive has %d entries, over the limit of %d", len(zr.File), cfg.maxEntries),
			"ship fewer files: bundle assets into the payload")
	}
	a := &Archive{zr: zr, entries: map[string]*zip.File{}}
	if err := a.checkHeaders(cfg); err != nil {
		return nil, err
	}
	if err := a.checkData(cfg); err != nil {
		return nil, err
	}
	if err := a.loadManifest(); err != nil {
		return nil, err
	}
	p, err := payloadFor(a.man, a.files)
	if err != nil {
		return nil, err
	}
	a.payload = p
	return a, nil
}

// checkData decompresses every file once, without keeping it, counting actual bytes
// against the declared sizes and the total cap and checking CRCs.
func (a *Archive) checkData(cfg openConfig) error {
	var declared uint64
	for _, name := range a.files {
		declared += a.entries[name].UncompressedSize64
	}
	keep := declared <= KeepInflatedBytes
	if keep {
		a.kept = make(map[string][]byte, len(a.files))
	}
	var total int64
	for _, name := range a.files {
		f := a.entries[name]
		var w io.Writer = io.Discard
		var b *bytes.Buffer
		if keep {
			b = bytes.NewBuffer(make([]byte, 0, f.UncompressedSize64))
			w = b
		}
		n, err := inflate(f, w, cfg.maxBytes-total)
		if err != nil {
			a.kept = nil
			return err
		}
		if keep {
			a.kept[name] = b.Bytes()
		}
		total += n
	}
	a.size = total
	return nil
}

// writeError marks a failure of the destination, as opposed to the archive's data.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

type markingWriter struct{ w io.Writer }

func (m markingWriter) Write(p []byte) (int, error) {
	n, err := m.w.Write(p)
	if err != nil {
		err = &writeError{err}
	}
	return n, err
}

// inflate copies f's content to w. It refuses more bytes than f declares or than limit,
// fewer than declared, an undecodable stream and a CRC mismatch. A failure of w comes
// back as a *writeError.
func inflate(f *zip.File, w io.Writer, limit int64) (int64, error) {
	raw, err := f.OpenRaw()
	if err != nil {
		return 0, refuseWrap(err, CodeCorrupt, fmt.Sprintf("entry %q: its data cannot be located", f.Name), fixRebuild)
	}
	var r io.Reader = raw
	if f.Method == zip.Deflate {
		fr := flate.NewReader(raw)
		defer fr.Close()
		r = fr
	}
	declared := int64(f.UncompressedSize64) // ≤ the cap, checked with the headers
	max := min(declared, limit)
	h := crc32.NewIEEE()
	n, err := io.Copy(io.MultiWriter(markingWriter{w}, h), io.LimitReader(r, max+1))
	var we *writeError
	switch {
	case errors.As(err, &we):
		return n, we
	case n > declared:
		return n, refuse(CodeActualSize, fmt.Sprintf("entry %q inflates past its declared %d bytes: the header lies, a likely zip bomb", f.Name, declared), fixRebuild)
	case n > max:
		return n, refuse(CodeActualSize, fmt.Sprintf("entry %q takes the archive past its decompressed-size limit: a likely zip bomb", f.Name), fixRebuild)
	case err != nil:
		return n, refuseWrap(err, CodeCorrupt, fmt.Sprintf("entry %q cannot be decompressed", f.Name), fixRebuild)
	case n < declared:
		return n, refuse(CodeCorrupt, fmt.Sprintf("entry %q is truncated: %d of its declared %d bytes", f.Name, n, declared), fixRebuild)
	case h.Sum32() != f.CRC32:
		return n, refuse(CodeCorrupt, fmt.Sprintf("entry %q fails its CRC check (header %08x, data %08x)", f.Name, f.CRC32, h.Sum32()), fixRebuild)
	}
	return n, nil
}

// loadManifest parses the root murmur.yaml and checks the identity rules paths are
// built from, whatever the manifest parser already checked.
func (a *Archive) loadManifest() error {
	f := a.entries[ManifestFile]
	if f == nil {
		return refuse(CodeNoManifest, "the archive has no "+ManifestFile+" at its root",
			"add the artifact's murmur.yaml (name, version, runtime) at the root of the folder you pack")
	}
	if f.UncompressedSize64 > manifest.MaxFileSize {
		return errs.New(manifest.CodeTooLarge, "manifest", fmt.Sprintf("%s is %d bytes, over the %d-byte limit", ManifestFile, f.UncompressedSize64, manifest.MaxFileSize),
			"keep the artifact manifest small")
	}
	data, err := a.ReadFile(ManifestFile)
	if err != nil {
		return err
	}
	m, warns, err := manifest.ParseArtifactManifest(data, ManifestFile)
	if err != nil {
		return err
	}
	if err := checkIdentity(m); err != nil {
		return err
	}
	a.man, a.warns = m, warns
	return nil
}

// checkIdentity enforces what the registry relies on: a name and version safe as path
// segments, and a known runtime and implementation.
func checkIdentity(m *manifest.ArtifactManifest) error {
	if !manifest.ValidName(m.Name) {
		return refuse(CodeArtifactName, fmt.Sprintf("artifact name %q breaks the naming rule: [a-z0-9-], 1–100 characters, no leading or trailing '-'", m.Name),
			"rename the artifact in its murmur.yaml")
	}
	if why := manifest.CheckVersion(m.Version); why != "" {
		return refuse(CodeArtifactVersion, fmt.Sprintf("artifact %s: version %q is not usable: %s", m.Name, m.Version, why),
			"give a concrete version such as 1.0.0")
	}
	switch {
	case m.Runtime != manifest.RoleTool && m.Runtime != manifest.RoleDriver && m.Runtime != manifest.RoleHook && m.Runtime != manifest.RoleSkill:
		return refuse(CodeArtifactKind, fmt.Sprintf("artifact %s@%s: runtime %q is not tool, driver, hook or skill", m.Name, m.Version, m.Runtime),
			"set runtime to tool, driver, hook or skill")
	case m.Implementation == manifest.ImplNative && m.Runtime != manifest.RoleTool:
		return refuse(CodeArtifactKind, fmt.Sprintf("artifact %s@%s: a %s cannot be native; only tools ship native binaries", m.Name, m.Version, m.Runtime),
			"set implementation: wasm, or runtime: tool")
	case m.Implementation != "" && m.Implementation != manifest.ImplWasm && m.Implementation != manifest.ImplNative:
		return refuse(CodeArtifactKind, fmt.Sprintf("artifact %s@%s: implementation %q is not wasm or native", m.Name, m.Version, m.Implementation),
			"set implementation to wasm or native")
	}
	return nil
}

// payloadFor finds the payload the manifest's role needs among the archive's files.
func payloadFor(m *manifest.ArtifactManifest, files []string) (Payload, error) {
	id := m.Name + "@" + m.Version
	switch {
	case m.Runtime == manifest.RoleSkill:
		for _, f := range files {
			if strings.EqualFold(f, "skill.md") {
				return Payload{Kind: PayloadSkill, Path: f}, nil
			}
		}
		return Payload{}, refuse(CodeNoPayload, fmt.Sprintf("skill %s has no skill.md at its root", id), "add the skill's text as skill.md")
	case m.Implementation == manifest.ImplNative:
		want := "bin/" + m.Name
		for _, f := range files {
			if f == want {
				return Payload{Kind: PayloadNative, Path: f}, nil
			}
		}
		return Payload{}, refuse(CodeNoPayload, fmt.Sprintf("native tool %s has no %s", id, want), "put the tool's binary at "+want)
	}
	var wasm []string
	for _, f := range files {
		if f == "capsule.wasm" {
			return Payload{Kind: PayloadWasm, Path: f}, nil
		}
		if !strings.Contains(f, "/") && strings.HasSuffix(f, ".wasm") {
			wasm = append(wasm, f)
		}
	}
	switch len(wasm) {
	case 1:
		return Payload{Kind: PayloadWasm, Path: wasm[0]}, nil
	case 0:
		return Payload{}, refuse(CodeNoPayload, fmt.Sprintf("%s %s has no capsule.wasm and no other *.wasm at its root", m.Runtime, id),
			"put the compiled module at the root as capsule.wasm")
	}
	return Payload{}, refuse(CodeManyPayloads, fmt.Sprintf("%s %s has several root *.wasm (%s) and no capsule.wasm, so its payload is ambiguous", m.Runtime, id, strings.Join(wasm, ", ")),
		"name the payload capsule.wasm, or keep only one root *.wasm")
}

// Manifest returns the archive's parsed murmur.yaml; callers must not modify it.
func (a *Archive) Manifest() *manifest.ArtifactManifest { return a.man }

// Payload returns the file that is run or read when the artifact is used.
func (a *Archive) Payload() Payload { return a.payload }

// ReadFile returns the content of the regular file name (exact, clean form).
func (a *Archive) ReadFile(name string) ([]byte, error) {
	f := a.entries[name]
	if f == nil {
		return nil, refuse(CodeNoSuchFile, fmt.Sprintf("the archive holds no file %q", name), "name a regular file the archive holds, in its exact clean form")
	}
	if data, ok := a.kept[name]; ok {
		return bytes.Clone(data), nil // the caller may modify its copy
	}
	var b bytes.Buffer
	b.Grow(int(f.UncompressedSize64))
	if _, err := inflate(f, &b, int64(f.UncompressedSize64)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// fileMode is the mode a file is extracted and packed with: 0755 in bin/, else 0644.
func fileMode(name string) fs.FileMode {
	if path.Dir(name) == "bin" {
		return 0o755
	}
	return 0o644
}

// ExtractTo writes the archive's files into dir, which must be absent or an empty
// folder. Files land in a fresh folder beside dir that is renamed into place at the end,
// so a failure leaves dir as it was.
func (a *Archive) ExtractTo(dir string) error {
	dir = filepath.Clean(dir)
	if fi, err := os.Lstat(dir); err == nil {
		if !fi.IsDir() {
			return refuse(CodeTargetNotEmpty, fmt.Sprintf("extraction target %s exists and is not a folder", dir), "remove it or pick another target")
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return refuseWrap(err, CodeExtract, "cannot read extraction target "+dir, "check its permissions")
		}
		if len(ents) > 0 {
			return refuse(CodeTargetNotEmpty, fmt.Sprintf("extraction target %s is not empty (it holds %s)", dir, ents[0].Name()), "remove its content or pick another target")
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return refuseWrap(err, CodeExtract, "cannot inspect extraction target "+dir, "check the path and its permissions")
	}
	parent := filepath.Dir(dir)
	fail := func(err error, msg string) error {
		return refuseWrap(err, CodeExtract, fmt.Sprintf("extracting into %s: %s", dir, msg), "check free space and permissions of "+parent)
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fail(err, "cannot create the parent folder")
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-*")
	if err != nil {
		return fail(err, "cannot create a temporary folder")
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	if err := a.writeTree(tmp); err != nil {
		var e *errs.Error
		if errors.As(err, &e) {
			return err
		}
		return fail(err, "writing files")
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fail(err, "cannot set the folder's mode")
	}
	// os.Rename will not replace a folder, even an empty one; Remove only removes an
	// empty one, so nothing written by someone else in the meantime is lost.
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return refuseWrap(err, CodeTargetNotEmpty, fmt.Sprintf("extraction target %s could not be replaced (did something else write there?)", dir), "remove its content or pick another target")
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fail(err, "cannot move the extracted folder into place (did something else write there?)")
	}
	done = true
	_ = atomicfile.SyncDir(parent) // persist the rename; it cannot be undone if this fails
	return nil
}

// writeTree writes every folder and file under tmp, through an os.Root so no name can
// leave it even if the checks above had a hole.
func (a *Archive) writeTree(tmp string) error {
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, d := range a.dirs {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, name := range a.files {
		if d := path.Dir(name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		mode := fileMode(name)
		out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return err
		}
		f := a.entries[name]
		_, err = inflate(f, out, int64(f.UncompressedSize64))
		if err == nil {
			err = out.Chmod(mode) // exact mode, whatever the umask
		}
		if err == nil {
			err = out.Sync()
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			var we *writeError
			if errors.As(err, &we) {
				return we.err
			}
			return err
		}
	}
	return nil
}
