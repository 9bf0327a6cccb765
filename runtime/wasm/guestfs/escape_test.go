package guestfs

import (
	"os"
	"path/filepath"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// TestEscapes tries every way out of the root through every method. Each
// must fail with the expected Errno, and the fixture's cleanup checks that
// nothing outside the root (file contents, times, mode, directory listings)
// changed.
func TestEscapes(t *testing.T) {
	const (
		rd   = experimentalsys.O_RDONLY
		perm = experimentalsys.EPERM
	)
	create := experimentalsys.O_RDWR | experimentalsys.O_CREAT | experimentalsys.O_TRUNC
	open := func(p string, fl experimentalsys.Oflag) func(*FS) experimentalsys.Errno {
		return func(s *FS) experimentalsys.Errno {
			f, errno := s.OpenFile(p, fl, 0o644)
			if f != nil {
				f.Close()
			}
			return errno
		}
	}
	stat := func(p string) func(*FS) experimentalsys.Errno {
		return func(s *FS) experimentalsys.Errno { _, errno := s.Stat(p); return errno }
	}
	tests := []struct {
		name  string
		op    func(*FS) experimentalsys.Errno
		errno experimentalsys.Errno
	}{
		// Lexical climbing: refused before any system call.
		{"open ..", open("..", rd), perm},
		{"open ../outside", open("../outside", rd), perm},
		{"open a/../../outside", open("a/../../outside", rd), perm},
		{"open dir/../../outside", open("dir/../../outside", rd), perm},
		{"open /../outside", open("/../outside", rd), perm},
		{"create ../new", open("../new", create), perm},
		{"stat ../outdir/f", stat("../outdir/f"), perm},
		// Absolute-looking paths are the guest's root, i.e. inside.
		{"open /etc/passwd", open("/etc/passwd", rd), experimentalsys.ENOENT},
		{"open absolute host path", open(os.TempDir()+"/x", rd), experimentalsys.ENOENT},
		// Symbolic links planted in the root.
		{"open abs (absolute to host file)", open("abs", rd), perm},
		{"open passwd (-> /etc/passwd)", open("passwd", rd), perm},
		{"open absin (absolute, pointing inside)", open("absin", rd), perm},
		{"open rel (-> ../outside)", open("rel", rd), perm},
		{"open deep (-> dir/../../outside)", open("deep", rd), perm},
		{"open chain (-> rel)", open("chain", rd), perm},
		{"open chain2 (-> chain -> rel)", open("chain2", rd), perm},
		{"open dirlink/f (dir link out)", open("dirlink/f", rd), perm},
		{"open dirlink", open("dirlink", rd|experimentalsys.O_DIRECTORY), perm},
		{"open dirlink/", open("dirlink/", rd), perm},
		{"open abs O_NOFOLLOW", open("abs", rd|experimentalsys.O_NOFOLLOW), experimentalsys.ELOOP},
		{"stat abs", stat("abs"), perm},
		{"stat chain2", stat("chain2"), perm},
		{"stat dirlink/f", stat("dirlink/f"), perm},
		{"lstat dirlink/f", func(s *FS) experimentalsys.Errno { _, errno := s.Lstat("dirlink/f"); return errno }, perm},
		// Writes through links leading out.
		{"write abs", open("abs", experimentalsys.O_WRONLY), perm},
		{"truncate rel", open("rel", create), perm},
		{"append chain", open("chain", experimentalsys.O_WRONLY|experimentalsys.O_APPEND), perm},
		{"create dirlink/new", open("dirlink/new", create), perm},
		{"create through dangling link out", open("outnew", create), perm},
		{"create excl through dangling link out", open("outnew", create|experimentalsys.O_EXCL), experimentalsys.EEXIST},
		{"create excl via abs", open("abs", create|experimentalsys.O_EXCL), experimentalsys.EEXIST},
		{"mkdir dirlink/new", func(s *FS) experimentalsys.Errno { return s.Mkdir("dirlink/new", 0o755) }, perm},
		{"mkdir ../new", func(s *FS) experimentalsys.Errno { return s.Mkdir("../new", 0o755) }, perm},
		{"chmod abs", func(s *FS) experimentalsys.Errno { return s.Chmod("abs", 0o777) }, perm},
		{"chmod dirlink/f", func(s *FS) experimentalsys.Errno { return s.Chmod("dirlink/f", 0o777) }, perm},
		{"chmod ../outside", func(s *FS) experimentalsys.Errno { return s.Chmod("../outside", 0o777) }, perm},
		{"utimens rel", func(s *FS) experimentalsys.Errno { return s.Utimens("rel", 1, 1) }, perm},
		{"utimens dirlink/f", func(s *FS) experimentalsys.Errno { return s.Utimens("dirlink/f", 1, 1) }, perm},
		{"utimens ../outside", func(s *FS) experimentalsys.Errno { return s.Utimens("../outside", 1, 1) }, perm},
		{"rename dirlink/f in", func(s *FS) experimentalsys.Errno { return s.Rename("dirlink/f", "stolen") }, perm},
		{"rename file out via dirlink", func(s *FS) experimentalsys.Errno { return s.Rename("file.txt", "dirlink/planted") }, perm},
		{"rename over ../outside", func(s *FS) experimentalsys.Errno { return s.Rename("file.txt", "../outside") }, perm},
		{"rename ../outside in", func(s *FS) experimentalsys.Errno { return s.Rename("../outside", "stolen") }, perm},
		{"link dirlink/f in", func(s *FS) experimentalsys.Errno { return s.Link("dirlink/f", "stolen") }, perm},
		{"link ../outside in", func(s *FS) experimentalsys.Errno { return s.Link("../outside", "stolen") }, perm},
		{"link file out via dirlink", func(s *FS) experimentalsys.Errno { return s.Link("file.txt", "dirlink/planted") }, perm},
		{"symlink into dirlink", func(s *FS) experimentalsys.Errno { return s.Symlink("x", "dirlink/planted") }, perm},
		{"symlink ../planted", func(s *FS) experimentalsys.Errno { return s.Symlink("file.txt", "../planted") }, perm},
		{"symlink to absolute host path", func(s *FS) experimentalsys.Errno { return s.Symlink("/etc/passwd", "mine") }, perm},
		{"symlink climbing", func(s *FS) experimentalsys.Errno { return s.Symlink("../../x", "dir/mine") }, perm},
		{"unlink dirlink/f", func(s *FS) experimentalsys.Errno { return s.Unlink("dirlink/f") }, perm},
		{"unlink ../outside", func(s *FS) experimentalsys.Errno { return s.Unlink("../outside") }, perm},
		{"rmdir ../outdir", func(s *FS) experimentalsys.Errno { return s.Rmdir("../outdir") }, perm},
		{"rmdir dirlink/f", func(s *FS) experimentalsys.Errno { return s.Rmdir("dirlink/f") }, perm},
		// "dirlink/." cleans to the link itself, which is not a directory.
		{"rmdir dirlink/.", func(s *FS) experimentalsys.Errno { return s.Rmdir("dirlink/.") }, experimentalsys.ENOTDIR},
		{"readlink dirlink/f", func(s *FS) experimentalsys.Errno { _, errno := s.Readlink("dirlink/f"); return errno }, perm},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t) // cleanup asserts the host is untouched
			if errno := tc.op(fx.fs); errno != tc.errno {
				t.Fatalf("errno = %v, want %v", errno, tc.errno)
			}
		})
	}
}

