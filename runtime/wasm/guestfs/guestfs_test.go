package guestfs

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// fixture is a temporary layout:
//
//	base/outside            "secret"        host file outside the root
//	base/outdir/f           "secret2"       host directory outside the root
//	base/root/              the root served
//	  file.txt "hello", dir/nested.txt "nested", empty/
//	  abs -> base/outside (absolute)   passwd -> /etc/passwd
//	  rel -> ../outside                chain -> rel, chain2 -> chain
//	  dirlink -> ../outdir             deep -> dir/../../outside
//	  absin -> base/root/file.txt (absolute, but pointing inside)
//	  good -> file.txt                 gooddir -> dir
//	  dangling -> nothing              loop1 -> loop2 -> loop1
type fixture struct {
	base, root, outside, outdir string
	fs                          *FS
	outsideInfo                 os.FileInfo
}

func newFixture(t testing.TB, opts ...Option) *fixture {
	t.Helper()
	base := t.TempDir()
	fx := &fixture{
		base:    base,
		root:    filepath.Join(base, "root"),
		outside: filepath.Join(base, "outside"),
		outdir:  filepath.Join(base, "outdir"),
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(fx.root, 0o755))
	must(os.WriteFile(fx.outside, []byte("secret"), 0o644))
	must(os.Mkdir(fx.outdir, 0o755))
	must(os.WriteFile(filepath.Join(fx.outdir, "f"), []byte("secret2"), 0o644))
	must(os.WriteFile(filepath.Join(fx.root, "file.txt"), []byte("hello"), 0o644))
	must(os.Mkdir(filepath.Join(fx.root, "dir"), 0o755))
	must(os.WriteFile(filepath.Join(fx.root, "dir", "nested.txt"), []byte("nested"), 0o644))
	must(os.Mkdir(filepath.Join(fx.root, "empty"), 0o755))
	links := map[string]string{
		"abs":      fx.outside,
		"passwd":   "/etc/passwd",
		"rel":      "../outside",
		"chain":    "rel",
		"chain2":   "chain",
		"dirlink":  "../outdir",
		"deep":     "dir/../../outside",
		"absin":    filepath.Join(fx.root, "file.txt"),
		"good":     "file.txt",
		"gooddir":  "dir",
		"dangling": "nothing",
		"outnew":   "../created-outside",
		"loop1":    "loop2",
		"loop2":    "loop1",
	}
	for name, target := range links {
		must(os.Symlink(target, filepath.Join(fx.root, name)))
	}
	// Make the outside file's times distinctive, to notice any change.
	old := time.Unix(1_500_000_000, 0)
	must(os.Chtimes(fx.outside, old, old))
	fi, err := os.Stat(fx.outside)
	must(err)
	fx.outsideInfo = fi

	gfs, err := New(fx.root, opts...)
	must(err)
	fx.fs = gfs
	t.Cleanup(func() {
		if err := gfs.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		fx.assertHostUntouched(t)
	})
	return fx
}

// assertHostUntouched checks that nothing outside the root changed.
func (fx *fixture) assertHostUntouched(t testing.TB) {
	t.Helper()
	b, err := os.ReadFile(fx.outside)
	if err != nil || string(b) != "secret" {
		t.Errorf("outside file changed: %q, %v", b, err)
	}
	fi, err := os.Stat(fx.outside)
	if err != nil || !fi.ModTime().Equal(fx.outsideInfo.ModTime()) || fi.Mode() != fx.outsideInfo.Mode() {
		t.Errorf("outside file metadata changed: %v", err)
	}
	if names := dirNames(t, fx.outdir); !slices.Equal(names, []string{"f"}) {
		t.Errorf("outside dir changed: %v", names)
	}
	if b, err := os.ReadFile(filepath.Join(fx.outdir, "f")); err != nil || string(b) != "secret2" {
		t.Errorf("outside dir file changed: %q, %v", b, err)
	}
	if names := dirNames(t, fx.base); !slices.Equal(names, []string{"outdir", "outside", "root"}) {
		t.Errorf("entries appeared next to the root: %v", names)
	}
}

func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func (fx *fixture) hostPath(name string) string { return filepath.Join(fx.root, name) }

func readAll(t *testing.T, f experimentalsys.File) string {
	t.Helper()
	var out []byte
	buf := make([]byte, 3)
	for {
		n, errno := f.Read(buf)
		if errno != 0 {
			t.Fatalf("Read: %v", errno)
		}
		if n == 0 {
			return string(out)
		}
		out = append(out, buf[:n]...)
	}
}

func TestClean(t *testing.T) {
	tests := []struct {
		in       string
		name     string
		trailing bool
		errno    experimentalsys.Errno
	}{
		{"", ".", false, 0},
		{".", ".", false, 0},
		{"/", ".", false, 0},
		{"//", ".", false, 0},
		{"./", ".", false, 0},
		{"a", "a", false, 0},
		{"a/b", "a/b", false, 0},
		{"a/b/", "a/b", true, 0},
		{"/a/b", "a/b", false, 0},
		{"a//b/./c", "a/b/c", false, 0},
		{"a/..", ".", false, 0},
		{"a/../b", "b", false, 0},
		{"..", "", false, experimentalsys.EPERM},
		{"../x", "", false, experimentalsys.EPERM},
		{"a/../../x", "", false, experimentalsys.EPERM},
		{"/../x", "", false, experimentalsys.EPERM},
		{"a\x00b", "", false, experimentalsys.EINVAL},
	}
	for _, tc := range tests {
		name, trailing, errno := clean(tc.in)
		if name != tc.name || trailing != tc.trailing || errno != tc.errno {
			t.Errorf("clean(%q) = %q, %v, %v; want %q, %v, %v", tc.in, name, trailing, errno, tc.name, tc.trailing, tc.errno)
		}
	}
}

