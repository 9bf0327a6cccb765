package guestfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// Held keeps some files of one workdir in memory for the guests served over it: the files
// the host hands a guest and takes back every task (task.md, out/result.txt), which no
// one but the guests reads while a task runs. The guests of every FS opened over the
// workdir with Hold see them as ordinary files — open, read, write, stat, list, remove —
// with no system call; the folder gets them when Flush is called, which the host does
// before anything else could look at the folder (a subprocess started in it); when the
// workdir's session ends, Settle brings up to date the copies the folder has and writes
// no new ones. An operation that a memory file cannot honour (rename, link,
// symlink, chmod, utimens, mkdir or rmdir on it or on a folder above it) flushes the files
// concerned to the folder first and then acts on the folder.
//
// Held is safe for concurrent use.
type Held struct {
	dir   *Dir
	mu    sync.Mutex
	files map[string]*heldFile // by workdir-relative clean name
	dev   uint64               // the workdir's device, what Stat reports (0: not learned yet)
	ino   uint64               // the last inode number made up for a held file
}

// heldFile is one held name: a file's bytes and metadata, or the name's absence. The
// FS's open handles point at it; one the name no longer holds (removed, then created
// again) lives on for its handles as an unlinked file does.
type heldFile struct {
	present      bool
	data         []byte
	mode         fs.FileMode
	created      bool // a guest made it while the name was held absent: the folder's file is replaced, with mode
	atime, mtime time.Time
	ino          uint64
	handles      map[*memFile]struct{} // open on it
}

// NewHeld returns an empty set of held files for the workdir dir. Every FS that holds
// through it must be opened with NewIn over the same Dir.
func NewHeld(dir *Dir) *Held {
	return &Held{dir: dir, files: map[string]*heldFile{}, ino: 1 << 62}
}

// devLocked is the workdir's device, learned at the first stat of a held file: from the
// folder, or while no one has made it, from the folder it will be made in.
func (h *Held) devLocked() uint64 {
	if h.dev == 0 {
		var fi fs.FileInfo
		var err error
		if r := h.dir.Opened(); r != nil {
			fi, err = r.Stat(".")
		} else {
			fi, err = os.Stat(filepath.Dir(h.dir.Path()))
		}
		if err == nil {
			h.dev = sys.NewStat_t(fi).Dev
		}
	}
	return h.dev
}

// heldName cleans a host-given name; Held's methods panic on one that is not local,
// a bug of the caller's.
func heldName(name string) string {
	n := path.Clean(name)
	if !fs.ValidPath(n) || n == "." {
		panic("guestfs: Held name not a local file name: " + name)
	}
	return n
}

// Put holds name with data, as if the host had written the file: the guests read data,
// and the folder gets it at the next Flush.
func (h *Held) Put(name string, data []byte) {
	name = heldName(name)
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.holdLocked(name)
	if !f.present { // writing over a file keeps its mode, as WriteOwn does in the folder
		f.mode, f.created = 0o644, false
	}
	f.present, f.data = true, append(f.data[:0:0], data...)
	f.mtime = time.Now()
	f.atime = f.mtime
}

// Drop holds name as absent, as if the host had removed the file: a guest opening it finds
// nothing (whatever the folder still has there), and the folder's copy is removed at the
// next Flush.
func (h *Held) Drop(name string) {
	name = heldName(name)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(name)
}

func (h *Held) dropLocked(name string) {
	if f := h.files[name]; f != nil && f.present {
		delete(h.files, name) // open handles keep the file, as after unlink(2)
	}
	h.holdLocked(name).present = false
}

func (h *Held) holdLocked(name string) *heldFile {
	f := h.files[name]
	if f == nil {
		h.ino++
		f = &heldFile{ino: h.ino}
		h.files[name] = f
	}
	return f
}

// Read returns the file name as the guests see it: held, from memory (fs.ErrNotExist when
// held absent), otherwise read from the folder through the root, refused unless a regular
// file, and refused over limit bytes.
func (h *Held) Read(name string, limit int64) ([]byte, error) {
	name = heldName(name)
	h.mu.Lock()
	if f := h.files[name]; f != nil {
		defer h.mu.Unlock()
		if !f.present {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		if int64(len(f.data)) > limit {
			return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("larger than the limit")}
		}
		return append([]byte(nil), f.data...), nil
	}
	h.mu.Unlock()
	root := h.dir.Opened()
	if root == nil { // a folder no one made has no files
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	file, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("not a regular file")}
	}
	data, err := io.ReadAll(io.LimitReader(file, limit+1))
	if err == nil && int64(len(data)) > limit {
		err = &fs.PathError{Op: "read", Path: name, Err: errors.New("larger than the limit")}
	}
	return data, err
}

