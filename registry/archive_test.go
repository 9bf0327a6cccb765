package registry

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/manifest"
)

// zent is one entry of a test archive. By default it is a deflated regular file with
// honest headers; raw entries are written with CreateRaw exactly as described.
type zent struct {
	name   string
	data   string
	mode   fs.FileMode // 0 = 0644 file (or folder if the name ends in '/')
	method uint16      // with raw
	flags  uint16      // with raw
	raw    bool        // write data as-is with the sizes and CRC below
	usize  uint64
	crc    uint32
	// patch replaces name, once written, by this same-length name in every header:
	// the way to get names zip.Writer will not write data under (folders with data).
	patch string
}

// makeZip builds an archive; it panics on a writer error (test inputs only).
func makeZip(ents ...zent) []byte {
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
			panic(err)
		}
		if _, err := io.WriteString(w, e.data); err != nil {
			panic(err)
		}
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	out := buf.Bytes()
	for _, e := range ents {
		if e.patch != "" {
			out = bytes.ReplaceAll(out, []byte(e.name), []byte(e.patch))
		}
	}
	return out
}

func deflated(data []byte) string {
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.BestCompression)
	w.Write(data)
	w.Close()
	return b.String()
}

const (
	toolYAML   = "name: echo-tool\nversion: 1.0.0\nruntime: tool\ndescription: echoes\n"
	nativeYAML = "name: git-helper\nversion: 0.3.1\nruntime: tool\nimplementation: native\n"
	skillYAML  = "name: style-guide\nversion: 2.0.0\nruntime: skill\n"
	driverYAML = "name: openai-driver\nversion: 1.0.0\nruntime: driver\n"
	hookYAML   = "name: audit-hook\nversion: 1.0.0\nruntime: hook\n"
	wasmMagic  = "\x00asm\x01\x00\x00\x00"
)

var (
	manifestEnt = zent{name: "murmur.yaml", data: toolYAML}
	wasmEnt     = zent{name: "capsule.wasm", data: wasmMagic}
)

// openAndExtract opens data and, if that works, extracts it into a fresh existing
// folder. It returns the error and asserts that a refusal left the folder empty.
func openAndExtract(t *testing.T, data []byte, opts ...OpenOption) (*Archive, string, error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "target")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := OpenArchive(data, opts...)
	if err == nil {
		err = a.ExtractTo(dir)
	}
	if err != nil {
		assertEmpty(t, dir)
		assertEmpty(t, filepath.Dir(dir), "target") // no temp folders left beside it
	}
	return a, dir, err
}

// assertEmpty fails unless dir holds nothing but the names in keep.
func assertEmpty(t *testing.T, dir string, keep ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	for _, e := range ents {
		if !slices.Contains(keep, e.Name()) {
			t.Fatalf("%s is not empty: holds %s", dir, e.Name())
		}
	}
}

// assertCode fails unless err carries code; E-REG refusals must be complete.
func assertCode(t *testing.T, err error, code string) *errs.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want %s", code)
	}
	e := errs.Find(err, code)
	if e == nil {
		t.Fatalf("got %v (codes %v); want %s", err, errs.Codes(err), code)
	}
	if strings.HasPrefix(code, "E-REG-") && (e.Part != "registry" || e.Msg == "" || e.Fix == "") {
		t.Fatalf("refusal %s incomplete: part %q msg %q fix %q", code, e.Part, e.Msg, e.Fix)
	}
	return e
}