func TestNew(t *testing.T) {
	dir := t.TempDir()
	if _, err := New(filepath.Join(dir, "missing")); err == nil {
		t.Error("New on a missing directory succeeded")
	}
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(file); err == nil {
		t.Error("New on a regular file succeeded")
	}
	gfs, err := New(dir, readOnly())
	if err != nil {
		t.Fatal(err)
	}
	if !gfs.readOnly || gfs.dir != dir || gfs.String() != dir {
		t.Errorf("fields: %v %q %q", gfs.readOnly, gfs.dir, gfs.String())
	}
	if err := gfs.Close(); err != nil {
		t.Fatal(err)
	}
	// After Close, operations fail with EBADF.
	if _, errno := gfs.Stat("."); errno != experimentalsys.EBADF {
		t.Errorf("Stat after Close = %v, want EBADF", errno)
	}
	if _, errno := gfs.OpenFile("f", experimentalsys.O_RDONLY, 0); errno != experimentalsys.EBADF {
		t.Errorf("OpenFile after Close = %v, want EBADF", errno)
	}
}

func TestOpenFile(t *testing.T) {
	const (
		rd = experimentalsys.O_RDONLY
		wr = experimentalsys.O_WRONLY
		rw = experimentalsys.O_RDWR
	)
	tests := []struct {
		name    string
		path    string
		flag    experimentalsys.Oflag
		errno   experimentalsys.Errno
		content string // checked when read-only open of a regular file
		isDir   bool
	}{
		{"file", "file.txt", rd, 0, "hello", false},
		{"leading slash", "/file.txt", rd, 0, "hello", false},
		{"nested", "dir/nested.txt", rd, 0, "nested", false},
		{"cleaned", "dir/../file.txt", rd, 0, "hello", false},
		{"root empty", "", rd, 0, "", true},
		{"root dot", ".", rd, 0, "", true},
		{"root slash", "/", rd, 0, "", true},
		{"dir", "dir", rd, 0, "", true},
		{"dir trailing slash", "dir/", rd, 0, "", true},
		{"dir O_DIRECTORY", "dir", rd | experimentalsys.O_DIRECTORY, 0, "", true},
		{"in-root symlink", "good", rd, 0, "hello", false},
		{"in-root dir symlink", "gooddir/nested.txt", rd, 0, "nested", false},
		{"missing", "missing", rd, experimentalsys.ENOENT, "", false},
		{"missing parent", "missing/x", rw | experimentalsys.O_CREAT, experimentalsys.ENOENT, "", false},
		{"file as dir", "file.txt/x", rd, experimentalsys.ENOTDIR, "", false},
		{"file trailing slash", "file.txt/", rd, experimentalsys.ENOTDIR, "", false},
		{"file O_DIRECTORY", "file.txt", rd | experimentalsys.O_DIRECTORY, experimentalsys.ENOTDIR, "", false},
		{"dir O_RDWR", "dir", rw, experimentalsys.EISDIR, "", false},
		{"dir O_WRONLY", "dir", wr, experimentalsys.EISDIR, "", false},
		{"dir O_DIRECTORY|O_RDWR", "dir", rw | experimentalsys.O_DIRECTORY, experimentalsys.EISDIR, "", false},
		{"O_DIRECTORY|O_CREAT", "newdir", rd | experimentalsys.O_DIRECTORY | experimentalsys.O_CREAT, experimentalsys.EINVAL, "", false},
		{"O_EXCL existing", "file.txt", rw | experimentalsys.O_CREAT | experimentalsys.O_EXCL, experimentalsys.EEXIST, "", false},
		{"O_NOFOLLOW symlink", "good", rd | experimentalsys.O_NOFOLLOW, experimentalsys.ELOOP, "", false},
		{"O_NOFOLLOW|O_CREAT|O_EXCL symlink", "good", rw | experimentalsys.O_NOFOLLOW | experimentalsys.O_CREAT | experimentalsys.O_EXCL, experimentalsys.EEXIST, "", false},
		{"O_NOFOLLOW plain file", "file.txt", rd | experimentalsys.O_NOFOLLOW, 0, "hello", false},
		{"O_NOFOLLOW in-path link followed", "gooddir/nested.txt", rd | experimentalsys.O_NOFOLLOW, 0, "nested", false},
		{"dangling symlink", "dangling", rd, experimentalsys.ENOENT, "", false},
		{"symlink loop", "loop1", rd, experimentalsys.ELOOP, "", false},
		{"bad access mode", "file.txt", rd | rw | wr, experimentalsys.EINVAL, "", false},
		{"NUL in name", "file\x00.txt", rd, experimentalsys.EINVAL, "", false},
		{"escape dotdot", "../outside", rd, experimentalsys.EPERM, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			f, errno := fx.fs.OpenFile(tc.path, tc.flag, 0o644)
			if errno != tc.errno {
				if f != nil {
					f.Close()
				}
				t.Fatalf("OpenFile(%q, %#x) = %v, want %v", tc.path, tc.flag, errno, tc.errno)
			}
			if errno != 0 {
				if f != nil {
					t.Fatal("non-nil file with an error")
				}
				return
			}
			defer f.Close()
			isDir, _ := f.IsDir()
			if isDir != tc.isDir {
				t.Fatalf("IsDir = %v, want %v", isDir, tc.isDir)
			}
			if !tc.isDir && tc.flag&(wr|rw) == 0 {
				if got := readAll(t, f); got != tc.content {
					t.Fatalf("content = %q, want %q", got, tc.content)
				}
			}
		})
	}
}