// Flush writes every held file to the folder (WriteOwn), removes the folder's copy of
// every name held absent, and stops holding them: from then on guests and the host meet
// the folder's files. It goes on past a failure and returns the first.
func (h *Held) Flush() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.releaseLocked(func(string) bool { return true })
}

// Settle stops holding every file at the end of the workdir's session, writing only what
// the folder has a copy of: a held name whose folder copy exists is brought up to date
// (written, or removed when held absent) as Flush does, so the folder never shows a stale
// one; a name the folder has no copy of is let go unwritten. Once the session is over no
// one reads those files in the folder: the host takes the task's text and answer into the
// task's records, the next task puts its own, and a subprocess, the only reader of the
// folder, meets them through Flush. So a context that never starts a subprocess creates no
// file per task, and one whose folder no one made has nothing to look up. It goes on past
// a failure and returns the first.
func (h *Held) Settle() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	root := h.dir.Opened()
	for name, f := range h.files {
		if root == nil || isNotExist(root.Lstat(name)) {
			delete(h.files, name) // open handles keep the memory file, as after unlink(2)
			f.handles = nil
		}
	}
	return h.releaseLocked(func(string) bool { return true })
}

// release flushes the held files named by any of names, or below any of them.
func (h *Held) release(names ...string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.files) == 0 {
		return nil
	}
	return h.releaseLocked(func(held string) bool {
		for _, n := range names {
			if n == "." || held == n || strings.HasPrefix(held, n+"/") {
				return true
			}
		}
		return false
	})
}

func (h *Held) releaseLocked(which func(string) bool) error {
	var first error
	for name, f := range h.files {
		if !which(name) {
			continue
		}
		var err error
		if f.present { // a folder no one made yet is made for the first file it is given
			var root *os.Root
			if root, err = h.dir.Root(); err == nil {
				err = writeHeld(root, name, f)
			}
		} else if root := h.dir.Opened(); root != nil { // one no one made has no copy to remove
			if err = root.Remove(name); errors.Is(err, fs.ErrNotExist) {
				err = nil
			}
		}
		if err != nil && first == nil {
			first = err
		}
		delete(h.files, name)
		for m := range f.handles {
			m.reopenLocked()
		}
		f.handles = nil
	}
	return first
}

// isNotExist reports whether a stat's error says the name is not there.
func isNotExist(_ fs.FileInfo, err error) bool { return errors.Is(err, fs.ErrNotExist) }

// writeHeld writes f's bytes to name in the folder root: a file a guest created replaces
// the folder's, with its mode; one the host put is written over the folder's (WriteOwn).
func writeHeld(root *os.Root, name string, f *heldFile) error {
	if f.created {
		return writeNew(root, name, f.data, f.mode)
	}
	return WriteOwn(root, name, f.data)
}

// lookupLocked returns the held file at the workdir name, or errno when a folder on its way is a
// held file (ENOTDIR) or held absent (ENOENT); nil and 0 when the name is not held.
func (h *Held) lookupLocked(name string) (*heldFile, experimentalsys.Errno) {
	if len(h.files) == 0 || name == "." {
		return nil, 0
	}
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if f := h.files[dir]; f != nil {
			if f.present {
				return nil, experimentalsys.ENOTDIR
			}
			return nil, experimentalsys.ENOENT
		}
	}
	return h.files[name], 0
}

// children returns the held names directly in the workdir folder dir.
func (h *Held) children(dir string) map[string]*heldFile {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out map[string]*heldFile
	for name, f := range h.files {
		if path.Dir(name) == dir {
			if out == nil {
				out = map[string]*heldFile{}
			}
			out[path.Base(name)] = f
		}
	}
	return out
}

func (h *Held) statLocked(f *heldFile) sys.Stat_t {
	return sys.Stat_t{Dev: h.devLocked(), Ino: f.ino, Mode: f.mode, Nlink: 1, Size: int64(len(f.data)),
		Atim: f.atime.UnixNano(), Mtim: f.mtime.UnixNano(), Ctim: f.mtime.UnixNano()}
}

// WriteOwn writes data as the file name of the workdir root, a file the host owns there:
// through the root, so nothing a tool left at the name makes the host write elsewhere. A
// regular file with no other name is rewritten in place, keeping its blocks (truncating
// and reallocating them costs a discard per write on a file system mounted with discard);
// anything else at the name — a symbolic link, a folder, a hard link to another file —
// is replaced by a new file, as is a file that cannot be rewritten.
func WriteOwn(root *os.Root, name string, data []byte) error {
	fi, err := root.Lstat(name)
	if err == nil && fi.Mode().IsRegular() && links(fi) == 1 {
		if f, err := root.OpenFile(name, os.O_WRONLY, 0); err == nil {
			_, err = f.WriteAt(data, 0)
			if err == nil {
				err = f.Truncate(int64(len(data)))
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				return nil
			}
		}
	}
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		if err := root.RemoveAll(name); err != nil {
			return err
		}
	}
	return createFile(root, name, data, 0o644)
}