func TestOpenArchiveAccepts(t *testing.T) {
	tests := []struct {
		name    string
		ents    []zent
		payload Payload
		files   []string
	}{
		{"wasm tool", []zent{manifestEnt, wasmEnt}, Payload{PayloadWasm, "capsule.wasm"}, []string{"capsule.wasm", "murmur.yaml"}},
		{"one other root wasm", []zent{manifestEnt, {name: "echo.wasm", data: wasmMagic}, {name: "lib/x.wasm", data: "x"}},
			Payload{PayloadWasm, "echo.wasm"}, []string{"echo.wasm", "lib/x.wasm", "murmur.yaml"}},
		{"capsule.wasm wins over others", []zent{manifestEnt, {name: "a.wasm"}, wasmEnt, {name: "b.wasm"}},
			Payload{PayloadWasm, "capsule.wasm"}, []string{"a.wasm", "b.wasm", "capsule.wasm", "murmur.yaml"}},
		{"driver", []zent{{name: "murmur.yaml", data: driverYAML}, wasmEnt}, Payload{PayloadWasm, "capsule.wasm"}, nil},
		{"hook", []zent{{name: "murmur.yaml", data: hookYAML}, wasmEnt}, Payload{PayloadWasm, "capsule.wasm"}, nil},
		{"native tool", []zent{{name: "murmur.yaml", data: nativeYAML}, {name: "bin/"}, {name: "bin/git-helper", data: "#!/bin/sh\n", mode: 0o755}},
			Payload{PayloadNative, "bin/git-helper"}, []string{"bin/git-helper", "murmur.yaml"}},
		{"skill any case", []zent{{name: "murmur.yaml", data: skillYAML}, {name: "SKILL.md", data: "# Style\n"}},
			Payload{PayloadSkill, "SKILL.md"}, []string{"SKILL.md", "murmur.yaml"}},
		{"folders and stored entries", []zent{manifestEnt, wasmEnt, {name: "docs/"}, {name: "docs/deep/"}, {name: "empty/"},
			{name: "docs/deep/a.txt", data: "stored", raw: true, method: zip.Store, usize: 6, crc: crc32.ChecksumIEEE([]byte("stored"))}},
			Payload{PayloadWasm, "capsule.wasm"}, []string{"capsule.wasm", "docs/deep/a.txt", "murmur.yaml"}},
		{"non-ASCII names", []zent{manifestEnt, wasmEnt, {name: "doc/résumé.md", data: "é"}}, Payload{PayloadWasm, "capsule.wasm"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := makeZip(tt.ents...)
			a, dir, err := openAndExtract(t, data)
			if err != nil {
				t.Fatal(err)
			}
			if a.Payload() != tt.payload {
				t.Errorf("payload %+v, want %+v", a.Payload(), tt.payload)
			}
			if tt.files != nil && !slices.Equal(a.files, tt.files) {
				t.Errorf("files %v, want %v", a.files, tt.files)
			}
			var total int64
			for _, e := range tt.ents {
				if strings.HasSuffix(e.name, "/") {
					if fi, err := os.Stat(filepath.Join(dir, e.name)); err != nil || !fi.IsDir() {
						t.Errorf("folder %s not extracted: %v", e.name, err)
					}
					continue
				}
				got, err := a.ReadFile(e.name)
				if err != nil || string(got) != e.data {
					t.Errorf("ReadFile(%s) = %q, %v; want %q", e.name, got, err, e.data)
				}
				onDisk, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(e.name)))
				if err != nil || string(onDisk) != e.data {
					t.Errorf("extracted %s = %q, %v; want %q", e.name, onDisk, err, e.data)
				}
				total += int64(len(e.data))
			}
			if a.size != total {
				t.Errorf("size %d, want %d", a.size, total)
			}
		})
	}
}

func TestOpenArchiveManifest(t *testing.T) {
	a, err := OpenArchive(makeZip(zent{name: "murmur.yaml", data: toolYAML + "colour: blue\n"}, wasmEnt))
	if err != nil {
		t.Fatal(err)
	}
	m := a.Manifest()
	if m.Name != "echo-tool" || m.Version != "1.0.0" || m.Runtime != "tool" || m.Description != "echoes" {
		t.Errorf("manifest %+v", m)
	}
	if len(a.warns) != 1 || a.warns[0].Code != "W-MAN-001" {
		t.Errorf("warnings %v, want one unknown-key warning", a.warns)
	}
	_, err = a.ReadFile("nope.txt")
	assertCode(t, err, CodeNoSuchFile)
	_, err = a.ReadFile("./murmur.yaml")
	assertCode(t, err, CodeNoSuchFile)
}