// TestEscapeReadsNothing checks that an open refused for escaping never
// hands back a file, and that a file created under a guest-made name stays
// inside the root even when its directory is a link elsewhere in the root.
func TestEscapeReadsNothing(t *testing.T) {
	fx := newFixture(t)
	for _, p := range []string{"abs", "passwd", "rel", "chain", "dirlink/f"} {
		if f, errno := fx.fs.OpenFile(p, experimentalsys.O_RDONLY, 0); f != nil || errno == 0 {
			t.Fatalf("%s opened", p)
		}
	}
	// In-root directory link: writes land inside.
	f, errno := fx.fs.OpenFile("gooddir/new.txt", experimentalsys.O_RDWR|experimentalsys.O_CREAT, 0o644)
	if errno != 0 {
		t.Fatal(errno)
	}
	f.Write([]byte("in"))
	f.Close()
	if b, err := os.ReadFile(filepath.Join(fx.root, "dir", "new.txt")); err != nil || string(b) != "in" {
		t.Fatalf("in-root write: %q, %v", b, err)
	}
}

// TestEscapeAfterSwap: a directory swapped for a link leading out after the
// FS was created is still refused (os.Root resolves at each call).
func TestEscapeAfterSwap(t *testing.T) {
	fx := newFixture(t)
	if errno := fx.fs.Mkdir("swap", 0o755); errno != 0 {
		t.Fatal(errno)
	}
	if err := os.Remove(fx.hostPath("swap")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fx.outdir, fx.hostPath("swap")); err != nil {
		t.Fatal(err)
	}
	if _, errno := fx.fs.OpenFile("swap/f", experimentalsys.O_RDONLY, 0); errno != experimentalsys.EPERM {
		t.Fatalf("open swap/f = %v, want EPERM", errno)
	}
	if errno := fx.fs.Unlink("swap/f"); errno != experimentalsys.EPERM {
		t.Fatalf("unlink swap/f = %v, want EPERM", errno)
	}
}

// TestNewInRefusesLinkOut: NewIn opens its folder through the parent's root, so a folder
// replaced by a symbolic link leading out of the parent is refused, and one leading to
// another folder inside it serves that folder.
func TestNewInRefusesLinkOut(t *testing.T) {
	parentDir, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600)
	os.Mkdir(filepath.Join(parentDir, "real"), 0o755)
	os.WriteFile(filepath.Join(parentDir, "real", "mine"), []byte("m"), 0o600)
	os.Symlink(outside, filepath.Join(parentDir, "out-link"))
	os.Symlink("real", filepath.Join(parentDir, "in-link"))
	parent, err := os.OpenRoot(parentDir)
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	for _, tt := range []struct {
		dir, file string
		ok        bool
	}{
		{"real", "mine", true},
		{"in-link", "mine", true},
		{"out-link", "secret", false},
	} {
		fsys, err := NewIn(DirOf(parent), tt.dir)
		if (err == nil) != tt.ok {
			t.Fatalf("NewIn(%s): %v, want ok=%t", tt.dir, err, tt.ok)
		}
		if err != nil {
			continue
		}
		if _, errno := fsys.Stat(tt.file); errno != 0 {
			t.Errorf("NewIn(%s): stat %s: %v", tt.dir, tt.file, errno)
		}
		fsys.Close()
		// Over a Dir not opened yet, the folder is opened at the first reach, with the
		// same refusal: the operation fails instead of NewIn.
		lazy := LazyDir(parentDir)
		fsys, err = NewIn(lazy, tt.dir)
		if err != nil {
			t.Fatalf("NewIn(lazy, %s): %v", tt.dir, err)
		}
		if _, errno := fsys.Stat(tt.file); (errno == 0) != tt.ok || !tt.ok && errno != experimentalsys.EPERM {
			t.Errorf("NewIn(lazy, %s): stat %s: %v, want ok=%t (or EPERM)", tt.dir, tt.file, errno, tt.ok)
		}
		fsys.Close()
		lazy.Close()
	}
}
