package wasip2_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/capsulegate/capsulegate/runtime/wasm/guestfs"
	"github.com/capsulegate/capsulegate/runtime/wasm/wasip2"
)

// error-code cases the tests expect.
const (
	ecExist        = 7
	ecNoEntry      = 20
	ecNotDirectory = 24
	ecNotPermitted = 31
)

func fsGuest(t *testing.T) (*guest, string, uint64) {
	t.Helper()
	dir := t.TempDir()
	gfs, err := guestfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gfs.Close() })
	g := newGuest(t, "testdata/fs.wat", wasip2.Env{FS: gfs})
	g.must("get-directories", ret)
	list, n := g.u32(ret), g.u32(ret+4)
	if n != 1 || string(g.list(list+4)) != "." {
		t.Fatalf("preopens: %d, first named %q", n, g.list(list+4))
	}
	return g, dir, uint64(g.u32(list))
}

// openAt opens path below dir with the given flags; it returns the result's case and
// payload (a handle or an error-code).
func (g *guest) openAt(dir uint64, path string, pathFlags, openFlags, descFlags uint64) (byte, uint32) {
	g.t.Helper()
	p, n := g.str(data, path)
	g.must("open-at", dir, pathFlags, p, n, openFlags, descFlags, ret)
	return g.u8(ret), g.u32(ret + 4)
}

func TestFilesystem(t *testing.T) {
	g, dir, root := fsGuest(t)
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte("file contents"), 0o644); err != nil {
		t.Fatal(err)
	}

	g.must("get-flags", root, ret)
	if g.u8(ret) != 0 || g.u8(ret+1) != 1|1<<5 { // read | mutate-directory
		t.Errorf("root flags = %d %b", g.u8(ret), g.u8(ret+1))
	}
	g.must("get-type", root, ret)
	if g.u8(ret+1) != 3 {
		t.Errorf("root type = %d, want directory", g.u8(ret+1))
	}

	// Read a file through a stream.
	c, f := g.openAt(root, "in.txt", 1, 0, 1)
	if c != 0 {
		t.Fatalf("open-at in.txt: error-code %d", f)
	}
	g.must("read-via-stream", uint64(f), 5, ret)
	in := uint64(g.u32(ret + 4))
	g.must("blocking-read", in, 100, ret)
	if s := string(g.list(ret + 4)); s != "contents" {
		t.Errorf("read %q", s)
	}
	g.must("stat", uint64(f), ret)
	if g.u8(ret) != 0 || g.u8(ret+8) != 6 || g.u64(ret+24) != 13 {
		t.Errorf("stat: case %d type %d size %d", g.u8(ret), g.u8(ret+8), g.u64(ret+24))
	}
	g.must("metadata-hash", uint64(f), ret)
	h1 := g.bytes(ret+8, 16)
	p, n := g.str(data, "in.txt")
	g.must("metadata-hash-at", root, 1, p, n, ret)
	if string(g.bytes(ret+8, 16)) != string(h1) {
		t.Error("metadata-hash and metadata-hash-at differ for one file")
	}
	g.must("drop-input-stream", in)
	g.must("drop-descriptor", uint64(f))

	// Create a directory and a file in it, write, list.
	p, n = g.str(data, "sub")
	g.must("create-directory-at", root, p, n, ret)
	if g.u8(ret) != 0 {
		t.Fatalf("create-directory-at: error-code %d", g.u8(ret+1))
	}
	g.must("create-directory-at", root, p, n, ret)
	if g.u8(ret) != 1 || g.u8(ret+1) != ecExist {
		t.Errorf("second create-directory-at = %d %d, want exist", g.u8(ret), g.u8(ret+1))
	}
	c, out := g.openAt(root, "sub/new.txt", 0, 1, 2) // create, write
	if c != 0 {
		t.Fatalf("open-at create: error-code %d", out)
	}
	g.must("write-via-stream", uint64(out), 0, ret)
	os_ := uint64(g.u32(ret + 4))
	p, n = g.str(data, "written")
	g.must("blocking-write-and-flush", os_, p, n, ret)
	g.must("drop-output-stream", os_)
	g.must("append-via-stream", uint64(out), ret)
	os_ = uint64(g.u32(ret + 4))
	p, n = g.str(data, "+more")
	g.must("blocking-write-and-flush", os_, p, n, ret)
	g.must("drop-output-stream", os_)
	g.must("drop-descriptor", uint64(out))
	if b, _ := os.ReadFile(filepath.Join(dir, "sub", "new.txt")); string(b) != "written+more" {
		t.Errorf("file holds %q", b)
	}

	c, sub := g.openAt(root, "sub", 0, 2, 1)
	if c != 0 {
		t.Fatalf("open-at sub: %d", sub)
	}
	g.must("read-directory", uint64(sub), ret)
	ds := uint64(g.u32(ret + 4))
	g.must("read-directory-entry", ds, ret)
	// result<option<directory-entry>>: case at 0, option at 4, entry type at 8, name at 12.
	if g.u8(ret) != 0 || g.u8(ret+4) != 1 || g.u8(ret+8) != 6 || string(g.list(ret+12)) != "new.txt" {
		t.Errorf("entry: %d %d type %d %q", g.u8(ret), g.u8(ret+4), g.u8(ret+8), g.list(ret+12))
	}
	g.must("read-directory-entry", ds, ret)
	if g.u8(ret) != 0 || g.u8(ret+4) != 0 {
		t.Errorf("end of listing: %d %d", g.u8(ret), g.u8(ret+4))
	}
	g.must("drop-directory-entry-stream", ds)
	g.must("drop-descriptor", uint64(sub))

	// A read-only descriptor cannot be written through.
	c, ro := g.openAt(root, "in.txt", 1, 0, 1)
	if c != 0 {
		t.Fatal(ro)
	}
	g.must("write-via-stream", uint64(ro), 0, ret)
	if g.u8(ret) != 1 {
		t.Error("write-via-stream on a read-only descriptor succeeded")
	}
}