func TestOpenArchiveKeepsItsOwnCopy(t *testing.T) {
	data := makeZip(manifestEnt, zent{name: "capsule.wasm", data: wasmMagic, raw: true, method: zip.Store, usize: 8, crc: crc32.ChecksumIEEE([]byte(wasmMagic))})
	a, err := OpenArchive(data)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(wasmMagic))
	data[i] = 'X'
	if got, err := a.ReadFile("capsule.wasm"); err != nil || string(got) != wasmMagic {
		t.Fatalf("ReadFile after the caller changed its slice: %q, %v", got, err)
	}
}

func TestOpenArchiveRefuses(t *testing.T) {
	zeros := make([]byte, 10000)
	tests := []struct {
		name string
		data []byte
		opts []OpenOption
		code string
	}{
		{"not a zip", []byte("PK\x03\x04 certainly not a zip"), nil, CodeNotZip},
		{"empty input", nil, nil, CodeNotZip},
		{"too many entries", makeZip(manifestEnt, wasmEnt, zent{name: "a"}, zent{name: "b"}), []OpenOption{WithMaxEntries(3)}, CodeTooManyEntries},
		{"absolute slash", makeZip(manifestEnt, wasmEnt, zent{name: "/abs", data: "x"}), nil, CodeAbsoluteName},
		{"absolute drive backslash", makeZip(manifestEnt, wasmEnt, zent{name: `C:\x`, data: "x"}), nil, CodeAbsoluteName},
		{"absolute drive slash", makeZip(manifestEnt, wasmEnt, zent{name: "c:/x", data: "x"}), nil, CodeAbsoluteName},
		{"absolute UNC", makeZip(manifestEnt, wasmEnt, zent{name: `\\host\share\x`, data: "x"}), nil, CodeAbsoluteName},
		{"dotdot first", makeZip(manifestEnt, wasmEnt, zent{name: "../x", data: "x"}), nil, CodeDotDot},
		{"dotdot inside", makeZip(manifestEnt, wasmEnt, zent{name: "a/../../x", data: "x"}), nil, CodeDotDot},
		{"dotdot folder", makeZip(manifestEnt, wasmEnt, zent{name: "a/../"}), nil, CodeDotDot},
		{"backslash", makeZip(manifestEnt, wasmEnt, zent{name: `a\..\x`, data: "x"}), nil, CodeBackslash},
		{"empty name", makeZip(manifestEnt, wasmEnt, zent{name: "", data: "x"}), nil, CodeBadName},
		{"dot segment", makeZip(manifestEnt, wasmEnt, zent{name: "./x", data: "x"}), nil, CodeBadName},
		{"double slash", makeZip(manifestEnt, wasmEnt, zent{name: "a//x", data: "x"}), nil, CodeBadName},
		{"lone dot folder", makeZip(manifestEnt, wasmEnt, zent{name: "./"}), nil, CodeBadName},
		{"NUL", makeZip(manifestEnt, wasmEnt, zent{name: "a\x00b", data: "x"}), nil, CodeBadName},
		{"newline", makeZip(manifestEnt, wasmEnt, zent{name: "a\nb", data: "x"}), nil, CodeBadName},
		{"invalid UTF-8", makeZip(manifestEnt, wasmEnt, zent{name: "a\xffb", data: "x"}), nil, CodeBadName},
		{"long segment", makeZip(manifestEnt, wasmEnt, zent{name: strings.Repeat("a", 256), data: "x"}), nil, CodeBadName},
		{"long name", makeZip(manifestEnt, wasmEnt, zent{name: strings.Repeat("a/", 600) + "x", data: "x"}), nil, CodeBadName},
		{"symlink", makeZip(manifestEnt, wasmEnt, zent{name: "link", data: "/etc/passwd", mode: fs.ModeSymlink | 0o777}), nil, CodeSymlink},
		{"symlink named like the payload", makeZip(manifestEnt, zent{name: "capsule.wasm", data: "../../x", mode: fs.ModeSymlink | 0o777}), nil, CodeSymlink},
		{"named pipe", makeZip(manifestEnt, wasmEnt, zent{name: "fifo", mode: fs.ModeNamedPipe | 0o644}), nil, CodeSpecialEntry},
		{"device", makeZip(manifestEnt, wasmEnt, zent{name: "dev", mode: fs.ModeDevice | fs.ModeCharDevice | 0o644}), nil, CodeSpecialEntry},
		{"folder mode without slash", makeZip(manifestEnt, wasmEnt, zent{name: "d", mode: fs.ModeDir | 0o755}), nil, CodeSpecialEntry},
		{"folder with data", makeZip(manifestEnt, wasmEnt, zent{name: "dX", patch: "d/", data: "xx", raw: true, method: zip.Store, usize: 2, crc: crc32.ChecksumIEEE([]byte("xx"))}), nil, CodeSpecialEntry},
		{"duplicate exact", makeZip(manifestEnt, wasmEnt, zent{name: "a.txt", data: "1"}, zent{name: "a.txt", data: "2"}), nil, CodeDuplicate},
		{"duplicate manifest", makeZip(manifestEnt, wasmEnt, zent{name: "murmur.yaml", data: "name: evil\nversion: 6.6.6\n"}), nil, CodeDuplicate},
		{"duplicate case", makeZip(manifestEnt, wasmEnt, zent{name: "README.md"}, zent{name: "readme.md"}), nil, CodeDuplicate},
		{"duplicate Kelvin sign", makeZip(manifestEnt, wasmEnt, zent{name: "k.txt"}, zent{name: "\u212a.txt"}), nil, CodeDuplicate},
		{"duplicate folder", makeZip(manifestEnt, wasmEnt, zent{name: "d/"}, zent{name: "D/"}), nil, CodeDuplicate},
		{"file and folder", makeZip(manifestEnt, wasmEnt, zent{name: "a", data: "1"}, zent{name: "a/b", data: "2"}), nil, CodePathConflict},
		{"file and folder ignoring case", makeZip(manifestEnt, wasmEnt, zent{name: "A", data: "1"}, zent{name: "a/b", data: "2"}), nil, CodePathConflict},
		{"file and folder entry", makeZip(manifestEnt, wasmEnt, zent{name: "a/"}, zent{name: "a", data: "2"}), nil, CodePathConflict},
		{"bzip2", makeZip(manifestEnt, wasmEnt, zent{name: "x", data: "BZh91AY", raw: true, method: 12, usize: 3}), nil, CodeCompression},
		{"encrypted", makeZip(manifestEnt, wasmEnt, zent{name: "x", data: "xyz", raw: true, method: zip.Store, flags: 1, usize: 3}), nil, CodeEncrypted},
		{"declared over a lowered cap", makeZip(manifestEnt, wasmEnt, zent{name: "a", data: string(zeros[:600])}, zent{name: "b", data: string(zeros[:600])}),
			[]OpenOption{WithMaxBytes(1000)}, CodeDeclaredSize},
		{"header lies small", makeZip(manifestEnt, wasmEnt, zent{name: "x", data: deflated(zeros), raw: true, method: zip.Deflate, usize: 100, crc: crc32.ChecksumIEEE(zeros[:100])}), nil, CodeActualSize},
		{"stored entry longer than declared", makeZip(manifestEnt, wasmEnt, zent{name: "x", data: "abcdef", raw: true, method: zip.Store, usize: 3, crc: crc32.ChecksumIEEE([]byte("abc"))}), nil, CodeActualSize},
		{"truncated", makeZip(manifestEnt, wasmEnt, zent{name: "x", data: deflated(zeros[:100]), raw: true, method: zip.Deflate, usize: 1000, crc: crc32.ChecksumIEEE(zeros[:1000])}), nil, CodeCorrupt},
		{"CRC mismatch", makeZip(manifestEnt, wasmEnt, zent{name: "x", data: "abc", raw: true, method: zip.Store, usize: 3, crc: 12345}), nil, CodeCorrupt},
		{"bad deflate stream", makeZip(manifestEnt, wasmEnt, zent{name: "x", data: "\xff\xff\xff\xff", raw: true, method: zip.Deflate, usize: 3}), nil, CodeCorrupt},
		{"no manifest", makeZip(wasmEnt), nil, CodeNoManifest},
		{"manifest not at root", makeZip(zent{name: "sub/murmur.yaml", data: toolYAML}, wasmEnt), nil, CodeNoManifest},
		{"manifest invalid", makeZip(zent{name: "murmur.yaml", data: "name: Bad Name\nversion: 1\n"}, wasmEnt), nil, "E-MAN-004"},
		{"manifest reserved version", makeZip(zent{name: "murmur.yaml", data: "name: x\nversion: latest\n"}, wasmEnt), nil, "E-MAN-005"},
		{"manifest not YAML", makeZip(zent{name: "murmur.yaml", data: "{{{"}, wasmEnt), nil, "E-MAN-001"},
		{"manifest too large", makeZip(zent{name: "murmur.yaml", data: deflated(make([]byte, 5<<20)), raw: true, method: zip.Deflate, usize: 5 << 20,
			crc: crc32.ChecksumIEEE(make([]byte, 5<<20))}, wasmEnt), nil, "E-MAN-022"},
		{"wasm tool without wasm", makeZip(manifestEnt, zent{name: "bin/echo-tool", data: "x"}), nil, CodeNoPayload},
		{"wasm only in a folder", makeZip(manifestEnt, zent{name: "lib/capsule.wasm", data: "x"}), nil, CodeNoPayload},
		{"native tool without binary", makeZip(zent{name: "murmur.yaml", data: nativeYAML}, zent{name: "bin/other", data: "x"}), nil, CodeNoPayload},
		{"native binary not in bin", makeZip(zent{name: "murmur.yaml", data: nativeYAML}, zent{name: "git-helper", data: "x"}), nil, CodeNoPayload},
		{"skill without skill.md", makeZip(zent{name: "murmur.yaml", data: skillYAML}, zent{name: "docs/skill.md", data: "x"}), nil, CodeNoPayload},
		{"two root wasm", makeZip(manifestEnt, zent{name: "a.wasm"}, zent{name: "b.wasm"}), nil, CodeManyPayloads},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := openAndExtract(t, tt.data, tt.opts...)
			assertCode(t, err, tt.code)
			t.Log(err)
		})
	}
}

