package registry

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// writeTree creates files (and, for names ending in '/', folders) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if name[len(name)-1] == '/' {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func zipNames(t *testing.T, data []byte) map[string]fs.FileMode {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]fs.FileMode{}
	for _, f := range zr.File {
		out[f.Name] = f.Mode()
		if !f.Modified.Equal(packTime) {
			t.Errorf("%s has time %v, want %v", f.Name, f.Modified, packTime)
		}
	}
	return out
}

func TestPack(t *testing.T) {
	src := map[string]string{
		"murmur.yaml":        toolYAML,
		"capsule.wasm":       wasmMagic,
		"README.md":          "# echo\n",
		"schemas/in.json":    "{}",
		"schemas/deep/x.txt": "x",
		"empty/":             "",
		".hidden":            "kept",
		".git/config":        "[core]",
		".DS_Store":          "junk",
		"sub/.DS_Store":      "junk",
	}
	dir := t.TempDir()
	writeTree(t, dir, src)
	data, m, err := Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "echo-tool" || m.Version != "1.0.0" {
		t.Fatalf("manifest %+v", m)
	}
	want := map[string]fs.FileMode{
		".hidden": 0o644, "README.md": 0o644, "capsule.wasm": 0o644, "murmur.yaml": 0o644, "schemas/in.json": 0o644, "schemas/deep/x.txt": 0o644,
		"empty/": fs.ModeDir | 0o755, "schemas/": fs.ModeDir | 0o755, "schemas/deep/": fs.ModeDir | 0o755, "sub/": fs.ModeDir | 0o755,
	}
	got := zipNames(t, data)
	if len(got) != len(want) {
		t.Errorf("entries %v, want %v", got, want)
	}
	for n, mode := range want {
		if got[n] != mode {
			t.Errorf("entry %s mode %v, want %v (entries %v)", n, got[n], mode, got)
		}
	}

	t.Run("deterministic", func(t *testing.T) {
		again, _, err := Pack(dir)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("second pack differs (err %v)", err)
		}
		// Another copy, other times and modes, written in another order: same bytes.
		other := t.TempDir()
		writeTree(t, other, src)
		old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
		filepath.WalkDir(other, func(p string, d fs.DirEntry, err error) error {
			os.Chtimes(p, old, old)
			if !d.IsDir() {
				os.Chmod(p, 0o600)
			}
			return nil
		})
		copyData, _, err := Pack(other)
		if err != nil {
			t.Fatal(err)
		}
		if sha256.Sum256(copyData) != sha256.Sum256(data) {
			t.Fatal("the same content packed from another folder gives other bytes")
		}
	})
	t.Run("round trip", func(t *testing.T) {
		a, err := OpenArchive(data)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "x")
		if err := a.ExtractTo(out); err != nil {
			t.Fatal(err)
		}
		for n, body := range src {
			if filepath.Base(n) == ".DS_Store" || n[:4] == ".git" || n[len(n)-1] == '/' {
				continue
			}
			if b, err := os.ReadFile(filepath.Join(out, n)); err != nil || string(b) != body {
				t.Errorf("%s = %q, %v; want %q", n, b, err, body)
			}
		}
	})
}

func TestPackNativeModes(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"murmur.yaml": nativeYAML, "bin/git-helper": "#!/bin/sh\n", "bin/lib/helper.sh": "x", "share/run.sh": "y"})
	os.Chmod(filepath.Join(dir, "bin", "git-helper"), 0o700)
	os.Chmod(filepath.Join(dir, "share", "run.sh"), 0o755)
	data, _, err := Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := zipNames(t, data)
	for n, mode := range map[string]fs.FileMode{"bin/git-helper": 0o755, "bin/lib/helper.sh": 0o644, "share/run.sh": 0o644} {
		if got[n] != mode {
			t.Errorf("%s packed with mode %v, want %v", n, got[n], mode)
		}
	}
}

