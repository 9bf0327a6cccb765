package escape

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/registry"
)

// Archive rows hand registry.OpenArchive (and then ExtractTo) a hostile .mur.zip built
// here byte by byte: zip slip, links, special files, name tricks, bombs, lying headers.
// The archive must be refused with its E-REG code (or the manifest's E-MAN code), the
// extraction target must stay empty, and nothing may appear beside it or change in the
// sentinel folder the names aim at. Pack and the local registry get the same treatment.

// zent is one entry of a hostile archive: a deflated regular file with honest headers
// by default; raw entries are written exactly as described, lies included.
type zent struct {
	name   string
	data   string
	mode   fs.FileMode // 0: a 0644 file, or a folder when the name ends in '/'
	raw    bool
	method uint16
	flags  uint16
	usize  uint64
	crc    uint32
}

// buildZip writes the entries as an archive; with rename set, each key found in the
// bytes is replaced by its same-length value (names zip.Writer will not write).
func buildZip(t *testing.T, rename map[string]string, ents ...zent) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range ents {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		switch {
		case e.mode != 0:
			h.SetMode(e.mode)
		case strings.HasSuffix(e.name, "/"):
			h.SetMode(fs.ModeDir | 0o755)
			h.Method = zip.Store
		default:
			h.SetMode(0o644)
		}
		var w io.Writer
		var err error
		if e.raw {
			h.Method, h.Flags = e.method, e.flags
			h.CompressedSize64, h.UncompressedSize64, h.CRC32 = uint64(len(e.data)), e.usize, e.crc
			w, err = zw.CreateRaw(h)
		} else {
			w, err = zw.CreateHeader(h)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	out := buf.Bytes()
	for from, to := range rename {
		out = bytes.ReplaceAll(out, []byte(from), []byte(to))
	}
	return out
}

func deflate(t *testing.T, data []byte) string {
	var b bytes.Buffer
	w, err := flate.NewWriter(&b, flate.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	w.Close()
	return b.String()
}

const (
	toolManifest   = "name: echo-tool\nversion: 1.0.0\nruntime: tool\ndescription: echoes\n"
	nativeManifest = "name: git-helper\nversion: 0.3.1\nruntime: tool\nimplementation: native\n"
	wasmMagic      = "\x00asm\x01\x00\x00\x00"
)

var (
	manifestEnt = zent{name: "murmur.yaml", data: toolManifest}
	payloadEnt  = zent{name: "capsule.wasm", data: wasmMagic}
)

// archiveAttack opens the archive make returns and extracts it into base/target, beside
// base/sentinel, under a root whose secret.txt the entry names aim at.
func archiveAttack(make func(t *testing.T) []byte, opts ...registry.OpenOption) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		root := t.TempDir()
		base := filepath.Join(root, "a", "b")
		target := filepath.Join(base, "target")
		if err := os.MkdirAll(target, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{filepath.Join(base, "sentinel"), filepath.Join(root, "secret.txt")} {
			if err := os.WriteFile(p, []byte(secret), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		a, err := registry.OpenArchive(make(t))
		if err == nil {
			err = a.ExtractTo(target)
		}
		var out []string
		if err == nil {
			out = append(out, "the archive was opened and extracted")
		}
		if ents, _ := os.ReadDir(target); len(ents) != 0 {
			out = append(out, fmt.Sprintf("the refused archive left %d entries in the target", len(ents)))
		}
		out = append(out, treeChanged(root, map[string]bool{"a": true, "a/b": true, "a/b/target": true, "a/b/sentinel": true, "secret.txt": true})...)
		return outcome{class: codeClass(err), escaped: strings.Join(out, "; ")}
	}
}

// treeChanged lists what under root is not in want (relative paths), and any sentinel
// whose content changed.
func treeChanged(root string, want map[string]bool) []string {
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(root, p)
		if err != nil || rel == "." || strings.HasPrefix(rel, "a/b/target/") {
			return nil
		}
		if !want[rel] {
			out = append(out, "appeared: "+rel)
		} else if d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); string(b) != secret {
				out = append(out, "changed: "+rel)
			}
		}
		return nil
	})
	return out
}