// bomb600 is a deflate stream of 600 MiB of zeros (about 620 KiB), built once. Go's
// compressor, flushed after every MiB, emits the same bytes for every MiB once its
// window is all zeros, so one MiB is compressed and its output repeated.
var bomb600 = sync.OnceValues(func() ([]byte, error) {
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestCompression)
	if err != nil {
		return nil, err
	}
	mib := make([]byte, 1<<20)
	chunk := func() []byte {
		w.Write(mib)
		w.Flush()
		b := bytes.Clone(buf.Bytes())
		buf.Reset()
		return b
	}
	head, body, again := chunk(), chunk(), chunk()
	if !bytes.Equal(body, again) {
		return nil, errors.New("flushed chunks of zeros differ: cannot repeat them")
	}
	w.Close()
	out := bytes.NewBuffer(head)
	for i := 1; i < 600; i++ {
		out.Write(body)
	}
	out.Write(buf.Bytes())
	return out.Bytes(), nil
})

func TestZipBombs(t *testing.T) {
	bomb, err := bomb600()
	if err != nil {
		t.Fatal(err)
	}
	if len(bomb) > 1<<20 {
		t.Fatalf("bomb is %d bytes; expected well under 1 MiB", len(bomb))
	}
	if !testing.Short() {
		n, err := io.Copy(io.Discard, flate.NewReader(bytes.NewReader(bomb)))
		if err != nil || n != 600<<20 {
			t.Fatalf("bomb inflates to %d bytes (%v), want 600 MiB", n, err)
		}
	}
	t.Run("declared", func(t *testing.T) {
		data := makeZip(manifestEnt, wasmEnt, zent{name: "big.bin", data: deflated([]byte("tiny")), raw: true, method: zip.Deflate, usize: 600 << 20})
		_, _, err := openAndExtract(t, data)
		assertCode(t, err, CodeDeclaredSize)
	})
	t.Run("declared over many entries", func(t *testing.T) {
		ents := []zent{manifestEnt, wasmEnt}
		for i := range 6 {
			ents = append(ents, zent{name: fmt.Sprintf("part%d", i), data: deflated(nil), raw: true, method: zip.Deflate, usize: 100 << 20})
		}
		_, _, err := openAndExtract(t, makeZip(ents...))
		assertCode(t, err, CodeDeclaredSize)
	})
	t.Run("actual", func(t *testing.T) {
		data := makeZip(manifestEnt, wasmEnt, zent{name: "zeros.bin", data: string(bomb), raw: true, method: zip.Deflate, usize: 1 << 10})
		_, _, err := openAndExtract(t, data)
		assertCode(t, err, CodeActualSize)
	})
	t.Run("actual honest header", func(t *testing.T) {
		data := makeZip(manifestEnt, wasmEnt, zent{name: "zeros.bin", data: string(bomb), raw: true, method: zip.Deflate, usize: 600 << 20})
		_, _, err := openAndExtract(t, data)
		assertCode(t, err, CodeDeclaredSize)
	})
}