func TestOpenFileFlags(t *testing.T) {
	fx := newFixture(t)
	rw := experimentalsys.O_RDWR

	t.Run("O_CREAT makes a file with masked perm", func(t *testing.T) {
		f, errno := fx.fs.OpenFile("new.txt", rw|experimentalsys.O_CREAT|experimentalsys.O_EXCL, 0o4777|fs.ModeSetuid)
		if errno != 0 {
			t.Fatal(errno)
		}
		if _, errno := f.Write([]byte("abc")); errno != 0 {
			t.Fatal(errno)
		}
		f.Close()
		fi, err := os.Stat(fx.hostPath("new.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 || fi.Size() != 3 {
			t.Fatalf("mode %v size %d", fi.Mode(), fi.Size())
		}
	})
	t.Run("O_TRUNC", func(t *testing.T) {
		f, errno := fx.fs.OpenFile("file.txt", rw|experimentalsys.O_TRUNC, 0)
		if errno != 0 {
			t.Fatal(errno)
		}
		f.Close()
		if b, _ := os.ReadFile(fx.hostPath("file.txt")); len(b) != 0 {
			t.Fatalf("not truncated: %q", b)
		}
		os.WriteFile(fx.hostPath("file.txt"), []byte("hello"), 0o644)
	})
	t.Run("O_APPEND", func(t *testing.T) {
		f, errno := fx.fs.OpenFile("file.txt", experimentalsys.O_WRONLY|experimentalsys.O_APPEND, 0)
		if errno != 0 {
			t.Fatal(errno)
		}
		defer f.Close()
		if !f.IsAppend() {
			t.Fatal("IsAppend false")
		}
		if _, errno := f.Seek(0, io.SeekStart); errno != 0 {
			t.Fatal(errno)
		}
		f.Write([]byte(" world"))
		if b, _ := os.ReadFile(fx.hostPath("file.txt")); string(b) != "hello world" {
			t.Fatalf("got %q", b)
		}
		// pwrite on an append-mode file: Linux appends.
		if n, errno := f.Pwrite([]byte("!"), 0); errno != 0 || n != 1 {
			t.Fatalf("Pwrite = %d, %v", n, errno)
		}
		if b, _ := os.ReadFile(fx.hostPath("file.txt")); string(b) != "hello world!" {
			t.Fatalf("got %q", b)
		}
		os.WriteFile(fx.hostPath("file.txt"), []byte("hello"), 0o644)
	})
	t.Run("O_WRONLY cannot read, O_RDONLY cannot write", func(t *testing.T) {
		f, errno := fx.fs.OpenFile("file.txt", experimentalsys.O_WRONLY, 0)
		if errno != 0 {
			t.Fatal(errno)
		}
		if _, errno := f.Read(make([]byte, 4)); errno != experimentalsys.EBADF {
			t.Errorf("Read on O_WRONLY = %v, want EBADF", errno)
		}
		f.Close()
		f, errno = fx.fs.OpenFile("file.txt", experimentalsys.O_RDONLY, 0)
		if errno != 0 {
			t.Fatal(errno)
		}
		if _, errno := f.Write([]byte("x")); errno != experimentalsys.EBADF {
			t.Errorf("Write on O_RDONLY = %v, want EBADF", errno)
		}
		if errno := f.Truncate(0); errno != experimentalsys.EBADF {
			t.Errorf("Truncate on O_RDONLY = %v, want EBADF", errno)
		}
		f.Close()
	})
	t.Run("sync flags and nonblock accepted", func(t *testing.T) {
		for _, fl := range []experimentalsys.Oflag{experimentalsys.O_SYNC, experimentalsys.O_DSYNC, experimentalsys.O_RSYNC, experimentalsys.O_NONBLOCK} {
			f, errno := fx.fs.OpenFile("file.txt", rw|fl, 0)
			if errno != 0 {
				t.Fatalf("flag %#x: %v", fl, errno)
			}
			pf := f.(experimentalsys.PollableFile)
			if pf.IsNonblock() != (fl == experimentalsys.O_NONBLOCK) {
				t.Errorf("flag %#x: IsNonblock = %v", fl, pf.IsNonblock())
			}
			f.Close()
		}
	})
}

func TestStatLstat(t *testing.T) {
	fx := newFixture(t)
	host := func(name string, follow bool) *syscall.Stat_t {
		var st syscall.Stat_t
		var err error
		if follow {
			err = syscall.Stat(fx.hostPath(name), &st)
		} else {
			err = syscall.Lstat(fx.hostPath(name), &st)
		}
		if err != nil {
			t.Fatal(err)
		}
		return &st
	}
	for _, name := range []string{"file.txt", "dir", "good", "gooddir", "."} {
		st, errno := fx.fs.Stat(name)
		if errno != 0 {
			t.Fatalf("Stat(%q) = %v", name, errno)
		}
		h := host(name, true)
		if st.Ino != h.Ino || st.Dev != uint64(h.Dev) || st.Size != h.Size || st.Nlink != uint64(h.Nlink) ||
			st.Mtim != h.Mtim.Nano() || st.Atim != h.Atim.Nano() || st.Ctim != h.Ctim.Nano() {
			t.Errorf("Stat(%q) = %+v, host %+v", name, st, h)
		}
		lst, errno := fx.fs.Lstat(name)
		if errno != 0 {
			t.Fatalf("Lstat(%q) = %v", name, errno)
		}
		if lh := host(name, false); lst.Ino != lh.Ino {
			t.Errorf("Lstat(%q) ino %d, host %d", name, lst.Ino, lh.Ino)
		}
	}
	if st, _ := fx.fs.Stat("file.txt"); !st.Mode.IsRegular() || st.Mode.Perm() != 0o644 {
		t.Errorf("file mode %v", st.Mode)
	}
	if st, _ := fx.fs.Stat("dir"); !st.Mode.IsDir() {
		t.Errorf("dir mode %v", st.Mode)
	}
	if st, _ := fx.fs.Lstat("good"); st.Mode&fs.ModeSymlink == 0 {
		t.Errorf("Lstat(good) mode %v", st.Mode)
	}
	// A link that leads out can be Lstat'ed (it is in the root), never Stat'ed.
	if st, errno := fx.fs.Lstat("abs"); errno != 0 || st.Mode&fs.ModeSymlink == 0 {
		t.Errorf("Lstat(abs) = %v, %v", st.Mode, errno)
	}
	errCases := []struct {
		path  string
		lstat bool
		errno experimentalsys.Errno
	}{
		{"missing", false, experimentalsys.ENOENT},
		{"missing", true, experimentalsys.ENOENT},
		{"file.txt/x", false, experimentalsys.ENOTDIR},
		{"file.txt/", true, experimentalsys.ENOTDIR},
		{"dangling", false, experimentalsys.ENOENT},
		{"loop1", false, experimentalsys.ELOOP},
		{"abs", false, experimentalsys.EPERM},
		{"../outside", true, experimentalsys.EPERM},
	}
	for _, tc := range errCases {
		var errno experimentalsys.Errno
		if tc.lstat {
			_, errno = fx.fs.Lstat(tc.path)
		} else {
			_, errno = fx.fs.Stat(tc.path)
		}
		if errno != tc.errno {
			t.Errorf("stat(%q, lstat=%v) = %v, want %v", tc.path, tc.lstat, errno, tc.errno)
		}
	}
}

// TestFSMethods covers every mutating method, happy path then errors, each
// on a fresh fixture.
func TestFSMethods(t *testing.T) {
	type check func(t *testing.T, fx *fixture)
	exists := func(name string) check {
		return func(t *testing.T, fx *fixture) {
			if _, err := os.Lstat(fx.hostPath(name)); err != nil {
				t.Errorf("%s should exist: %v", name, err)
			}
		}
	}
	gone := func(name string) check {
		return func(t *testing.T, fx *fixture) {
			if _, err := os.Lstat(fx.hostPath(name)); !os.IsNotExist(err) {
				t.Errorf("%s should be gone: %v", name, err)
			}
		}
	}
	content := func(name, want string) check {
		return func(t *testing.T, fx *fixture) {
			if b, err := os.ReadFile(fx.hostPath(name)); err != nil || string(b) != want {
				t.Errorf("%s = %q, %v; want %q", name, b, err, want)
			}
		}
	}
	mode := func(name string, want fs.FileMode) check {
		return func(t *testing.T, fx *fixture) {
			fi, err := os.Lstat(fx.hostPath(name))
			if err != nil || fi.Mode().Perm() != want || fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
				t.Errorf("%s mode = %v, %v; want %v", name, fi.Mode(), err, want)
			}
		}
	}
	linkTo := func(name, want string) check {
		return func(t *testing.T, fx *fixture) {
			if got, err := os.Readlink(fx.hostPath(name)); err != nil || got != want {
				t.Errorf("%s -> %q, %v; want %q", name, got, err, want)
			}
		}
	}
	mtime := func(name string, want int64) check {
		return func(t *testing.T, fx *fixture) {
			fi, err := os.Stat(fx.hostPath(name))
			if err != nil || fi.ModTime().UnixNano() != want {
				t.Errorf("%s mtime = %v, %v; want %v", name, fi.ModTime().UnixNano(), err, want)
			}
		}
	}
	const omit = experimentalsys.UTIME_OMIT
	tests := []struct {
		name   string
		op     func(*FS) experimentalsys.Errno
		errno  experimentalsys.Errno
		checks []check
	}{
		// Mkdir
		{"Mkdir", func(s *FS) experimentalsys.Errno { return s.Mkdir("d2", 0o755) }, 0, []check{exists("d2"), mode("d2", 0o755)}},
		{"Mkdir nested trailing slash", func(s *FS) experimentalsys.Errno { return s.Mkdir("dir/d2/", 0o700) }, 0, []check{exists("dir/d2")}},
		{"Mkdir masks mode", func(s *FS) experimentalsys.Errno { return s.Mkdir("d3", 0o755|fs.ModeSticky) }, 0, []check{mode("d3", 0o755)}},
		{"Mkdir exists dir", func(s *FS) experimentalsys.Errno { return s.Mkdir("dir", 0o755) }, experimentalsys.EEXIST, nil},
		{"Mkdir exists file", func(s *FS) experimentalsys.Errno { return s.Mkdir("file.txt", 0o755) }, experimentalsys.EEXIST, nil},
		{"Mkdir root", func(s *FS) experimentalsys.Errno { return s.Mkdir(".", 0o755) }, experimentalsys.EEXIST, nil},
		{"Mkdir missing parent", func(s *FS) experimentalsys.Errno { return s.Mkdir("no/d", 0o755) }, experimentalsys.ENOENT, nil},
		{"Mkdir under file", func(s *FS) experimentalsys.Errno { return s.Mkdir("file.txt/d", 0o755) }, experimentalsys.ENOTDIR, nil},
		// Chmod
		{"Chmod", func(s *FS) experimentalsys.Errno { return s.Chmod("file.txt", 0o600) }, 0, []check{mode("file.txt", 0o600)}},
		{"Chmod strips setuid", func(s *FS) experimentalsys.Errno { return s.Chmod("file.txt", 0o755|fs.ModeSetuid) }, 0, []check{mode("file.txt", 0o755)}},
		{"Chmod follows in-root link", func(s *FS) experimentalsys.Errno { return s.Chmod("good", 0o640) }, 0, []check{mode("file.txt", 0o640)}},
		{"Chmod missing", func(s *FS) experimentalsys.Errno { return s.Chmod("missing", 0o600) }, experimentalsys.ENOENT, nil},
		// Rename
		{"Rename file", func(s *FS) experimentalsys.Errno { return s.Rename("file.txt", "dir/moved.txt") }, 0, []check{gone("file.txt"), content("dir/moved.txt", "hello")}},
		{"Rename over file", func(s *FS) experimentalsys.Errno { return s.Rename("file.txt", "dir/nested.txt") }, 0, []check{gone("file.txt"), content("dir/nested.txt", "hello")}},
		{"Rename dir", func(s *FS) experimentalsys.Errno { return s.Rename("dir", "dir2") }, 0, []check{gone("dir"), content("dir2/nested.txt", "nested")}},
		{"Rename dir over empty dir", func(s *FS) experimentalsys.Errno { return s.Rename("dir", "empty") }, 0, []check{gone("dir"), content("empty/nested.txt", "nested")}},
		{"Rename symlink moves the link", func(s *FS) experimentalsys.Errno { return s.Rename("abs", "abs2") }, 0, []check{gone("abs"), exists("abs2")}},
		{"Rename same name", func(s *FS) experimentalsys.Errno { return s.Rename("file.txt", "file.txt") }, 0, []check{content("file.txt", "hello")}},
		{"Rename dir over non-empty dir", func(s *FS) experimentalsys.Errno { return s.Rename("empty", "dir") }, experimentalsys.ENOTEMPTY, []check{exists("empty"), exists("dir/nested.txt")}},
		{"Rename file over dir", func(s *FS) experimentalsys.Errno { return s.Rename("file.txt", "empty") }, experimentalsys.EISDIR, []check{exists("file.txt")}},
		{"Rename dir over file", func(s *FS) experimentalsys.Errno { return s.Rename("empty", "file.txt") }, experimentalsys.ENOTDIR, []check{exists("empty")}},
		{"Rename dir into itself", func(s *FS) experimentalsys.Errno { return s.Rename("dir", "dir/sub") }, experimentalsys.EINVAL, []check{exists("dir")}},
		{"Rename missing", func(s *FS) experimentalsys.Errno { return s.Rename("missing", "x") }, experimentalsys.ENOENT, nil},
		{"Rename to missing dir", func(s *FS) experimentalsys.Errno { return s.Rename("file.txt", "no/x") }, experimentalsys.ENOENT, []check{exists("file.txt")}},
		{"Rename root", func(s *FS) experimentalsys.Errno { return s.Rename(".", "x") }, experimentalsys.EINVAL, nil},
		{"Rename file with trailing slash", func(s *FS) experimentalsys.Errno { return s.Rename("file.txt/", "x") }, experimentalsys.ENOTDIR, []check{exists("file.txt")}},
		// Rmdir
		{"Rmdir", func(s *FS) experimentalsys.Errno { return s.Rmdir("empty") }, 0, []check{gone("empty")}},
		{"Rmdir not empty", func(s *FS) experimentalsys.Errno { return s.Rmdir("dir") }, experimentalsys.ENOTEMPTY, []check{exists("dir")}},
		{"Rmdir file", func(s *FS) experimentalsys.Errno { return s.Rmdir("file.txt") }, experimentalsys.ENOTDIR, []check{exists("file.txt")}},
		{"Rmdir symlink to dir", func(s *FS) experimentalsys.Errno { return s.Rmdir("gooddir") }, experimentalsys.ENOTDIR, []check{exists("gooddir"), exists("dir")}},
		{"Rmdir symlink to dir trailing slash", func(s *FS) experimentalsys.Errno { return s.Rmdir("gooddir/") }, experimentalsys.ENOTDIR, []check{exists("gooddir"), exists("dir")}},
		{"Rmdir missing", func(s *FS) experimentalsys.Errno { return s.Rmdir("missing") }, experimentalsys.ENOENT, nil},
		{"Rmdir root", func(s *FS) experimentalsys.Errno { return s.Rmdir(".") }, experimentalsys.EINVAL, nil},
		// Unlink
		{"Unlink", func(s *FS) experimentalsys.Errno { return s.Unlink("file.txt") }, 0, []check{gone("file.txt")}},
		{"Unlink symlink removes link only", func(s *FS) experimentalsys.Errno { return s.Unlink("good") }, 0, []check{gone("good"), exists("file.txt")}},
		{"Unlink escaping symlink removes link only", func(s *FS) experimentalsys.Errno { return s.Unlink("abs") }, 0, []check{gone("abs")}},
		{"Unlink dir", func(s *FS) experimentalsys.Errno { return s.Unlink("empty") }, experimentalsys.EISDIR, []check{exists("empty")}},
		{"Unlink missing", func(s *FS) experimentalsys.Errno { return s.Unlink("missing") }, experimentalsys.ENOENT, nil},
		{"Unlink file trailing slash", func(s *FS) experimentalsys.Errno { return s.Unlink("file.txt/") }, experimentalsys.ENOTDIR, []check{exists("file.txt")}},
		// Link
		{"Link", func(s *FS) experimentalsys.Errno { return s.Link("file.txt", "dir/hard") }, 0, []check{content("dir/hard", "hello")}},
		{"Link exists", func(s *FS) experimentalsys.Errno { return s.Link("file.txt", "dir/nested.txt") }, experimentalsys.EEXIST, []check{content("dir/nested.txt", "nested")}},
		{"Link missing", func(s *FS) experimentalsys.Errno { return s.Link("missing", "x") }, experimentalsys.ENOENT, []check{gone("x")}},
		{"Link dir", func(s *FS) experimentalsys.Errno { return s.Link("dir", "x") }, experimentalsys.EPERM, []check{gone("x")}},
		// Symlink
		{"Symlink", func(s *FS) experimentalsys.Errno { return s.Symlink("file.txt", "l") }, 0, []check{linkTo("l", "file.txt")}},
		{"Symlink nested up", func(s *FS) experimentalsys.Errno { return s.Symlink("../file.txt", "dir/l") }, 0, []check{linkTo("dir/l", "../file.txt")}},
		{"Symlink dangling allowed", func(s *FS) experimentalsys.Errno { return s.Symlink("nothing-yet", "l") }, 0, []check{linkTo("l", "nothing-yet")}},
		{"Symlink exists", func(s *FS) experimentalsys.Errno { return s.Symlink("file.txt", "dir") }, experimentalsys.EEXIST, nil},
		{"Symlink empty target", func(s *FS) experimentalsys.Errno { return s.Symlink("", "l") }, experimentalsys.ENOENT, []check{gone("l")}},
		{"Symlink absolute target", func(s *FS) experimentalsys.Errno { return s.Symlink("/etc/passwd", "l") }, experimentalsys.EPERM, []check{gone("l")}},
		{"Symlink climbing target", func(s *FS) experimentalsys.Errno { return s.Symlink("../outside", "l") }, experimentalsys.EPERM, []check{gone("l")}},
		{"Symlink nested climbing target", func(s *FS) experimentalsys.Errno { return s.Symlink("../../x", "dir/l") }, experimentalsys.EPERM, []check{gone("dir/l")}},
		// Readlink is read-only; see TestReadlink.
		// Utimens
		{"Utimens", func(s *FS) experimentalsys.Errno { return s.Utimens("file.txt", 1e18, 2e18) }, 0, []check{mtime("file.txt", 2e18)}},
		{"Utimens omit mtime", func(s *FS) experimentalsys.Errno { return s.Utimens("file.txt", 1e18, omit) }, 0, nil},
		{"Utimens follows in-root link", func(s *FS) experimentalsys.Errno { return s.Utimens("good", omit, 3e18) }, 0, []check{mtime("file.txt", 3e18)}},
		{"Utimens both omit", func(s *FS) experimentalsys.Errno { return s.Utimens("file.txt", omit, omit) }, 0, nil},
		{"Utimens both omit missing", func(s *FS) experimentalsys.Errno { return s.Utimens("missing", omit, omit) }, experimentalsys.ENOENT, nil},
		{"Utimens missing", func(s *FS) experimentalsys.Errno { return s.Utimens("missing", 1, 1) }, experimentalsys.ENOENT, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			if errno := tc.op(fx.fs); errno != tc.errno {
				t.Fatalf("errno = %v, want %v", errno, tc.errno)
			}
			for _, c := range tc.checks {
				c(t, fx)
			}
		})
	}
}

