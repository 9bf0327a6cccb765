package registry

import (
	"archive/zip"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	maxNameLen    = 1024
	maxSegmentLen = 255
)

// checkHeaders applies the name, type, method and declared-size rules to every entry.
func (a *Archive) checkHeaders(cfg openConfig) error {
	files := map[string]string{}    // fold key → name, regular files
	explicit := map[string]string{} // fold key → name, folder entries
	dirs := map[string]string{}     // fold key → name, every folder, explicit or implied
	var declared uint64
	for _, f := range a.zr.File {
		name, isDir, err := checkEntry(f)
		if err != nil {
			return err
		}
		key := foldKey(name)
		if isDir {
			if prev, ok := explicit[key]; ok {
				return duplicate(prev+"/", f.Name)
			}
			explicit[key] = name
			dirs[key] = name
			a.dirs = append(a.dirs, name)
		} else {
			if prev, ok := files[key]; ok {
				return duplicate(prev, f.Name)
			}
			files[key] = name
			a.entries[name] = f
			a.files = append(a.files, name)
		}
		for p := path.Dir(name); p != "."; p = path.Dir(p) {
			dirs[foldKey(p)] = p
		}
		declared += f.UncompressedSize64
		if f.UncompressedSize64 > uint64(cfg.maxBytes) || declared > uint64(cfg.maxBytes) {
			return refuse(CodeDeclaredSize,
				fmt.Sprintf("the archive declares more than %d decompressed bytes in total (passed at entry %q, which declares %d): refused as a likely zip bomb", cfg.maxBytes, f.Name, f.UncompressedSize64),
				"keep an artifact under 500 MiB decompressed")
		}
	}
	sort.Strings(a.files)
	sort.Strings(a.dirs)
	for _, name := range a.files {
		if d, ok := dirs[foldKey(name)]; ok {
			return refuse(CodePathConflict, fmt.Sprintf("entry %q is a file, but %q is also used as a folder", name, d),
				"rename one of them so a name is either a file or a folder")
		}
	}
	return nil
}

func duplicate(first, second string) error {
	return refuse(CodeDuplicate, fmt.Sprintf("entries %q and %q have the same name (exactly or ignoring case)", first, second),
		"keep one entry per name; names differing only in case count as the same")
}

// checkEntry returns the entry's name without a folder's trailing slash, whether it is
// a folder, or why it is refused.
func checkEntry(f *zip.File) (string, bool, error) {
	if code, why := nameProblem(f.Name); code != "" {
		return "", false, refuse(code, fmt.Sprintf("entry name %s %s", quoteShort(f.Name), why), fixRebuild+" from a plain folder")
	}
	isDir := strings.HasSuffix(f.Name, "/")
	name := strings.TrimSuffix(f.Name, "/")
	mode := f.Mode()
	switch {
	case mode&fs.ModeSymlink != 0:
		return "", false, refuse(CodeSymlink, fmt.Sprintf("entry %q is a symlink; archives may hold only files and folders", f.Name),
			"replace the symlink with the file it points to")
	case isDir && f.UncompressedSize64 != 0:
		return "", false, refuse(CodeSpecialEntry, fmt.Sprintf("folder entry %q carries %d bytes of data", f.Name, f.UncompressedSize64), fixRebuild)
	case !isDir && mode.IsDir():
		return "", false, refuse(CodeSpecialEntry, fmt.Sprintf("entry %q is marked as a folder but its name lacks the trailing '/'", f.Name), fixRebuild)
	case !isDir && !mode.IsRegular():
		return "", false, refuse(CodeSpecialEntry, fmt.Sprintf("entry %q has file type %s; only regular files and folders are allowed", f.Name, typeName(mode)),
			"ship only regular files")
	case !isDir && f.Method != zip.Store && f.Method != zip.Deflate:
		return "", false, refuse(CodeCompression, fmt.Sprintf("entry %q uses compression method %d; only store (0) and deflate (8) are accepted", f.Name, f.Method), fixRebuild)
	case f.Flags&0x1 != 0:
		return "", false, refuse(CodeEncrypted, fmt.Sprintf("entry %q is encrypted", f.Name), "ship the archive unencrypted; integrity comes from its sha256")
	}
	return name, isDir, nil
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "irregular (" + m.String() + ")"
}

// nameProblem returns the code and reason an entry name (folders with their trailing
// slash) is refused, or "" if it is acceptable.
func nameProblem(name string) (code, why string) {
	switch {
	case name == "":
		return CodeBadName, "is empty"
	case name[0] == '/' || name[0] == '\\' || len(name) >= 2 && name[1] == ':' && isASCIILetter(name[0]):
		return CodeAbsoluteName, "is absolute; entry names must be relative to the archive root"
	case strings.Contains(name, `\`):
		return CodeBackslash, "holds a backslash; entry names use '/' only"
	case len(name) > maxNameLen:
		return CodeBadName, fmt.Sprintf("is longer than %d bytes", maxNameLen)
	case !utf8.ValidString(name):
		return CodeBadName, "is not valid UTF-8"
	}
	body := strings.TrimSuffix(name, "/")
	for _, seg := range strings.Split(body, "/") {
		if seg == ".." {
			return CodeDotDot, "has a '..' segment and could escape the target folder"
		}
		if len(seg) > maxSegmentLen {
			return CodeBadName, fmt.Sprintf("has a segment longer than %d bytes", maxSegmentLen)
		}
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return CodeBadName, fmt.Sprintf("holds the control character %U", r)
		}
	}
	if body == "" || body == "." || path.Clean(body) != body {
		return CodeBadName, "is not in clean form (no '.', empty segments or doubled '/')"
	}
	return "", ""
}

// quoteShort quotes s for a message, cutting it past 120 bytes.
func quoteShort(s string) string {
	if len(s) <= 120 {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:120], len(s))
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// foldKey maps s to one representative of its Unicode simple case-folding class, so
// names a case-insensitive file system would merge get the same key.
func foldKey(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r < utf8.RuneSelf {
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			// ASCII letters fold with non-ASCII runes too (k/K/U+212A); the minimum of
			// the orbit is ASCII, so lowering is enough.
			b.WriteRune(r)
			continue
		}
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < m {
				m = f
			}
		}
		if 'A' <= m && m <= 'Z' {
			m += 'a' - 'A'
		}
		b.WriteRune(m)
	}
	return b.String()
}