// writeNew replaces whatever the folder has at name with a new file of data and mode, as
// a guest's create after the name was removed made it: the process's umask applies, as
// it does to a guest's create in the folder.
func writeNew(root *os.Root, name string, data []byte, mode fs.FileMode) error {
	if err := root.RemoveAll(name); err != nil {
		return err
	}
	return createFile(root, name, data, mode)
}

// createFile makes the file name of data and mode, and the folders above it that are
// missing (a held file's folder, such as in/, exists only in memory until then).
func createFile(root *os.Root, name string, data []byte, mode fs.FileMode) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrNotExist) && path.Dir(name) != "." {
		if err = root.MkdirAll(path.Dir(name), 0o755); err == nil {
			f, err = root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		}
	}
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// links is fi's count of names (1 where the system does not say).
func links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// wname is the workdir name of the FS's cleaned name.
func (s *FS) wname(name string) string {
	switch {
	case s.at == ".":
		return name
	case name == ".":
		return s.at
	}
	return s.at + "/" + name
}

// openHeld opens name from memory when it is held; held is false when it is not.
func (s *FS) openHeld(name string, trailing bool, flag experimentalsys.Oflag, perm fs.FileMode) (_ experimentalsys.File, _ experimentalsys.Errno, held bool) {
	if s.held == nil {
		return nil, 0, false
	}
	h := s.held
	h.mu.Lock()
	defer h.mu.Unlock()
	f, errno := h.lookupLocked(s.wname(name))
	if errno != 0 {
		return nil, errno, true
	}
	if f == nil {
		return nil, 0, false
	}
	access := flag & accessMask
	now := time.Now()
	switch {
	case f.present && flag&(experimentalsys.O_CREAT|experimentalsys.O_EXCL) == experimentalsys.O_CREAT|experimentalsys.O_EXCL:
		return nil, experimentalsys.EEXIST, true
	case f.present && (trailing || flag&experimentalsys.O_DIRECTORY != 0):
		return nil, experimentalsys.ENOTDIR, true
	case f.present:
		if flag&experimentalsys.O_TRUNC != 0 && access != experimentalsys.O_RDONLY {
			f.data, f.mtime = f.data[:0], now
		}
	case flag&experimentalsys.O_CREAT == 0:
		return nil, experimentalsys.ENOENT, true
	case trailing:
		return nil, experimentalsys.EISDIR, true
	default:
		f.present, f.data, f.mode, f.created, f.atime, f.mtime = true, nil, perm&0o777, true, now, now
	}
	m := &memFile{fs: s, f: f, name: name,
		read:     access != experimentalsys.O_WRONLY,
		write:    access != experimentalsys.O_RDONLY,
		append:   flag&experimentalsys.O_APPEND != 0,
		nonblock: flag&experimentalsys.O_NONBLOCK != 0}
	if f.handles == nil {
		f.handles = map[*memFile]struct{}{}
	}
	f.handles[m] = struct{}{}
	return m, 0, true
}

// statHeld stats name from memory when it is held.
func (s *FS) statHeld(name string, trailing bool) (st sys.Stat_t, errno experimentalsys.Errno, held bool) {
	errno, held = s.onHeld(name, trailing, func(f *heldFile) { st = s.held.statLocked(f) })
	return st, errno, held
}

// onHeld applies change (when not nil) to name's held file; held is false when name is
// not held.
func (s *FS) onHeld(name string, trailing bool, change func(*heldFile)) (_ experimentalsys.Errno, held bool) {
	if s.held == nil {
		return 0, false
	}
	h := s.held
	h.mu.Lock()
	defer h.mu.Unlock()
	f, errno := h.lookupLocked(s.wname(name))
	switch {
	case errno != 0:
		return errno, true
	case f == nil:
		return 0, false
	case !f.present:
		return experimentalsys.ENOENT, true
	case trailing:
		return experimentalsys.ENOTDIR, true
	}
	if change != nil {
		change(f)
	}
	return 0, true
}

// unlinkHeld removes name's held file, holding the name absent.
func (s *FS) unlinkHeld(name string, trailing bool) (_ experimentalsys.Errno, held bool) {
	return s.onHeld(name, trailing, func(*heldFile) { s.held.dropLocked(s.wname(name)) })
}

// releaseHeld flushes the held files at or below names to the folder, before an
// operation on the folder that memory cannot stand for.
func (s *FS) releaseHeld(names ...string) experimentalsys.Errno {
	if errno := s.reach(); errno != 0 { // every caller acts on the folder next
		return errno
	}
	if s.held == nil {
		return 0
	}
	w := make([]string, len(names))
	for i, n := range names {
		w[i] = s.wname(n)
	}
	return toErrno(s.held.release(w...))
}