func TestUtimensOmitKeepsTime(t *testing.T) {
	fx := newFixture(t)
	before, _ := fx.fs.Stat("file.txt")
	if errno := fx.fs.Utimens("file.txt", experimentalsys.UTIME_OMIT, 5e17); errno != 0 {
		t.Fatal(errno)
	}
	after, _ := fx.fs.Stat("file.txt")
	if after.Atim != before.Atim || after.Mtim != 5e17 {
		t.Fatalf("atim %d -> %d, mtim %d", before.Atim, after.Atim, after.Mtim)
	}
}

func TestReadlink(t *testing.T) {
	fx := newFixture(t)
	tests := []struct {
		path, want string
		errno      experimentalsys.Errno
	}{
		{"good", "file.txt", 0},
		{"abs", fx.outside, 0}, // the text only; never followed
		{"passwd", "/etc/passwd", 0},
		{"rel", "../outside", 0},
		{"file.txt", "", experimentalsys.EINVAL},
		{"missing", "", experimentalsys.ENOENT},
		{"dirlink/f", "", experimentalsys.EPERM},
		{"../rel", "", experimentalsys.EPERM},
	}
	for _, tc := range tests {
		got, errno := fx.fs.Readlink(tc.path)
		if got != tc.want || errno != tc.errno {
			t.Errorf("Readlink(%q) = %q, %v; want %q, %v", tc.path, got, errno, tc.want, tc.errno)
		}
	}
}

