package registry

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/manifest"
)

// packTime is every packed entry's time: the earliest a zip can say, so the same folder
// always packs to the same bytes.
var packTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Pack builds a .mur.zip from dir, a folder holding an artifact murmur.yaml and its
// payload (`caddy capsule pack`, docs/reference/archive.md "Packing"). The output is
// deterministic for a given Go version: entries sorted, fixed time, fixed modes. .git
// folders and .DS_Store files are left out; symlinks and special files are refused. The
// result is re-opened with OpenArchive before it is returned.
func Pack(dir string) ([]byte, *manifest.ArtifactManifest, error) {
	return pack(dir, newOpenConfig(nil))
}

type packEntry struct {
	name  string // slash path; folders end in '/'
	size  int64
	isDir bool
}

func pack(dir string, cfg openConfig) ([]byte, *manifest.ArtifactManifest, error) {
	srcErr := func(err error, msg string) error {
		return refuseWrap(err, CodePackSource, fmt.Sprintf("cannot pack %s: %s", dir, msg), "point pack at the artifact's folder")
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, nil, srcErr(err, "it cannot be read")
	}
	if !fi.IsDir() {
		return nil, nil, srcErr(nil, "it is not a folder")
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, srcErr(err, "it cannot be opened")
	}
	defer root.Close()

	m, err := packManifest(root, dir)
	if err != nil {
		return nil, nil, err
	}
	entries, err := packList(root, dir, cfg)
	if err != nil {
		return nil, nil, err
	}
	var files []string
	for _, e := range entries {
		if !e.isDir {
			files = append(files, e.name)
		}
	}
	if _, err := payloadFor(m, files); err != nil {
		return nil, nil, err
	}

	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Modified: packTime}
		if e.isDir {
			h.SetMode(fs.ModeDir | 0o755)
		} else {
			h.Method = zip.Deflate
			h.SetMode(fileMode(e.name))
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			return nil, nil, srcErr(err, "cannot add "+e.name)
		}
		if e.isDir {
			continue
		}
		if err := copyFile(root, e, w); err != nil {
			return nil, nil, srcErr(err, "cannot read "+e.name)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, nil, srcErr(err, "cannot finish the archive")
	}
	out := buf.Bytes()
	a, err := OpenArchive(out, WithMaxBytes(cfg.maxBytes), WithMaxEntries(cfg.maxEntries))
	if err != nil {
		return nil, nil, fmt.Errorf("packing %s produced an archive that does not open: %w", dir, err)
	}
	return out, a.Manifest(), nil
}

// packManifest reads and checks the folder's murmur.yaml, for errors that name the
// folder rather than the archive.
func packManifest(root *os.Root, dir string) (*manifest.ArtifactManifest, error) {
	where := filepath.Join(dir, ManifestFile)
	fi, err := root.Lstat(ManifestFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, refuse(CodeNoManifest, fmt.Sprintf("%s has no %s", dir, ManifestFile),
			"add the artifact's murmur.yaml (name, version, runtime) to the folder")
	}
	if err != nil {
		return nil, refuseWrap(err, CodePackSource, "cannot read "+where, "check its permissions")
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, refuse(CodePackSymlink, where+" is a symlink", "replace it with a regular file")
	}
	if !fi.Mode().IsRegular() {
		return nil, refuse(CodeNoManifest, where+" is not a regular file", "make murmur.yaml a regular file")
	}
	if fi.Size() > manifest.MaxFileSize {
		return nil, errs.New(manifest.CodeTooLarge, "manifest", fmt.Sprintf("%s is %d bytes, over the %d-byte limit", where, fi.Size(), manifest.MaxFileSize), "keep the artifact manifest small")
	}
	data, err := root.ReadFile(ManifestFile)
	if err != nil {
		return nil, refuseWrap(err, CodePackSource, "cannot read "+where, "check its permissions")
	}
	m, _, err := manifest.ParseArtifactManifest(data, where)
	if err != nil {
		return nil, err
	}
	if err := checkIdentity(m); err != nil {
		return nil, err
	}
	return m, nil
}

// packList walks the folder and returns its entries sorted by name.
func packList(root *os.Root, dir string, cfg openConfig) ([]packEntry, error) {
	var entries []packEntry
	var total int64
	folded := map[string]string{} // fold key → name
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return refuseWrap(err, CodePackSource, "cannot read "+filepath.Join(dir, filepath.FromSlash(p)), "check its permissions")
		}
		if p == "." {
			return nil
		}
		where := filepath.Join(dir, filepath.FromSlash(p))
		t := d.Type()
		switch {
		case d.IsDir() && d.Name() == ".git":
			return fs.SkipDir
		case !d.IsDir() && d.Name() == ".DS_Store":
			return nil
		case t&fs.ModeSymlink != 0:
			return refuse(CodePackSymlink, where+" is a symlink; artifacts hold only files and folders",
				"replace the symlink with a copy of what it points to, or move it out of the folder")
		case !d.IsDir() && !t.IsRegular():
			return refuse(CodePackSpecial, fmt.Sprintf("%s is a %s, not a regular file", where, typeName(t)), "move it out of the folder")
		}
		e := packEntry{name: p, isDir: d.IsDir()}
		if e.isDir {
			e.name += "/"
		}
		if code, why := nameProblem(e.name); code != "" {
			return refuse(code, fmt.Sprintf("%s: name %q %s", dir, e.name, why), "rename the file")
		}
		if prev, ok := folded[foldKey(p)]; ok {
			return refuse(CodeDuplicate, fmt.Sprintf("%s holds %q and %q, whose names differ only in case", dir, prev, p),
				"rename one: case-insensitive file systems would merge them")
		}
		folded[foldKey(p)] = p
		if !e.isDir {
			info, err := d.Info()
			if err != nil {
				return refuseWrap(err, CodePackSource, "cannot stat "+where, "check its permissions")
			}
			e.size = info.Size()
			total += e.size
			if total > cfg.maxBytes {
				return refuse(CodeDeclaredSize, fmt.Sprintf("%s holds more than %d bytes of files", dir, cfg.maxBytes), "keep an artifact under 500 MiB")
			}
		}
		entries = append(entries, e)
		if len(entries) > cfg.maxEntries {
			return refuse(CodeTooManyEntries, fmt.Sprintf("%s holds more than %d files and folders", dir, cfg.maxEntries), "ship fewer files")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	return entries, nil
}

// copyFile copies one file into the archive, refusing one that changed size since it
// was listed (the declared totals would no longer hold).
func copyFile(root *os.Root, e packEntry, w io.Writer) error {
	f, err := root.Open(e.name)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, e.size+1))
	if err != nil {
		return err
	}
	if n != e.size {
		return fmt.Errorf("%s changed size while being packed (%d, then %d bytes)", e.name, e.size, n)
	}
	return nil
}