// codeClass names a refusal by its codes (the first E-REG or E-MAN code), "accepted"
// for none.
func codeClass(err error) string {
	if err == nil {
		return "accepted"
	}
	codes := errs.Codes(err)
	for _, c := range codes {
		if strings.HasPrefix(c, "E-REG-") || strings.HasPrefix(c, "E-MAN-") {
			return c
		}
	}
	return fmt.Sprintf("uncoded: %v", err)
}

func archiveRows() []row {
	zeros := make([]byte, 10000)
	plain := func(ents ...zent) func(*testing.T) []byte {
		return func(t *testing.T) []byte {
			return buildZip(t, nil, append([]zent{manifestEnt, payloadEnt}, ents...)...)
		}
	}
	cases := []struct {
		attack, want string
		make         func(*testing.T) []byte
	}{
		{"zip slip: ../", registry.CodeDotDot, plain(zent{name: "../../../secret.txt", data: "pwned"})},
		{"zip slip: a name climbing out after a folder", registry.CodeDotDot, plain(zent{name: "x/../../../secret.txt", data: "pwned"})},
		{"zip slip: a folder entry ../", registry.CodeDotDot, plain(zent{name: "../escape/"})},
		{"zip slip: backslash ..\\", registry.CodeBackslash, plain(zent{name: `..\..\..\secret.txt`, data: "pwned"})},
		{"absolute name /", registry.CodeAbsoluteName, plain(zent{name: "/tmp/escape-abs", data: "pwned"})},
		{"absolute drive name C:\\", registry.CodeAbsoluteName, plain(zent{name: `C:\escape`, data: "pwned"})},
		{"absolute drive name c:/", registry.CodeAbsoluteName, plain(zent{name: "c:/escape", data: "pwned"})},
		{"UNC name \\\\host\\share", registry.CodeAbsoluteName, plain(zent{name: `\\host\share\x`, data: "pwned"})},
		{"symlink entry to /etc/passwd", registry.CodeSymlink, plain(zent{name: "link", data: "/etc/passwd", mode: fs.ModeSymlink | 0o777})},
		{"symlink entry to ../../secret.txt", registry.CodeSymlink, plain(zent{name: "rel-link", data: "../../../secret.txt", mode: fs.ModeSymlink | 0o777})},
		{"symlink named like the payload", registry.CodeSymlink, func(t *testing.T) []byte {
			return buildZip(t, nil, manifestEnt, zent{name: "capsule.wasm", data: "../../secret.txt", mode: fs.ModeSymlink | 0o777})
		}},
		{"symlink folder, then a file through it", registry.CodeSymlink, plain(zent{name: "d", data: "../..", mode: fs.ModeSymlink | 0o777}, zent{name: "d/secret.txt", data: "pwned"})},
		{"named pipe entry", registry.CodeSpecialEntry, plain(zent{name: "fifo", mode: fs.ModeNamedPipe | 0o644})},
		{"device entry", registry.CodeSpecialEntry, plain(zent{name: "dev", mode: fs.ModeDevice | fs.ModeCharDevice | 0o644})},
		{"setuid file entry", "accepted without setuid", nil}, // replaced below
		{"a folder entry carrying data", registry.CodeSpecialEntry, func(t *testing.T) []byte {
			return buildZip(t, map[string]string{"dX": "d/"}, manifestEnt, payloadEnt,
				zent{name: "dX", data: "xx", raw: true, method: zip.Store, usize: 2, crc: crc32.ChecksumIEEE([]byte("xx"))})
		}},
		{"NUL in a name (a C reader would stop at run.sh)", registry.CodeBadName, plain(zent{name: "run.sh\x00.md", data: "x"})},
		{"newline in a name", registry.CodeBadName, plain(zent{name: "a\nb", data: "x"})},
		{"invalid UTF-8 in a name", registry.CodeBadName, plain(zent{name: "a\xffb", data: "x"})},
		{"./ segment", registry.CodeBadName, plain(zent{name: "./x", data: "x"})},
		{"a 256-byte segment", registry.CodeBadName, plain(zent{name: strings.Repeat("a", 256), data: "x"})},
		{"a second murmur.yaml overriding the first", registry.CodeDuplicate, plain(zent{name: "murmur.yaml", data: "name: evil\nversion: 6.6.6\n"})},
		{"names equal ignoring case (MURMUR.YAML)", registry.CodeDuplicate, plain(zent{name: "MURMUR.YAML", data: "name: evil\nversion: 6.6.6\n"})},
		{"names equal under Unicode folding (Kelvin sign)", registry.CodeDuplicate, plain(zent{name: "k.txt"}, zent{name: "\u212a.txt"})},
		{"a name both file and folder", registry.CodePathConflict, plain(zent{name: "a", data: "1"}, zent{name: "a/b", data: "2"})},
		{"bzip2 entry", registry.CodeCompression, plain(zent{name: "x", data: "BZh91AY", raw: true, method: 12, usize: 3})},
		{"encrypted entry", registry.CodeEncrypted, plain(zent{name: "x", data: "xyz", raw: true, method: zip.Store, flags: 1, usize: 3})},
		{"zip bomb: declares 600 MiB", registry.CodeDeclaredSize, plain(zent{name: "big.bin", data: "\x03\x00", raw: true, method: zip.Deflate, usize: 600 << 20})},
		{"zip bomb: 6 entries of 100 MiB declared", registry.CodeDeclaredSize, func(t *testing.T) []byte {
			ents := []zent{manifestEnt, payloadEnt}
			for i := range 6 {
				ents = append(ents, zent{name: fmt.Sprintf("part%d", i), data: "\x03\x00", raw: true, method: zip.Deflate, usize: 100 << 20})
			}
			return buildZip(t, nil, ents...)
		}},
		{"zip bomb: header lies small", registry.CodeActualSize, func(t *testing.T) []byte {
			return buildZip(t, nil, manifestEnt, payloadEnt, zent{name: "x", data: deflate(t, zeros), raw: true, method: zip.Deflate, usize: 100, crc: crc32.ChecksumIEEE(zeros[:100])})
		}},
		{"stored entry longer than declared", registry.CodeActualSize, plain(zent{name: "x", data: "abcdef", raw: true, method: zip.Store, usize: 3, crc: crc32.ChecksumIEEE([]byte("abc"))})},
		{"CRC mismatch", registry.CodeCorrupt, plain(zent{name: "x", data: "abc", raw: true, method: zip.Store, usize: 3, crc: 12345})},
		{"bytes that are not a zip", registry.CodeNotZip, func(*testing.T) []byte { return []byte("PK\x03\x04 certainly not a zip") }},
		{"manifest naming itself ../evil", "E-MAN-004", func(t *testing.T) []byte {
			return buildZip(t, nil, zent{name: "murmur.yaml", data: "name: ../evil\nversion: 1.0.0\nruntime: tool\n"}, payloadEnt)
		}},
		{"manifest of 5 MiB (a YAML bomb's room)", "E-MAN-022", func(t *testing.T) []byte {
			big := make([]byte, 5<<20)
			return buildZip(t, nil, zent{name: "murmur.yaml", data: deflate(t, big), raw: true, method: zip.Deflate, usize: 5 << 20, crc: crc32.ChecksumIEEE(big)}, payloadEnt)
		}},
		{"native payload outside bin/", registry.CodeNoPayload, func(t *testing.T) []byte {
			return buildZip(t, nil, zent{name: "murmur.yaml", data: nativeManifest}, zent{name: "git-helper", data: "#!/bin/sh\n"})
		}},
	}
	var rows []row
	for i, c := range cases {
		r := row{id: fmt.Sprintf("AR-%02d", i+1), surface: Archive, attack: c.attack, want: c.want, run: archiveAttack(c.make)}
		if c.make == nil {
			r = row{id: r.id, surface: Archive, attack: "a set-uid, world-writable file entry", want: "accepted, mode 0644", run: setuidAttack}
		}
		rows = append(rows, r)
	}
	return append(rows,
		row{id: "AR-50", surface: Archive, attack: "pack a folder holding a symlink to a secret outside", want: registry.CodePackSymlink,
			run: packAttack(func(dir, outside string) error {
				return os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "notes.txt"))
			})},
		row{id: "AR-51", surface: Archive, attack: "pack a folder holding a named pipe", want: registry.CodePackSpecial,
			run: packAttack(func(dir, _ string) error { return syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644) })},
		row{id: "AR-52", surface: Archive, attack: "fetch an artifact named ../../outside from the local registry", want: registry.CodeArtifactName,
			run: fetchAttack(registry.Ref{Name: "../../outside", Version: "1.0.0"}, false)},
		row{id: "AR-53", surface: Archive, attack: "fetch a version ../../../outside", want: registry.CodeArtifactVersion,
			run: fetchAttack(registry.Ref{Name: "echo-tool", Version: "../../../outside"}, false)},
		row{id: "AR-54", surface: Archive, attack: "fetch a published archive whose bytes were swapped on disk", want: registry.CodeHashMismatch,
			run: fetchAttack(registry.Ref{Name: "echo-tool", Version: "1.0.0"}, true)},
	)
}