func TestExtractTo(t *testing.T) {
	a, err := OpenArchive(makeZip(zent{name: "murmur.yaml", data: nativeYAML}, zent{name: "bin/git-helper", data: "#!/bin/sh\n", mode: 0o700},
		zent{name: "share/doc.txt", data: "doc", mode: 0o777}, zent{name: "empty/"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("absent target and modes", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "tools", "git-helper")
		if err := a.ExtractTo(dir); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]fs.FileMode{"murmur.yaml": 0o644, "bin/git-helper": 0o755, "share/doc.txt": 0o644, "empty": fs.ModeDir | 0o755, ".": fs.ModeDir | 0o755} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != want {
				t.Errorf("%s has mode %v, want %v", name, fi.Mode(), want)
			}
		}
		assertEmpty(t, filepath.Dir(dir), "git-helper")
	})
	t.Run("existing empty target with a trailing slash", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "x")
		os.Mkdir(dir, 0o700)
		if err := a.ExtractTo(dir + "/"); err != nil {
			t.Fatal(err)
		}
		assertEmpty(t, dir, "bin", "empty", "murmur.yaml", "share")
		assertEmpty(t, filepath.Dir(dir), "x")
	})
	t.Run("non-empty target", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "keep"), []byte("mine"), 0o600)
		assertCode(t, a.ExtractTo(dir), CodeTargetNotEmpty)
		assertEmpty(t, dir, "keep")
		if b, _ := os.ReadFile(filepath.Join(dir, "keep")); string(b) != "mine" {
			t.Fatal("existing file changed")
		}
		assertEmpty(t, filepath.Dir(dir), filepath.Base(dir))
	})
	t.Run("target is a file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "f")
		os.WriteFile(p, nil, 0o600)
		assertCode(t, a.ExtractTo(p), CodeTargetNotEmpty)
	})
	t.Run("parent not writable", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root ignores folder permissions")
		}
		parent := t.TempDir()
		os.Chmod(parent, 0o555)
		defer os.Chmod(parent, 0o755)
		assertCode(t, a.ExtractTo(filepath.Join(parent, "x")), CodeExtract)
		assertEmpty(t, parent)
	})
}

