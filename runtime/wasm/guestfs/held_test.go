package guestfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// heldFixture is a workdir with task.md and out/result.txt on disk (stale copies), a Held
// holding both, the guest's FS over the workdir and a hook's FS over out/.
type heldFixture struct {
	dir      string
	work     *Dir
	held     *Held
	fs, outs *FS
}

func newHeldFixture(t *testing.T) *heldFixture {
	t.Helper()
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "out"), 0o755)
	os.WriteFile(filepath.Join(dir, "task.md"), []byte("stale task"), 0o644)
	os.WriteFile(filepath.Join(dir, "out", "result.txt"), []byte("stale answer"), 0o644)
	os.WriteFile(filepath.Join(dir, "other.txt"), []byte("other"), 0o644)
	work, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { work.Close() })
	h := NewHeld(work)
	gfs, err := NewIn(work, ".", Hold(h))
	if err != nil {
		t.Fatal(err)
	}
	outs, err := NewIn(work, "out", Hold(h))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gfs.Close(); outs.Close() })
	h.Put("task.md", []byte("count these words"))
	h.Drop("out/result.txt")
	return &heldFixture{dir: dir, work: work, held: h, fs: gfs, outs: outs}
}

func (x *heldFixture) disk(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(x.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return "<none>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func names(t *testing.T, f experimentalsys.File) []string {
	t.Helper()
	var out []string
	for {
		ds, errno := f.Readdir(1) // one at a time: the merge must hold across pages
		if errno != 0 {
			t.Fatalf("readdir: %v", errno)
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			out = append(out, d.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestHeldServesFromMemory: what the host holds is what the guests of every FS over the
// workdir see — read, stat, listed once — whatever the folder has at those names, and the
// folder is left as it was until Flush writes the held files and removes the ones held
// absent.
func TestHeldServesFromMemory(t *testing.T) {
	x := newHeldFixture(t)
	f, errno := x.fs.OpenFile("task.md", experimentalsys.O_RDONLY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	if got := readAll(t, f); got != "count these words" {
		t.Errorf("the guest read %q", got)
	}
	if st, errno := f.Stat(); errno != 0 || st.Size != 17 || st.Mode.Type() != 0 {
		t.Errorf("stat of the open file: %+v %v", st, errno)
	}
	f.Close()
	if st, errno := x.fs.Stat("/task.md"); errno != 0 || st.Size != 17 {
		t.Errorf("stat: %+v %v", st, errno)
	}
	if _, errno := x.fs.Stat("out/result.txt"); errno != experimentalsys.ENOENT {
		t.Errorf("stat of the answer held absent: %v, want ENOENT", errno)
	}
	if _, errno := x.outs.Lstat("result.txt"); errno != experimentalsys.ENOENT {
		t.Errorf("the hook's FS over out/: %v, want ENOENT", errno)
	}
	if _, errno := x.fs.OpenFile("task.md/x", experimentalsys.O_RDONLY, 0); errno != experimentalsys.ENOTDIR {
		t.Errorf("a path through a held file: %v, want ENOTDIR", errno)
	}
	root, errno := x.fs.OpenFile(".", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	if got := names(t, root); !slices.Equal(got, []string{"other.txt", "out", "task.md"}) {
		t.Errorf("the root lists %q", got)
	}
	if _, errno := root.Seek(0, io.SeekStart); errno != 0 {
		t.Fatal(errno)
	}
	if got := names(t, root); !slices.Equal(got, []string{"other.txt", "out", "task.md"}) {
		t.Errorf("the root lists after a rewind %q", got)
	}
	root.Close()

	// The guest writes its answer: in memory, read back by the host and by the hook's FS.
	w, errno := x.fs.OpenFile("out/result.txt", experimentalsys.O_WRONLY|experimentalsys.O_CREAT|experimentalsys.O_TRUNC, 0o600)
	if errno != 0 {
		t.Fatal(errno)
	}
	for _, s := range []string{"three ", "words"} {
		if _, errno := w.Write([]byte(s)); errno != 0 {
			t.Fatal(errno)
		}
	}
	w.Close()
	if data, err := x.held.Read("out/result.txt", 1<<20); err != nil || string(data) != "three words" {
		t.Errorf("the host reads %q %v", data, err)
	}
	if _, err := x.held.Read("out/result.txt", 5); err == nil {
		t.Error("a held file over the limit was read")
	}
	out, _ := x.outs.OpenFile(".", experimentalsys.O_RDONLY, 0)
	if got := names(t, out); !slices.Equal(got, []string{"result.txt"}) {
		t.Errorf("out/ lists %q", got)
	}
	out.Close()
	if got := x.disk(t, "task.md") + "|" + x.disk(t, "out/result.txt"); got != "stale task|stale answer" {
		t.Errorf("the folder before Flush: %q", got)
	}
	if err := x.held.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := x.disk(t, "task.md") + "|" + x.disk(t, "out/result.txt"); got != "count these words|three words" {
		t.Errorf("the folder after Flush: %q", got)
	}
	// Flushed, nothing is held: the folder is what guests and host meet.
	os.WriteFile(filepath.Join(x.dir, "task.md"), []byte("a tool's"), 0o644)
	if data, err := x.held.Read("task.md", 1<<20); err != nil || string(data) != "a tool's" {
		t.Errorf("after Flush the host reads %q %v", data, err)
	}

	// A name held absent is removed from the folder at Flush, and an unlinked one too.
	x.held.Drop("out/result.txt")
	x.held.Put("task.md", []byte("next"))
	if errno := x.fs.Unlink("task.md"); errno != 0 {
		t.Fatal(errno)
	}
	if errno := x.fs.Unlink("task.md"); errno != experimentalsys.ENOENT {
		t.Errorf("unlink twice: %v", errno)
	}
	if err := x.held.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := x.disk(t, "task.md") + "|" + x.disk(t, "out/result.txt"); got != "<none>|<none>" {
		t.Errorf("the folder after Flush of absent names: %q", got)
	}
}

// TestHeldOpens: the open flags act on a held file as on a file in the folder.
func TestHeldOpens(t *testing.T) {
	for _, tt := range []struct {
		name  string
		path  string
		flag  experimentalsys.Oflag
		errno experimentalsys.Errno
		after string // task.md's bytes after writing "XY" through the handle
	}{
		{"read", "task.md", experimentalsys.O_RDONLY, 0, "count these words"},
		{"exclusive create", "task.md", experimentalsys.O_WRONLY | experimentalsys.O_CREAT | experimentalsys.O_EXCL, experimentalsys.EEXIST, ""},
		{"as a directory", "task.md", experimentalsys.O_RDONLY | experimentalsys.O_DIRECTORY, experimentalsys.ENOTDIR, ""},
		{"trailing slash", "task.md/", experimentalsys.O_RDONLY, experimentalsys.ENOTDIR, ""},
		{"write in place", "task.md", experimentalsys.O_WRONLY, 0, "XYunt these words"},
		{"truncate", "task.md", experimentalsys.O_RDWR | experimentalsys.O_TRUNC, 0, "XY"},
		{"append", "task.md", experimentalsys.O_WRONLY | experimentalsys.O_APPEND, 0, "count these wordsXY"},
		{"absent, no create", "out/result.txt", experimentalsys.O_RDONLY, experimentalsys.ENOENT, ""},
		{"absent, through it", "out/result.txt/x", experimentalsys.O_RDONLY, experimentalsys.ENOENT, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := newHeldFixture(t)
			f, errno := x.fs.OpenFile(tt.path, tt.flag, 0o644)
			if errno != tt.errno {
				t.Fatalf("open: %v, want %v", errno, tt.errno)
			}
			if errno != 0 {
				return
			}
			defer f.Close()
			_, werr := f.Write([]byte("XY"))
			if tt.flag&accessMask == experimentalsys.O_RDONLY {
				if werr != experimentalsys.EBADF {
					t.Errorf("a write through a read-only handle: %v", werr)
				}
			} else if werr != 0 {
				t.Fatal(werr)
			}
			if data, _ := x.held.Read("task.md", 1<<20); string(data) != tt.after {
				t.Errorf("task.md holds %q, want %q", data, tt.after)
			}
		})
	}
}

// TestHeldRelease: what memory cannot stand for — a rename, a link, a folder made or
// removed at or above a held name, a Flush while a handle is open — acts on the folder,
// which first gets the held files concerned; an open handle goes on there.
func TestHeldRelease(t *testing.T) {
	x := newHeldFixture(t)
	w, errno := x.fs.OpenFile("task.md", experimentalsys.O_RDWR, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer w.Close()
	if _, errno := w.Write([]byte("COUNT")); errno != 0 {
		t.Fatal(errno)
	}
	if errno := x.fs.Rename("task.md", "renamed.md"); errno != 0 {
		t.Fatal(errno)
	}
	if got := x.disk(t, "renamed.md") + "|" + x.disk(t, "task.md"); got != "COUNT these words|<none>" {
		t.Errorf("after the rename: %q", got)
	}
	// The handle was opened in the folder before the rename: it goes on in the renamed
	// file, at its offset, as a descriptor would.
	if _, errno := w.Write([]byte("!")); errno != 0 {
		t.Fatal(errno)
	}
	if got := x.disk(t, "renamed.md"); got != "COUNT!these words" {
		t.Errorf("a write through the handle after the rename: %q", got)
	}

	x = newHeldFixture(t)
	w, _ = x.fs.OpenFile("out/result.txt", experimentalsys.O_WRONLY|experimentalsys.O_CREAT, 0o644)
	defer w.Close()
	w.Write([]byte("ab"))
	if errno := x.fs.Rmdir("out"); errno != experimentalsys.ENOTEMPTY {
		t.Errorf("rmdir of a folder holding a held file: %v, want ENOTEMPTY", errno)
	}
	if got := x.disk(t, "out/result.txt"); got != "ab" {
		t.Errorf("out/result.txt after the rmdir: %q", got)
	}
	if _, errno := w.Write([]byte("cd")); errno != 0 {
		t.Fatal(errno)
	}
	if got := x.disk(t, "out/result.txt"); got != "abcd" {
		t.Errorf("a write after the release goes on in the folder's file: %q", got)
	}
	if data, err := x.held.Read("out/result.txt", 1<<20); err != nil || string(data) != "abcd" {
		t.Errorf("the host reads the folder's file: %q %v", data, err)
	}
	if errno := x.fs.Chmod("task.md", 0o600); errno != 0 {
		t.Fatal(errno)
	}
	if fi, err := os.Stat(filepath.Join(x.dir, "task.md")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("a chmod of a held file acts on the folder's: %v %v", fi, err)
	}
	if errno := x.fs.Link("other.txt", "task.md"); errno != experimentalsys.EEXIST {
		t.Errorf("a link onto a held file: %v, want EEXIST", errno)
	}
	if got := x.disk(t, "task.md"); got != "count these words" {
		t.Errorf("task.md after the link: %q", got)
	}
}

// TestHeldFlushModes: the folder's file gets the mode it would have had without holding:
// a file the host put keeps the folder's mode (or 0644 when new), and one a guest created
// after the name was held absent replaces the folder's copy with the guest's mode (under
// the process's umask, as a create in the folder would), which a later put keeps.
func TestHeldFlushModes(t *testing.T) {
	umask := syscall.Umask(0)
	syscall.Umask(umask)
	for _, tt := range []struct {
		name    string
		prepare func(x *heldFixture) // before the guest's create, if any
		create  fs.FileMode          // the guest creates out/result.txt with it; 0: no create
		put     bool                 // then the host puts out/result.txt
		file    string
		want    fs.FileMode
	}{
		{"put over the folder's 0600", func(x *heldFixture) {}, 0, false, "task.md", 0o600},
		{"put, new in the folder", func(x *heldFixture) { os.Remove(filepath.Join(x.dir, "task.md")) }, 0, false, "task.md", 0o644},
		{"guest creates 0600 over a dropped 0644", func(x *heldFixture) {}, 0o600, false, "out/result.txt", 0o600},
		{"guest creates 0666", func(x *heldFixture) {}, 0o666, false, "out/result.txt", 0o666 &^ fs.FileMode(umask)},
		{"put over the guest's create keeps its mode", func(x *heldFixture) {}, 0o600, true, "out/result.txt", 0o600},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := newHeldFixture(t)
			if err := os.Chmod(filepath.Join(x.dir, "task.md"), 0o600); err != nil {
				t.Fatal(err)
			}
			tt.prepare(x)
			if tt.create != 0 {
				f, errno := x.fs.OpenFile("out/result.txt", experimentalsys.O_WRONLY|experimentalsys.O_CREAT, tt.create)
				if errno != 0 {
					t.Fatalf("create: %v", errno)
				}
				f.Write([]byte("an answer"))
				f.Close()
			}
			if tt.put {
				x.held.Put("out/result.txt", []byte("the host's"))
			}
			if err := x.held.Flush(); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(filepath.Join(x.dir, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != tt.want {
				t.Errorf("%s has mode %v, want %v", tt.file, got, tt.want)
			}
		})
	}
}

// TestHeldSettle: at a context session's end, Settle brings the folder's own copies of
// held files up to date (written, or removed when held absent) and makes no new file.
func TestHeldSettle(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(x *heldFixture) // after the fixture: task.md held, out/result.txt held absent
		want  map[string]string    // folder name → content ("<none>": absent)
	}{
		{"the folder's copies are updated", func(x *heldFixture) {},
			map[string]string{"task.md": "count these words", "out/result.txt": "<none>", "other.txt": "other"}},
		{"no copy in the folder: none made", func(x *heldFixture) {
			os.Remove(filepath.Join(x.dir, "task.md"))
			os.Remove(filepath.Join(x.dir, "out", "result.txt"))
			x.held.Put("out/result.txt", []byte("the answer"))
		}, map[string]string{"task.md": "<none>", "out/result.txt": "<none>"}},
		{"a guest's answer over the folder's stale one", func(x *heldFixture) {
			f, errno := x.fs.OpenFile("out/result.txt", experimentalsys.O_CREAT|experimentalsys.O_WRONLY, 0o644)
			if errno != 0 {
				t.Fatal(errno)
			}
			f.Write([]byte("fresh answer"))
			f.Close()
		}, map[string]string{"out/result.txt": "fresh answer"}},
		{"a flushed file stays the folder's", func(x *heldFixture) {
			os.Remove(filepath.Join(x.dir, "task.md"))
			if err := x.held.Flush(); err != nil {
				t.Fatal(err)
			}
			x.held.Put("task.md", []byte("the next task"))
		}, map[string]string{"task.md": "the next task"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newHeldFixture(t)
			tc.setup(x)
			if err := x.held.Settle(); err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				if got := x.disk(t, name); got != want {
					t.Errorf("%s in the folder: %q, want %q", name, got, want)
				}
			}
			// Nothing is held any more: the guests meet the folder.
			if _, errno := x.fs.Stat("task.md"); (errno == 0) != (tc.want["task.md"] != "<none>") && tc.want["task.md"] != "" {
				t.Errorf("stat task.md after Settle: %v", errno)
			}
		})
	}
}

// openClose opens name with flag and perm and closes it again.
func openClose(s *FS, name string, flag experimentalsys.Oflag, perm fs.FileMode) experimentalsys.Errno {
	f, errno := s.OpenFile(name, flag, perm)
	if errno == 0 {
		f.Close()
	}
	return errno
}

// TestBefore: Before's fn runs the first time an operation reaches the folder, never for
// what the held files serve; a failure fails that operation and the next reach tries
// again.
func TestBefore(t *testing.T) {
	for _, tc := range []struct {
		name  string
		op    func(s *FS) experimentalsys.Errno
		reach bool
	}{
		{"read a held file", func(s *FS) experimentalsys.Errno { return openClose(s, "task.md", experimentalsys.O_RDONLY, 0) }, false},
		{"create the held answer", func(s *FS) experimentalsys.Errno {
			return openClose(s, "out/result.txt", experimentalsys.O_CREAT|experimentalsys.O_WRONLY, 0o644)
		}, false},
		{"stat a held file", func(s *FS) experimentalsys.Errno { _, errno := s.Stat("task.md"); return errno }, false},
		{"open another file", func(s *FS) experimentalsys.Errno { return openClose(s, "other.txt", experimentalsys.O_RDONLY, 0) }, true},
		{"stat out/", func(s *FS) experimentalsys.Errno { _, errno := s.Stat("out"); return errno }, true},
		{"list the root", func(s *FS) experimentalsys.Errno {
			f, errno := s.OpenFile(".", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
			if errno != 0 {
				return errno
			}
			defer f.Close()
			_, errno = f.Readdir(-1)
			return errno
		}, true},
		{"mkdir", func(s *FS) experimentalsys.Errno { return s.Mkdir("made", 0o755) }, true},
		{"unlink another file", func(s *FS) experimentalsys.Errno { return s.Unlink("other.txt") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newHeldFixture(t)
			calls, fail := 0, true
			s, err := NewIn(x.work, ".", Hold(x.held), Before(func() error {
				calls++
				if fail {
					return fs.ErrPermission
				}
				return nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			errno := tc.op(s)
			if !tc.reach {
				if errno != 0 || calls != 0 {
					t.Fatalf("errno %v, %d calls of fn, want none", errno, calls)
				}
				return
			}
			if errno != experimentalsys.EPERM || calls != 1 {
				t.Fatalf("with fn failing: errno %v, %d calls, want EPERM and 1", errno, calls)
			}
			fail = false
			if errno := tc.op(s); errno != 0 || calls != 2 {
				t.Fatalf("with fn succeeding: errno %v, %d calls, want 0 and 2", errno, calls)
			}
			s.Stat("other.txt")
			if calls != 2 {
				t.Errorf("fn ran again after it succeeded: %d calls", calls)
			}
		})
	}
}

// TestLazyDir: a Held and FSs over a LazyDir serve the held files without making the
// folder, and Settle then leaves none; Flush makes it for the files it writes; the first
// reach of the folder runs Before, then makes and opens it, a sub-folder's FS included.
func TestLazyDir(t *testing.T) {
	for _, tc := range []struct {
		name   string
		act    func(t *testing.T, h *Held, root, out *FS)
		folder []string // the folder's files after act and the end of the session; nil: no folder
	}{
		{"held files only, then Settle", func(t *testing.T, h *Held, root, _ *FS) {
			if errno := openClose(root, "task.md", experimentalsys.O_RDONLY, 0); errno != 0 {
				t.Fatalf("open task.md: %v", errno)
			}
			if st, errno := root.Stat("task.md"); errno != 0 || st.Dev == 0 {
				t.Fatalf("stat task.md: %v, dev %d", errno, st.Dev)
			}
			if errno := openClose(root, "out/result.txt", experimentalsys.O_CREAT|experimentalsys.O_WRONLY, 0o644); errno != 0 {
				t.Fatalf("create out/result.txt: %v", errno)
			}
			if _, err := h.Read("other.txt", 10); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Read of a file of a folder no one made: %v, want not exist", err)
			}
		}, nil},
		{"Flush", func(t *testing.T, h *Held, _, _ *FS) {
			if err := h.Flush(); err != nil { // out/result.txt held absent: no copy to remove
				t.Fatal(err)
			}
		}, []string{"task.md"}},
		{"a guest reaches the folder", func(t *testing.T, _ *Held, root, _ *FS) {
			if _, errno := root.Stat("other.txt"); errno != experimentalsys.ENOENT {
				t.Fatalf("stat other.txt: %v, want ENOENT from the folder made now", errno)
			}
		}, []string{"out"}},
		{"a guest reaches the sub-folder", func(t *testing.T, _ *Held, _, out *FS) {
			if _, errno := out.Stat("."); errno != 0 {
				t.Fatalf("stat out/.: %v", errno)
			}
		}, []string{"out"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "work")
			work := LazyDir(dir)
			h := NewHeld(work)
			before := func() error { // what runtime's workdirPrep does
				r, err := work.Root()
				if err != nil {
					return err
				}
				return r.Mkdir("out", 0o755)
			}
			root, err := NewIn(work, ".", Hold(h), Before(before))
			if err != nil {
				t.Fatal(err)
			}
			out, err := NewIn(work, "out", Hold(h), Before(before))
			if err != nil {
				t.Fatal(err)
			}
			h.Put("task.md", []byte("count these words"))
			h.Drop("out/result.txt") // as runtime holds them
			tc.act(t, h, root, out)
			if err := h.Settle(); err != nil {
				t.Fatal(err)
			}
			root.Close()
			out.Close()
			if err := work.Close(); err != nil {
				t.Fatal(err)
			}
			entries, err := os.ReadDir(dir)
			if tc.folder == nil {
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("the folder: %v (%d entries), want none made", err, len(entries))
				}
				return
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			if err != nil || !slices.Equal(got, tc.folder) {
				t.Fatalf("the folder holds %v (%v), want %v", got, err, tc.folder)
			}
		})
	}
}

// TestHeldFlushMakesFolders flushes a held file whose folder exists only in memory: the
// folder is made with it.
func TestHeldFlushMakesFolders(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "work")
	d := LazyDir(dir)
	defer d.Close()
	h := NewHeld(d)
	h.Put("in/message.json", []byte(`{"parts":[]}`))
	h.Put("in/deeper/0-a.pdf", []byte("%PDF"))
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"in/message.json": `{"parts":[]}`, "in/deeper/0-a.pdf": "%PDF"} {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
}