// setuidAttack: a set-uid, world-writable entry is extracted as a plain 0644 file.
func setuidAttack(t *testing.T, s *suite) outcome {
	data := buildZip(t, nil, manifestEnt, payloadEnt, zent{name: "run.sh", data: "#!/bin/sh\n", mode: fs.ModeSetuid | fs.ModeSetgid | 0o777})
	a, err := registry.OpenArchive(data)
	if err != nil {
		return blocked(codeClass(err))
	}
	dir := filepath.Join(t.TempDir(), "x")
	if err := a.ExtractTo(dir); err != nil {
		return blocked(codeClass(err))
	}
	st, err := os.Stat(filepath.Join(dir, "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode() != 0o644 {
		return outcome{class: "accepted, mode " + st.Mode().String(), escaped: "extracted with mode " + st.Mode().String()}
	}
	return blocked("accepted, mode 0644")
}

// packAttack: Pack of a tool folder that plant made hostile is refused, and no archive
// carrying the secret comes out.
func packAttack(plant func(dir, outside string) error) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		root := t.TempDir()
		dir, outside := filepath.Join(root, "tool"), filepath.Join(root, "outside")
		for _, d := range []string{dir, outside} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(filepath.Join(outside, "secret.txt"), []byte(secret), 0o644)
		os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte(toolManifest), 0o644)
		os.WriteFile(filepath.Join(dir, "capsule.wasm"), []byte(wasmMagic), 0o644)
		if err := plant(dir, outside); err != nil {
			t.Fatal(err)
		}
		data, _, err := registry.Pack(dir)
		var escaped string
		if bytes.Contains(data, []byte(secret)) {
			escaped = "the archive carries the secret"
		}
		return outcome{class: codeClass(err), escaped: escaped}
	}
}

// fetchAttack asks a local registry holding echo-tool 1.0.0 for ref; with swap, the
// stored archive's bytes are replaced by another valid archive first.
func fetchAttack(ref registry.Ref, swap bool) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		root := t.TempDir()
		reg := filepath.Join(root, "registry")
		l := registry.NewLocal(reg)
		good := buildZip(t, nil, manifestEnt, payloadEnt)
		if _, err := l.Publish(context.Background(), good, ""); err != nil {
			t.Fatal(err)
		}
		if swap {
			evil := buildZip(t, nil, manifestEnt, zent{name: "capsule.wasm", data: wasmMagic + "evil"})
			paths, _ := filepath.Glob(filepath.Join(reg, "echo-tool", "1.0.0", "*.mur.zip"))
			if len(paths) != 1 {
				t.Fatalf("published archive not found: %v", paths)
			}
			if err := os.WriteFile(paths[0], evil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, err := l.Fetch(context.Background(), ref)
		var escaped string
		if err == nil {
			escaped = fmt.Sprintf("fetched %v", b != nil)
		}
		return outcome{class: codeClass(err), escaped: escaped}
	}
}