// TestFilesystemEscapes: every way out of the workdir is refused, as in preview1.
func TestFilesystemEscapes(t *testing.T) {
	g, dir, root := fsGuest(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "abs-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "dir-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../"+filepath.Base(outside), filepath.Join(dir, "rel-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(dir, filepath.Join(outside, "secret"))
	for _, tt := range []struct {
		name, path string
		pathFlags  uint64
		want       uint32
	}{
		{"dot-dot", rel, 1, ecNotPermitted},
		{"dot-dot after a name", "sub/../../x", 1, ecNotPermitted},
		{"absolute path", filepath.Join(outside, "secret"), 1, ecNotPermitted},
		{"absolute symlink followed", "abs-link", 1, ecNotPermitted},
		{"symlink to an outside directory", "dir-link/secret", 1, ecNotPermitted},
		{"relative symlink climbing out", "rel-link/secret", 1, ecNotPermitted},
		{"missing", "nope", 1, ecNoEntry},
		{"below a file", "file/x", 1, ecNotDirectory},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, v := g.openAt(root, tt.path, tt.pathFlags, 0, 1)
			if c != 1 || v&0xff != tt.want {
				t.Errorf("open-at %q = case %d value %d, want error-code %d", tt.path, c, v, tt.want)
			}
			p, n := g.str(data, tt.path)
			g.must("stat-at", root, tt.pathFlags, p, n, ret)
			if g.u8(ret) != 1 || uint32(g.u8(ret+8)) != tt.want {
				t.Errorf("stat-at %q = case %d code %d, want %d", tt.path, g.u8(ret), g.u8(ret+8), tt.want)
			}
			if tt.want == ecNoEntry {
				return // creating it is fine
			}
			g.must("create-directory-at", root, p, n, ret)
			if g.u8(ret) != 1 {
				t.Errorf("create-directory-at %q succeeded", tt.path)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
		t.Error("a directory was created outside")
	}
	// Hostile handles: a stream handle as a descriptor, a forged one.
	_, err := g.call("stat", 4242, ret)
	wantTrap(t, err, wasip2.CodeHandle)
	_, err = g.call("open-at", root, 0, 0xFFFFFFF0, 100, 0, 1, ret)
	wantTrap(t, err, wasip2.CodeABI)
}

func TestNoFilesystem(t *testing.T) {
	g := newGuest(t, "testdata/fs.wat", wasip2.Env{})
	g.must("get-directories", ret)
	if g.u32(ret+4) != 0 {
		t.Error("a preopen without a filesystem grant")
	}
}