func TestNameProblem(t *testing.T) {
	ok := []string{"a", "a/b", "a/b/", "murmur.yaml", "bin/x", ".hidden", "a..b", "...", "é/ü", "a b"}
	for _, n := range ok {
		if code, why := nameProblem(n); code != "" {
			t.Errorf("nameProblem(%q) = %s %s; want accepted", n, code, why)
		}
	}
	bad := map[string]string{"": CodeBadName, "/": CodeAbsoluteName, "/a": CodeAbsoluteName, `\a`: CodeAbsoluteName, "Z:a": CodeAbsoluteName,
		"..": CodeDotDot, "../a": CodeDotDot, "a/..": CodeDotDot, "a/../": CodeDotDot, `a\b`: CodeBackslash, ".": CodeBadName, "a/./b": CodeBadName,
		"a//": CodeBadName, "a/b//": CodeBadName, "a\x7f": CodeBadName, "a\u0085": CodeBadName}
	for n, want := range bad {
		if code, _ := nameProblem(n); code != want {
			t.Errorf("nameProblem(%q) = %q, want %s", n, code, want)
		}
	}
}

func TestFoldKey(t *testing.T) {
	same := [][2]string{{"README", "readme"}, {"k", "\u212a"}, {"s", "\u017f"}, {"Straße", "STRAßE"}, {"ΣΑΣ", "σας"}}
	for _, p := range same {
		if foldKey(p[0]) != foldKey(p[1]) {
			t.Errorf("foldKey(%q) != foldKey(%q)", p[0], p[1])
		}
	}
	if foldKey("a") == foldKey("b") || foldKey("a/b") == foldKey("ab") {
		t.Error("distinct names fold together")
	}
}