func TestPackRefuses(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		setup func(t *testing.T, dir string)
		cfg   *openConfig
		code  string
	}{
		{name: "no manifest", files: map[string]string{"capsule.wasm": wasmMagic}, code: CodeNoManifest},
		{name: "manifest is a folder", files: map[string]string{"murmur.yaml/": "", "capsule.wasm": wasmMagic}, code: CodeNoManifest},
		{name: "manifest invalid", files: map[string]string{"murmur.yaml": "name: Echo\nversion: 1\n", "capsule.wasm": wasmMagic}, code: "E-MAN-004"},
		{name: "manifest empty", files: map[string]string{"murmur.yaml": "", "capsule.wasm": wasmMagic}, code: "E-MAN-001"},
		{name: "no payload", files: map[string]string{"murmur.yaml": toolYAML, "README.md": "x"}, code: CodeNoPayload},
		{name: "two wasm", files: map[string]string{"murmur.yaml": toolYAML, "a.wasm": "a", "b.wasm": "b"}, code: CodeManyPayloads},
		{name: "native without binary", files: map[string]string{"murmur.yaml": nativeYAML, "git-helper": "x"}, code: CodeNoPayload},
		{name: "skill without skill.md", files: map[string]string{"murmur.yaml": skillYAML, "notes.md": "x"}, code: CodeNoPayload},
		{name: "names differing in case", files: map[string]string{"murmur.yaml": toolYAML, "capsule.wasm": wasmMagic, "a.txt": "1", "A.txt": "2"}, code: CodeDuplicate},
		{name: "backslash in a name", files: map[string]string{"murmur.yaml": toolYAML, "capsule.wasm": wasmMagic, `a\b`: "1"}, code: CodeBackslash},
		{name: "symlink inside", files: map[string]string{"murmur.yaml": toolYAML, "real.wasm": wasmMagic},
			setup: func(t *testing.T, dir string) { os.Symlink("real.wasm", filepath.Join(dir, "capsule.wasm")) }, code: CodePackSymlink},
		{name: "symlink outside", files: map[string]string{"murmur.yaml": toolYAML, "capsule.wasm": wasmMagic},
			setup: func(t *testing.T, dir string) { os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")) }, code: CodePackSymlink},
		{name: "symlinked folder", files: map[string]string{"murmur.yaml": toolYAML, "capsule.wasm": wasmMagic},
			setup: func(t *testing.T, dir string) { os.Symlink("/etc", filepath.Join(dir, "etc")) }, code: CodePackSymlink},
		{name: "symlinked manifest", files: map[string]string{"real.yaml": toolYAML, "capsule.wasm": wasmMagic},
			setup: func(t *testing.T, dir string) { os.Symlink("real.yaml", filepath.Join(dir, "murmur.yaml")) }, code: CodePackSymlink},
		{name: "named pipe", files: map[string]string{"murmur.yaml": toolYAML, "capsule.wasm": wasmMagic},
			setup: func(t *testing.T, dir string) {
				if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
					t.Skip("mkfifo:", err)
				}
			}, code: CodePackSpecial},
		{name: "over the size cap", files: map[string]string{"murmur.yaml": toolYAML, "capsule.wasm": string(make([]byte, 2000))},
			cfg: &openConfig{maxBytes: 1000, maxEntries: 100}, code: CodeDeclaredSize},
		{name: "over the entry cap", files: map[string]string{"murmur.yaml": toolYAML, "capsule.wasm": wasmMagic, "a": "", "b": ""},
			cfg: &openConfig{maxBytes: 1000, maxEntries: 3}, code: CodeTooManyEntries},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tt.files)
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			cfg := newOpenConfig(nil)
			if tt.cfg != nil {
				cfg = *tt.cfg
			}
			data, m, err := pack(dir, cfg)
			if data != nil || m != nil {
				t.Error("a refused pack returned output")
			}
			assertCode(t, err, tt.code)
			t.Log(err)
		})
	}
	t.Run("missing folder", func(t *testing.T) {
		_, _, err := Pack(filepath.Join(t.TempDir(), "nope"))
		assertCode(t, err, CodePackSource)
	})
	t.Run("a file, not a folder", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "f")
		os.WriteFile(p, []byte(toolYAML), 0o644)
		_, _, err := Pack(p)
		assertCode(t, err, CodePackSource)
	})
}

func TestPackedSkillKeepsItsCase(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"murmur.yaml": skillYAML, "Skill.MD": "# be brief\n"})
	data, _, err := Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := OpenArchive(data)
	if err != nil {
		t.Fatal(err)
	}
	if a.Payload() != (Payload{PayloadSkill, "Skill.MD"}) || !slices.Equal(a.files, []string{"Skill.MD", "murmur.yaml"}) {
		t.Fatalf("payload %+v files %v", a.Payload(), a.files)
	}
}