func TestFile(t *testing.T) {
	fx := newFixture(t)
	f, errno := fx.fs.OpenFile("file.txt", experimentalsys.O_RDWR, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	var hs syscall.Stat_t
	if err := syscall.Stat(fx.hostPath("file.txt"), &hs); err != nil {
		t.Fatal(err)
	}
	if dev, errno := f.Dev(); errno != 0 || dev != uint64(hs.Dev) {
		t.Errorf("Dev = %d, %v; want %d", dev, errno, hs.Dev)
	}
	if ino, errno := f.Ino(); errno != 0 || ino != hs.Ino {
		t.Errorf("Ino = %d, %v; want %d", ino, errno, hs.Ino)
	}
	if st, errno := f.Stat(); errno != 0 || st.Ino != hs.Ino || st.Size != 5 || !st.Mode.IsRegular() {
		t.Errorf("Stat = %+v, %v", st, errno)
	}
	buf := make([]byte, 10)
	if n, errno := f.Read(buf[:0]); n != 0 || errno != 0 {
		t.Errorf("zero Read = %d, %v", n, errno)
	}
	if n, errno := f.Read(buf); n != 5 || errno != 0 || string(buf[:5]) != "hello" {
		t.Errorf("Read = %d, %v", n, errno)
	}
	if n, errno := f.Read(buf); n != 0 || errno != 0 {
		t.Errorf("Read at EOF = %d, %v; want 0, 0", n, errno)
	}
	if n, errno := f.Pread(buf[:3], 1); n != 3 || errno != 0 || string(buf[:3]) != "ell" {
		t.Errorf("Pread = %d, %v, %q", n, errno, buf[:3])
	}
	if n, errno := f.Pread(buf, 3); n != 2 || errno != 0 {
		t.Errorf("short Pread = %d, %v", n, errno)
	}
	if n, errno := f.Pread(buf, 100); n != 0 || errno != 0 {
		t.Errorf("Pread past EOF = %d, %v", n, errno)
	}
	if _, errno := f.Pread(buf, -1); errno != experimentalsys.EINVAL {
		t.Errorf("Pread negative = %v", errno)
	}
	if off, errno := f.Seek(1, io.SeekStart); off != 1 || errno != 0 {
		t.Errorf("Seek = %d, %v", off, errno)
	}
	if off, errno := f.Seek(1, io.SeekCurrent); off != 2 || errno != 0 {
		t.Errorf("Seek cur = %d, %v", off, errno)
	}
	if off, errno := f.Seek(-1, io.SeekEnd); off != 4 || errno != 0 {
		t.Errorf("Seek end = %d, %v", off, errno)
	}
	if _, errno := f.Seek(-10, io.SeekStart); errno != experimentalsys.EINVAL {
		t.Errorf("Seek negative = %v", errno)
	}
	if _, errno := f.Seek(0, 7); errno != experimentalsys.EINVAL {
		t.Errorf("Seek bad whence = %v", errno)
	}
	f.Seek(5, io.SeekStart)
	if n, errno := f.Write([]byte(" world")); n != 6 || errno != 0 {
		t.Errorf("Write = %d, %v", n, errno)
	}
	if n, errno := f.Pwrite([]byte("J"), 0); n != 1 || errno != 0 {
		t.Errorf("Pwrite = %d, %v", n, errno)
	}
	if _, errno := f.Pwrite([]byte("J"), -1); errno != experimentalsys.EINVAL {
		t.Errorf("Pwrite negative = %v", errno)
	}
	if b, _ := os.ReadFile(fx.hostPath("file.txt")); string(b) != "Jello world" {
		t.Errorf("content %q", b)
	}
	if errno := f.Truncate(4); errno != 0 {
		t.Errorf("Truncate = %v", errno)
	}
	if errno := f.Truncate(-1); errno != experimentalsys.EINVAL {
		t.Errorf("Truncate negative = %v", errno)
	}
	if b, _ := os.ReadFile(fx.hostPath("file.txt")); string(b) != "Jell" {
		t.Errorf("content after truncate %q", b)
	}
	if errno := f.Sync(); errno != 0 {
		t.Errorf("Sync = %v", errno)
	}
	if errno := f.Datasync(); errno != 0 {
		t.Errorf("Datasync = %v", errno)
	}
	if errno := f.Utimens(7e17, 8e17); errno != 0 {
		t.Errorf("Utimens = %v", errno)
	}
	if errno := f.Utimens(experimentalsys.UTIME_OMIT, experimentalsys.UTIME_OMIT); errno != 0 {
		t.Errorf("Utimens omit = %v", errno)
	}
	if errno := f.Utimens(experimentalsys.UTIME_OMIT, 9e17); errno != 0 {
		t.Errorf("Utimens omit atim = %v", errno)
	}
	if st, _ := f.Stat(); st.Atim != 7e17 || st.Mtim != 9e17 {
		t.Errorf("times %d %d", st.Atim, st.Mtim)
	}
	// SetAppend toggles O_APPEND on the descriptor.
	if f.IsAppend() {
		t.Error("IsAppend before SetAppend")
	}
	if errno := f.SetAppend(true); errno != 0 || !f.IsAppend() {
		t.Fatalf("SetAppend(true) = %v", errno)
	}
	f.Seek(0, io.SeekStart)
	f.Write([]byte("!"))
	if errno := f.SetAppend(false); errno != 0 || f.IsAppend() {
		t.Fatalf("SetAppend(false) = %v", errno)
	}
	f.Seek(0, io.SeekStart)
	f.Write([]byte("j"))
	if b, _ := os.ReadFile(fx.hostPath("file.txt")); string(b) != "jell!" {
		t.Errorf("content after append toggling %q", b)
	}
	pf := f.(experimentalsys.PollableFile)
	if ready, errno := pf.Poll(experimentalsys.POLLIN, 0); !ready || errno != 0 {
		t.Errorf("Poll = %v, %v", ready, errno)
	}
	if errno := pf.SetNonblock(true); errno != 0 || !pf.IsNonblock() {
		t.Errorf("SetNonblock = %v", errno)
	}
	if isDir, errno := f.IsDir(); isDir || errno != 0 {
		t.Errorf("IsDir = %v, %v", isDir, errno)
	}
	if _, errno := f.Readdir(-1); errno != experimentalsys.EBADF {
		t.Errorf("Readdir on file = %v, want EBADF", errno)
	}

	// After Close, everything is EBADF; Close again is fine.
	if errno := f.Close(); errno != 0 {
		t.Fatal(errno)
	}
	if errno := f.Close(); errno != 0 {
		t.Errorf("second Close = %v", errno)
	}
	closedOps := map[string]experimentalsys.Errno{}
	_, closedOps["Read"] = f.Read(buf)
	_, closedOps["Pread"] = f.Pread(buf, 0)
	_, closedOps["Write"] = f.Write(buf)
	_, closedOps["Pwrite"] = f.Pwrite(buf, 0)
	_, closedOps["Seek"] = f.Seek(0, io.SeekStart)
	_, closedOps["Stat"] = f.Stat()
	_, closedOps["Readdir"] = f.Readdir(1)
	_, closedOps["Poll"] = pf.Poll(experimentalsys.POLLIN, 0)
	closedOps["Truncate"] = f.Truncate(0)
	closedOps["Sync"] = f.Sync()
	closedOps["Datasync"] = f.Datasync()
	closedOps["Utimens"] = f.Utimens(1, 1)
	closedOps["SetAppend"] = f.SetAppend(true)
	closedOps["SetNonblock"] = pf.SetNonblock(false)
	for op, errno := range closedOps {
		if errno != experimentalsys.EBADF {
			t.Errorf("%s after Close = %v, want EBADF", op, errno)
		}
	}
}

func TestDirFile(t *testing.T) {
	fx := newFixture(t)
	d, errno := fx.fs.OpenFile("dir", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer d.Close()
	if isDir, _ := d.IsDir(); !isDir {
		t.Fatal("not a dir")
	}
	buf := make([]byte, 4)
	if _, errno := d.Read(buf); errno != experimentalsys.EISDIR {
		t.Errorf("Read = %v, want EISDIR", errno)
	}
	if _, errno := d.Pread(buf, 0); errno != experimentalsys.EISDIR {
		t.Errorf("Pread = %v, want EISDIR", errno)
	}
	if _, errno := d.Write(buf); errno != experimentalsys.EBADF {
		t.Errorf("Write = %v, want EBADF", errno)
	}
	if _, errno := d.Pwrite(buf, 0); errno != experimentalsys.EISDIR {
		t.Errorf("Pwrite = %v, want EISDIR", errno)
	}
	if errno := d.Truncate(0); errno != experimentalsys.EISDIR {
		t.Errorf("Truncate = %v, want EISDIR", errno)
	}
	if errno := d.SetAppend(true); errno != experimentalsys.EISDIR {
		t.Errorf("SetAppend = %v, want EISDIR", errno)
	}
	if _, errno := d.Seek(1, io.SeekStart); errno != experimentalsys.EISDIR {
		t.Errorf("Seek(1) = %v, want EISDIR", errno)
	}
	if errno := d.Sync(); errno != 0 {
		t.Errorf("Sync = %v", errno)
	}

	// Add entries of each type, then read them in pages.
	os.WriteFile(fx.hostPath("dir/b.txt"), []byte("b"), 0o644)
	os.Mkdir(fx.hostPath("dir/sub"), 0o755)
	os.Symlink("b.txt", fx.hostPath("dir/lnk"))
	want := map[string]fs.FileMode{"nested.txt": 0, "b.txt": 0, "sub": fs.ModeDir, "lnk": fs.ModeSymlink}
	readAllDirents := func() map[string]experimentalsys.Dirent {
		got := map[string]experimentalsys.Dirent{}
		for {
			page, errno := d.Readdir(2)
			if errno != 0 {
				t.Fatalf("Readdir = %v", errno)
			}
			for _, e := range page {
				got[e.Name] = e
			}
			if len(page) < 2 {
				return got
			}
		}
	}
	got := readAllDirents()
	if len(got) != len(want) {
		t.Fatalf("dirents %v", got)
	}
	for name, typ := range want {
		e, ok := got[name]
		if !ok || e.Type != typ {
			t.Errorf("dirent %q = %+v, want type %v", name, e, typ)
			continue
		}
		var hs syscall.Stat_t
		syscall.Lstat(fx.hostPath("dir/"+name), &hs)
		if e.Ino != hs.Ino {
			t.Errorf("dirent %q ino %d, want %d", name, e.Ino, hs.Ino)
		}
	}
	// Exhausted, then rewound.
	if page, errno := d.Readdir(10); len(page) != 0 || errno != 0 {
		t.Errorf("Readdir after end = %v, %v", page, errno)
	}
	if _, errno := d.Seek(0, io.SeekStart); errno != 0 {
		t.Fatalf("rewind = %v", errno)
	}
	all, errno := d.Readdir(-1)
	if errno != 0 || len(all) != len(want) {
		t.Errorf("Readdir(-1) after rewind = %d entries, %v", len(all), errno)
	}
	if errno := d.Utimens(1e18, 1e18); errno != 0 {
		t.Errorf("dir Utimens = %v", errno)
	}
}

func TestReadOnly(t *testing.T) {
	fx := newFixture(t, readOnly())
	rofs := fx.fs
	erofs := experimentalsys.EROFS
	ops := map[string]experimentalsys.Errno{
		"Mkdir":   rofs.Mkdir("d", 0o755),
		"Chmod":   rofs.Chmod("file.txt", 0o600),
		"Rename":  rofs.Rename("file.txt", "x"),
		"Rmdir":   rofs.Rmdir("empty"),
		"Unlink":  rofs.Unlink("file.txt"),
		"Link":    rofs.Link("file.txt", "x"),
		"Symlink": rofs.Symlink("file.txt", "x"),
		"Utimens": rofs.Utimens("file.txt", 1, 1),
	}
	for _, fl := range []experimentalsys.Oflag{
		experimentalsys.O_WRONLY, experimentalsys.O_RDWR,
		experimentalsys.O_RDONLY | experimentalsys.O_CREAT,
		experimentalsys.O_RDONLY | experimentalsys.O_TRUNC,
		experimentalsys.O_RDONLY | experimentalsys.O_APPEND,
		experimentalsys.O_RDWR | experimentalsys.O_CREAT | experimentalsys.O_EXCL,
	} {
		_, errno := rofs.OpenFile("file.txt", fl, 0o644)
		ops[fmt.Sprintf("OpenFile(%#x)", fl)] = errno
	}
	for op, errno := range ops {
		if errno != erofs {
			t.Errorf("%s = %v, want EROFS", op, errno)
		}
	}
	f, errno := rofs.OpenFile("file.txt", experimentalsys.O_RDONLY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer f.Close()
	if got := readAll(t, f); got != "hello" {
		t.Errorf("read %q", got)
	}
	if _, errno := f.Write([]byte("x")); errno != experimentalsys.EBADF {
		t.Errorf("Write = %v, want EBADF", errno)
	}
	if _, errno := f.Pwrite([]byte("x"), 0); errno != experimentalsys.EBADF {
		t.Errorf("Pwrite = %v, want EBADF", errno)
	}
	if errno := f.Truncate(0); errno != experimentalsys.EBADF {
		t.Errorf("Truncate = %v, want EBADF", errno)
	}
	if errno := f.Utimens(1, 1); errno != erofs {
		t.Errorf("file Utimens = %v, want EROFS", errno)
	}
	// Reads still work everywhere, escapes are still refused.
	if _, errno := rofs.Stat("dir/nested.txt"); errno != 0 {
		t.Errorf("Stat = %v", errno)
	}
	if _, errno := rofs.OpenFile("abs", experimentalsys.O_RDONLY, 0); errno != experimentalsys.EPERM {
		t.Errorf("open abs = %v, want EPERM", errno)
	}
	if b, _ := os.ReadFile(fx.hostPath("file.txt")); !bytes.Equal(b, []byte("hello")) {
		t.Errorf("file changed: %q", b)
	}
}

func TestToErrno(t *testing.T) {
	tests := []struct {
		err  error
		want experimentalsys.Errno
	}{
		{nil, 0},
		{&os.PathError{Op: "openat", Path: "x", Err: syscall.ENOENT}, experimentalsys.ENOENT},
		{&os.LinkError{Op: "renameat", Old: "a", New: "b", Err: syscall.ENOTEMPTY}, experimentalsys.ENOTEMPTY},
		{syscall.EACCES, experimentalsys.EACCES},
		{syscall.ENOSPC, experimentalsys.EIO}, // outside wazero's subset
		{os.ErrClosed, experimentalsys.EBADF},
		{fs.ErrNotExist, experimentalsys.ENOENT},
		{fs.ErrExist, experimentalsys.EEXIST},
		{fs.ErrPermission, experimentalsys.EPERM},
		{fs.ErrInvalid, experimentalsys.EINVAL},
		{io.ErrUnexpectedEOF, experimentalsys.EIO},
	}
	for _, tc := range tests {
		if got := toErrno(tc.err); got != tc.want {
			t.Errorf("toErrno(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	// The escape sentinel is learned from a real os.Root.
	fx := newFixture(t)
	_, err := fx.fs.root.Open("abs")
	if err == nil || toErrno(err) != experimentalsys.EPERM || escapeErr == nil {
		t.Errorf("escape error %v -> %v (sentinel %v)", err, toErrno(err), escapeErr)
	}
}

// TestConcurrentUse: one FS shared by goroutines (as one FS may serve
// several guest instances); run with -race.
func TestConcurrentUse(t *testing.T) {
	fx := newFixture(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("w%d.txt", i)
			for j := range 20 {
				f, errno := fx.fs.OpenFile(name, experimentalsys.O_RDWR|experimentalsys.O_CREAT|experimentalsys.O_TRUNC, 0o644)
				if errno != 0 {
					t.Errorf("open: %v", errno)
					return
				}
				f.Write([]byte(fmt.Sprint(j)))
				f.Close()
				if _, errno := fx.fs.Stat("dir/nested.txt"); errno != 0 {
					t.Errorf("stat: %v", errno)
				}
				if _, errno := fx.fs.OpenFile("abs", experimentalsys.O_RDONLY, 0); errno != experimentalsys.EPERM {
					t.Errorf("abs: %v", errno)
				}
				if errno := fx.fs.Rename(name, name+".tmp"); errno != 0 {
					t.Errorf("rename: %v", errno)
				}
				if errno := fx.fs.Unlink(name + ".tmp"); errno != 0 {
					t.Errorf("unlink: %v", errno)
				}
			}
		}()
	}
	wg.Wait()
}