func TestCheckIdentity(t *testing.T) {
	// The manifest parser already refuses these; the registry checks again because it
	// builds paths from them.
	tests := []struct {
		name, version, runtime, impl, code string
	}{
		{"ok", "1.0.0", "tool", "wasm", ""},
		{"../x", "1.0.0", "tool", "wasm", CodeArtifactName},
		{"-x", "1.0.0", "tool", "", CodeArtifactName},
		{"x", "", "tool", "", CodeArtifactVersion},
		{"x", "../1", "tool", "", CodeArtifactVersion},
		{"x", "1/2", "tool", "", CodeArtifactVersion},
		{"x", "edge", "tool", "", CodeArtifactVersion},
		{"x", "1", "plugin", "", CodeArtifactKind},
		{"x", "1", "driver", "native", CodeArtifactKind},
		{"x", "1", "tool", "jvm", CodeArtifactKind},
	}
	for _, tt := range tests {
		m := &manifest.ArtifactManifest{Name: tt.name, Version: tt.version, Runtime: manifest.Role(tt.runtime), Implementation: tt.impl}
		err := checkIdentity(m)
		if tt.code == "" {
			if err != nil {
				t.Errorf("%+v: %v", tt, err)
			}
			continue
		}
		assertCode(t, err, tt.code)
	}
}

// updateCorpus rewrites testdata/fuzz/FuzzOpenArchive from fuzzSeeds.
var updateCorpus = flag.Bool("update-corpus", false, "rewrite the FuzzOpenArchive seed corpus")

// fuzzSeeds are small archives, accepted and hostile, for the fuzzer to start from.
func fuzzSeeds() map[string][]byte {
	zeros := make([]byte, 4096)
	return map[string][]byte{
		"wasm-tool":       makeZip(manifestEnt, wasmEnt),
		"native-tool":     makeZip(zent{name: "murmur.yaml", data: nativeYAML}, zent{name: "bin/"}, zent{name: "bin/git-helper", data: "#!/bin/sh\necho hi\n"}),
		"skill":           makeZip(zent{name: "murmur.yaml", data: skillYAML}, zent{name: "Skill.md", data: "# Be brief\n"}),
		"nested-folders":  makeZip(manifestEnt, wasmEnt, zent{name: "a/"}, zent{name: "a/b/c.txt", data: "c"}),
		"stored":          makeZip(zent{name: "murmur.yaml", data: hookYAML, raw: true, method: zip.Store, usize: uint64(len(hookYAML)), crc: crc32.ChecksumIEEE([]byte(hookYAML))}, wasmEnt),
		"dotdot":          makeZip(manifestEnt, wasmEnt, zent{name: "../evil", data: "x"}),
		"absolute":        makeZip(manifestEnt, wasmEnt, zent{name: "/etc/evil", data: "x"}),
		"backslash":       makeZip(manifestEnt, wasmEnt, zent{name: `..\evil`, data: "x"}),
		"symlink":         makeZip(manifestEnt, wasmEnt, zent{name: "link", data: "/etc/passwd", mode: fs.ModeSymlink | 0o777}),
		"duplicate-case":  makeZip(manifestEnt, wasmEnt, zent{name: "Murmur.yaml", data: toolYAML}),
		"file-and-folder": makeZip(manifestEnt, wasmEnt, zent{name: "a", data: "1"}, zent{name: "a/b", data: "2"}),
		"declared-bomb":   makeZip(manifestEnt, wasmEnt, zent{name: "big", data: deflated(nil), raw: true, method: zip.Deflate, usize: 600 << 20}),
		"lying-header":    makeZip(manifestEnt, wasmEnt, zent{name: "x", data: deflated(zeros), raw: true, method: zip.Deflate, usize: 10}),
		"bad-crc":         makeZip(manifestEnt, wasmEnt, zent{name: "x", data: "abc", raw: true, method: zip.Store, usize: 3, crc: 1}),
		"two-wasm":        makeZip(manifestEnt, zent{name: "a.wasm"}, zent{name: "b.wasm"}),
		"no-manifest":     makeZip(wasmEnt),
	}
}

func TestWriteFuzzCorpus(t *testing.T) {
	if !*updateCorpus {
		t.Skip("run with -update-corpus to rewrite the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzOpenArchive")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range fuzzSeeds() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func FuzzOpenArchive(f *testing.F) {
	for _, data := range fuzzSeeds() {
		f.Add(data)
	}
	const maxBytes = 16 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := OpenArchive(data, WithMaxBytes(maxBytes))
		if err != nil {
			if errs.Code(err) == "" {
				t.Fatalf("refusal without a code: %v", err)
			}
			return
		}
		m := a.Manifest()
		if m == nil || !manifest.ValidName(m.Name) || manifest.CheckVersion(m.Version) != "" {
			t.Fatalf("accepted archive with manifest %+v", m)
		}
		files := a.files
		if !slices.IsSorted(files) {
			t.Fatalf("files not sorted: %q", files)
		}
		seen := map[string]bool{}
		var total int64
		for _, name := range files {
			if code, why := nameProblem(name); code != "" {
				t.Fatalf("accepted name %q: %s", name, why)
			}
			if seen[foldKey(name)] {
				t.Fatalf("accepted duplicate %q", name)
			}
			seen[foldKey(name)] = true
			b, err := a.ReadFile(name)
			if err != nil {
				t.Fatalf("ReadFile(%q) of an accepted archive: %v", name, err)
			}
			total += int64(len(b))
		}
		if total != a.size || total > maxBytes {
			t.Fatalf("files total %d bytes, size %d, cap %d", total, a.size, maxBytes)
		}
		if !slices.Contains(files, a.Payload().Path) || !slices.Contains(files, ManifestFile) {
			t.Fatalf("payload %q or manifest missing from %q", a.Payload().Path, files)
		}
		dir := filepath.Join(t.TempDir(), "x")
		if err := a.ExtractTo(dir); err != nil {
			t.Fatalf("extracting an accepted archive: %v", err)
		}
		n := 0
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				n++
			} else if err == nil && !d.IsDir() {
				t.Errorf("extraction made %s of type %v", p, d.Type())
			}
			return nil
		})
		if n != len(files) {
			t.Fatalf("extracted %d files, archive has %d", n, len(files))
		}
	})
}

// bigArchive is a ~5 MiB wasm tool archive: mostly incompressible payload plus text.
func bigArchive() []byte {
	r := rand.New(rand.NewPCG(1, 2))
	payload := make([]byte, 4<<20)
	for i := range payload {
		payload[i] = byte(r.Uint32())
	}
	text := strings.Repeat("the quick brown fox jumps over the lazy dog\n", 24000)
	ents := []zent{manifestEnt, {name: "capsule.wasm", data: string(payload)}}
	for i := range 40 {
		ents = append(ents, zent{name: fmt.Sprintf("assets/%02d.txt", i), data: text[:len(text)/4] + fmt.Sprint(i)})
	}
	for i := range 4 {
		ents = append(ents, zent{name: fmt.Sprintf("data/%d.bin", i), data: string(payload[i<<18 : (i+1)<<18]), raw: true, method: zip.Store,
			usize: 1 << 18, crc: crc32.ChecksumIEEE(payload[i<<18 : (i+1)<<18])})
	}
	return makeZip(ents...)
}

func BenchmarkOpenArchive(b *testing.B) {
	data := bigArchive()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := OpenArchive(data); err != nil {
			b.Fatal(err)
		}
	}
}
