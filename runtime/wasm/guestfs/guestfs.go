// Package guestfs serves one host directory to a WebAssembly guest as a
// wazero experimental/sys.FS, built on Go's os.Root so that nothing the guest
// names — through "..", an absolute path, or a symbolic link planted by anyone
// — ever resolves to a file outside that directory.
//
// It exists because wazero's own sysfs.DirFS (used by WithDirMount) follows a
// symbolic link placed inside the mounted folder to anywhere on the host.
// Mount it as the guest's root:
//
//	gfs, err := guestfs.New(workdir)
//	...
//	defer gfs.Close()
//	cfg := wazero.NewFSConfig().(sysfs.FSConfig).WithSysFSMount(gfs, "/")
//
// # Guarantees
//
//   - Every path is resolved by os.Root, relative to the directory handle
//     opened by New. Paths arrive from wazero relative to the mount ("",
//     ".", "a/b", "a/b/", and "/a" when wazero joins a name to a directory
//     opened as "."); a leading "/" means the guest's root, i.e. the mounted
//     directory, exactly as the guest sees it. A name that lexically climbs
//     above the root ("..", "a/../../x", "/../x") is refused with EPERM
//     before any system call.
//   - A symbolic link whose target is absolute, or which climbs out of the
//     root, is never followed: os.Root refuses it ("path escapes from
//     parent"), and this package reports EPERM. This holds for every
//     operation (open, stat, mkdir, rename, link, unlink, chmod, utimens…),
//     for links anywhere in the path (not only the last component), for
//     chains of links, and for links to directories. Lstat and Readlink of
//     such a link succeed: they describe the link itself and never touch
//     its target.
//   - The guest may create symbolic links (Symlink), but only with a
//     relative target that, read lexically from the link's own directory,
//     stays inside the root; an absolute or climbing target is refused with
//     EPERM. This is defence in depth for host-side readers of the folder:
//     such a link could never be followed through this FS anyway. It is not a
//     complete guarantee for them (moving a link or its directory changes
//     what a relative target means), so host code that reads files the
//     guest could write must itself use os.Root or O_NOFOLLOW.
//   - Only regular files and directories are opened; a FIFO, device or
//     socket found in the tree is refused with EACCES, and every open is
//     issued with O_NONBLOCK, so a FIFO planted by a subprocess can neither
//     block the host at open nor be read.
//   - Mode bits passed to OpenFile, Mkdir and Chmod are masked to 0o777: a
//     guest cannot create set-uid, set-gid or sticky files.
//   - With readOnly (only tests set it), every mutating operation returns
//     EROFS, and an open asking for write access, O_CREAT, O_TRUNC or
//     O_APPEND returns EROFS; files are only ever opened O_RDONLY, so writes
//     through them fail with EBADF in the kernel.
//
// # Held files
//
// A Held keeps some files of a workdir in memory for every FS opened over it with Hold
// (the host's task.md and the guest's out/result.txt, in capsulegate): guests meet them
// as ordinary files with no system call, and the folder gets them at Flush. See Held.
//
// # Facts about os.Root this relies on (Go 1.24, plus the Go 1.25 methods)
//
// Verified on Linux with the Go toolchain of this module (see the tests):
//
//   - Root methods resolve every path component with openat(O_NOFOLLOW)
//     relative to the root's directory descriptor, and resolve symbolic
//     links themselves (at most 8), restarting from the root descriptor;
//     a link target that is absolute or lexically above the root yields the
//     error "path escapes from parent" (the root also follows the directory
//     if it is moved, as it holds a descriptor, not a name).
//   - Root.OpenFile adds O_NOFOLLOW itself and then follows a final
//     symbolic link in-root, so passing O_NOFOLLOW does not stop it
//     following: this package implements O_NOFOLLOW with an Lstat first.
//     That check races with a concurrent swap of the name, but the worst
//     outcome is opening an in-root file: containment never depends on it.
//   - Root.Chmod and Root.Chtimes check "is it a symlink" and then act with
//     AT_SYMLINK_NOFOLLOW; a concurrent swap can make them act on a link
//     rather than its target, still inside the root (documented in os).
//   - Root.Symlink does not validate its target (hence the check here);
//     Root.Link does not follow a symbolic link given as the old name.
//   - Root.Rename refuses to replace an existing directory (EEXIST), unlike
//     rename(2); Rename here replaces an empty directory with a directory
//     and reports EISDIR / ENOTEMPTY like POSIX.
//   - os.File.ReadDir on a file opened through a Root stats entries with
//     fstatat relative to the directory descriptor (never by host path).
//   - Root does not stop traversal of mount points or bind mounts inside
//     the directory; the caller controls what the directory contains.
//
// # Errors
//
// Go errors are mapped to experimental/sys.Errno: syscall errnos as wazero
// maps them (ENOENT, EEXIST, ENOTDIR, EISDIR, ENOTEMPTY, EACCES, EPERM,
// ELOOP, EINVAL, ENAMETOOLONG…; errnos outside wazero's subset become EIO),
// os.ErrClosed as EBADF, an escape as EPERM.
package guestfs

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// Option configures New.
type Option func(*options)

type options struct {
	readOnly  bool
	protected []string
	held      *Held
	before    func() error
}

// Before runs fn before the FS first reaches its folder — an open, a stat, a listing or a
// change that the held files do not serve — so the host can make what the folder must hold
// for its guests only when a guest looks (runtime makes a context's out/ so). Until fn
// succeeds it runs again at the next reach, and its failure fails that operation.
func Before(fn func() error) Option {
	return func(o *options) { o.before = fn }
}

// Hold serves the files h holds (NewHeld) from memory, as this FS's guests see them; the
// FS must be opened with NewIn over the root h was made for.
func Hold(h *Held) Option {
	return func(o *options) { o.held = h }
}

// Protect makes the named files (relative to the root) read-only for the guest while the
// rest stays writable: opening them for writing or truncation, chmod, utimens, rename and
// unlink are refused with EROFS. The check is by file identity (device and inode), so a
// hard link or a symbolic link to a protected file is protected too; the identity is the
// one the name has at the time of the check, so a protected file the host replaces
// (written to a temporary file and renamed) stays protected, and a file that reuses the
// replaced one's inode is not mistaken for it. A name that does not exist protects nothing
// until it does: a host that makes it later does so before guests reach the folder (Before).
func Protect(names ...string) Option {
	return func(o *options) { o.protected = append(o.protected, names...) }
}

// readOnly makes the filesystem read-only: every mutating operation returns
// EROFS and opens asking for write access are refused with EROFS. Only tests use it.
func readOnly() Option {
	return func(o *options) { o.readOnly = true }
}

// FS is an experimental/sys.FS serving one host directory through os.Root.
// It is safe for concurrent use; Close it when no guest uses it any more.
type FS struct {
	// root is the directory served: opened by New, or by reach for NewIn (while its
	// parent Dir is not opened), so every use of it comes after reach.
	root      *os.Root
	ownRoot   bool // Close closes root (NewIn of "." shares its parent's)
	parent    *Dir // NewIn's parent, which reach opens root from
	dir       string
	readOnly  bool
	protected []string // the Protect files' names, relative to the root
	// held serves some files from memory (Hold); at is this FS's folder in held's root.
	held *Held
	at   string
	// rootID identifies the directory served, learned at its first use: the root holds a
	// descriptor of it, so it stays true while the FS is open.
	rootOnce sync.Once
	rootID   sys.Stat_t
	rootErr  experimentalsys.Errno
	// before is Before's fn, run under beforeMu with the opening of root until both have
	// succeeded (reached).
	before   func() error
	beforeMu sync.Mutex
	reached  atomic.Bool
}

var (
	_ experimentalsys.FS         = (*FS)(nil)
	_ interface{ Close() error } = (*FS)(nil)
)

// New opens dir (which must be an existing directory; symbolic links in dir
// itself are followed, by the host) and returns the filesystem serving it.
func New(dir string, opts ...Option) (*FS, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	s, err := newFS(dir, nil, ".", opts)
	if err != nil {
		r.Close()
		return nil, err
	}
	learnEscapeError(r)
	s.root, s.ownRoot = r, true
	return s, nil
}

// NewIn is New for the folder dir inside parent, opened through parent: a symbolic link
// on the way (dir itself among them) that leads out of parent is refused, never followed,
// so a folder a guest or a tool could replace by a link still serves only what is inside
// parent. While parent is not opened (LazyDir), the FS opens it and dir when a guest
// first reaches the folder, and an error then fails that operation; "." serves parent's
// own root.
func NewIn(parent *Dir, dir string, opts ...Option) (*FS, error) {
	at := path.Clean(filepath.ToSlash(dir))
	s, err := newFS(filepath.Join(parent.Path(), dir), parent, at, opts)
	if err != nil {
		return nil, err
	}
	if parent.Opened() != nil {
		if err := s.openRoot(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// openRoot opens the folder served from the parent Dir.
func (s *FS) openRoot() error {
	p, err := s.parent.Root()
	if err != nil {
		return err
	}
	learnEscapeError(p)
	if s.at == "." {
		s.root = p
		return nil
	}
	r, err := p.OpenRoot(s.at)
	if err != nil {
		return err
	}
	s.root, s.ownRoot = r, true
	return nil
}

// newFS is an FS named dir with opts, without its root; parent and at are the Dir it is
// opened in (nil for New) and its folder there.
func newFS(dir string, parent *Dir, at string, opts []Option) (*FS, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	s := &FS{dir: dir, parent: parent, at: at, readOnly: o.readOnly, before: o.before}
	if o.held != nil {
		if parent == nil || o.held.dir != parent || !filepath.IsLocal(at) && at != "." {
			return nil, errors.New("guestfs: Hold needs NewIn over the Dir the Held was made for")
		}
		s.held = o.held
	}
	// A protected name may not exist yet: the host makes it before any guest reaches the
	// folder (Before), and it is protected from then on.
	s.protected = o.protected
	return s, nil
}

// reach runs Before's fn and opens the root if NewIn left it, once both have succeeded
// never again.
func (s *FS) reach() experimentalsys.Errno {
	if s.reached.Load() {
		return 0
	}
	s.beforeMu.Lock()
	defer s.beforeMu.Unlock()
	if s.reached.Load() {
		return 0
	}
	if s.before != nil {
		if err := s.before(); err != nil {
			return toErrno(err)
		}
		s.before = nil
	}
	if s.root == nil {
		if err := s.openRoot(); err != nil {
			return toErrno(err)
		}
	}
	s.reached.Store(true)
	return 0
}

// isProtected reports whether fi is one of the Protect files as they are now.
func (s *FS) isProtected(fi fs.FileInfo) bool {
	for _, name := range s.protected {
		if p, err := s.root.Stat(name); err == nil && os.SameFile(p, fi) {
			return true
		}
	}
	return false
}

// protectedPath reports whether name (following in-root links if follow) is a Protect file.
func (s *FS) protectedPath(name string, follow bool) bool {
	if len(s.protected) == 0 {
		return false
	}
	var fi fs.FileInfo
	var err error
	if follow {
		fi, err = s.root.Stat(name)
	} else {
		fi, err = s.root.Lstat(name)
	}
	return err == nil && s.isProtected(fi)
}

// rootStat returns the identity of the directory served, learned once.
func (s *FS) rootStat() (sys.Stat_t, experimentalsys.Errno) {
	if errno := s.reach(); errno != 0 {
		return sys.Stat_t{}, errno
	}
	s.rootOnce.Do(func() {
		fi, err := s.root.Stat(".")
		if err != nil {
			s.rootErr = toErrno(err)
			return
		}
		s.rootID = sys.NewStat_t(fi)
	})
	return s.rootID, s.rootErr
}

// Close releases the directory handle. Operations after Close fail with
// EBADF; files already open stay usable until closed.
func (s *FS) Close() error {
	s.beforeMu.Lock()
	defer s.beforeMu.Unlock()
	if !s.ownRoot || s.root == nil {
		return nil
	}
	return s.root.Close()
}

// String names the FS in wazero's debug output.
func (s *FS) String() string { return s.dir }

// OpenFile implements experimentalsys.FS.
func (s *FS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	name, trailing, errno := clean(p)
	if errno != 0 {
		return nil, errno
	}
	osflag, errno := s.openFlags(flag)
	if errno != 0 {
		return nil, errno
	}
	if f, errno, held := s.openHeld(name, trailing, flag, perm); held {
		return f, errno
	}
	if name == "." && flag&^(experimentalsys.O_DIRECTORY|experimentalsys.O_NOFOLLOW|experimentalsys.O_NONBLOCK) == experimentalsys.O_RDONLY {
		// The root, as a preopen or "." is opened: its descriptor is opened when a call
		// needs one (listing, stat, sync), not for every instance that never uses it.
		return &file{fs: s, name: ".", isDir: true, lazy: true, nonblock: flag&experimentalsys.O_NONBLOCK != 0}, 0
	}
	return s.openFolder(name, trailing, flag, osflag, perm)
}

// openFolder opens name in the folder, past the held files.
func (s *FS) openFolder(name string, trailing bool, flag experimentalsys.Oflag, osflag int, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if errno := s.reach(); errno != 0 {
		return nil, errno
	}
	if errno := s.refuseSymlink(name, trailing, flag); errno != 0 {
		return nil, errno
	}
	access := flag & accessMask
	mutating := access != experimentalsys.O_RDONLY || flag&(experimentalsys.O_TRUNC|experimentalsys.O_APPEND) != 0
	if mutating && s.protectedPath(name, true) {
		return nil, experimentalsys.EROFS // before opening: O_TRUNC acts at open
	}
	f, err := s.root.OpenFile(withSlash(name, trailing), osflag, perm&0o777)
	if err != nil {
		return nil, toErrno(err)
	}
	fi, errno := s.checkOpened(f, flag, mutating)
	if errno != 0 {
		_ = f.Close()
		return nil, errno
	}
	st := sys.NewStat_t(fi)
	return &file{
		fs:       s,
		f:        f,
		name:     name,
		isDir:    fi.IsDir(),
		dev:      st.Dev,
		ino:      st.Ino,
		writable: access != experimentalsys.O_RDONLY,
		append:   flag&experimentalsys.O_APPEND != 0,
		nonblock: flag&experimentalsys.O_NONBLOCK != 0,
	}, 0
}

// accessMask selects the access mode (read, write or both) of an open's flags.
const accessMask = experimentalsys.O_RDONLY | experimentalsys.O_RDWR | experimentalsys.O_WRONLY

// openFlags translates the flags of an open into os flags, refusing the combinations
// that cannot work here (a write on a read-only filesystem, a directory to create or
// write).
func (s *FS) openFlags(flag experimentalsys.Oflag) (int, experimentalsys.Errno) {
	access := flag & accessMask
	var osflag int
	switch access {
	case experimentalsys.O_RDONLY:
		osflag = os.O_RDONLY
	case experimentalsys.O_WRONLY:
		osflag = os.O_WRONLY
	case experimentalsys.O_RDWR:
		osflag = os.O_RDWR
	default:
		return 0, experimentalsys.EINVAL
	}
	if s.readOnly && (access != experimentalsys.O_RDONLY ||
		flag&(experimentalsys.O_CREAT|experimentalsys.O_TRUNC|experimentalsys.O_APPEND) != 0) {
		return 0, experimentalsys.EROFS
	}
	if flag&experimentalsys.O_DIRECTORY != 0 {
		if flag&experimentalsys.O_CREAT != 0 {
			return 0, experimentalsys.EINVAL
		}
		if access != experimentalsys.O_RDONLY {
			return 0, experimentalsys.EISDIR
		}
		osflag |= oDIRECTORY
	}
	if flag&experimentalsys.O_APPEND != 0 {
		osflag |= os.O_APPEND
	}
	if flag&experimentalsys.O_CREAT != 0 {
		osflag |= os.O_CREATE
	}
	if flag&experimentalsys.O_EXCL != 0 {
		osflag |= os.O_EXCL
	}
	if flag&experimentalsys.O_TRUNC != 0 {
		osflag |= os.O_TRUNC
	}
	if flag&experimentalsys.O_SYNC != 0 {
		osflag |= os.O_SYNC
	}
	if flag&experimentalsys.O_DSYNC != 0 {
		osflag |= oDSYNC
	}
	if flag&experimentalsys.O_RSYNC != 0 {
		osflag |= oRSYNC
	}
	// Always non-blocking at open: a FIFO must not hang the host. It has no
	// effect on regular files and directories, the only types served.
	osflag |= oNONBLOCK
	return osflag, 0
}

// refuseSymlink implements O_NOFOLLOW for an open of name.
//
// os.Root follows a final symbolic link even with O_NOFOLLOW, so check
// first. A trailing slash means the link is to be resolved (POSIX).
func (s *FS) refuseSymlink(name string, trailing bool, flag experimentalsys.Oflag) experimentalsys.Errno {
	if flag&experimentalsys.O_NOFOLLOW != 0 && !trailing {
		if fi, err := s.root.Lstat(name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if flag&(experimentalsys.O_CREAT|experimentalsys.O_EXCL) == experimentalsys.O_CREAT|experimentalsys.O_EXCL {
				return experimentalsys.EEXIST
			}
			return experimentalsys.ELOOP
		}
	}
	return 0
}

// checkOpened stats the file just opened and refuses it (the caller closes it) when a
// protected file was swapped in for a mutating open, or it is neither a regular file nor
// a directory, or it is a regular file opened with O_DIRECTORY.
func (s *FS) checkOpened(f *os.File, flag experimentalsys.Oflag, mutating bool) (fs.FileInfo, experimentalsys.Errno) {
	fi, err := f.Stat()
	if err != nil {
		return nil, toErrno(err)
	}
	if mutating && s.isProtected(fi) { // swapped in after the check above
		return nil, experimentalsys.EROFS
	}
	switch {
	case fi.IsDir():
	case fi.Mode().IsRegular():
		if flag&experimentalsys.O_DIRECTORY != 0 { // platforms without O_DIRECTORY
			return nil, experimentalsys.ENOTDIR
		}
	default: // FIFO, device, socket
		return nil, experimentalsys.EACCES
	}
	return fi, 0
}

// Lstat implements experimentalsys.FS.
func (s *FS) Lstat(p string) (sys.Stat_t, experimentalsys.Errno) { return s.stat(p, false) }

// Stat implements experimentalsys.FS.
func (s *FS) Stat(p string) (sys.Stat_t, experimentalsys.Errno) { return s.stat(p, true) }

func (s *FS) stat(p string, follow bool) (sys.Stat_t, experimentalsys.Errno) {
	name, trailing, errno := clean(p)
	if errno != 0 {
		return sys.Stat_t{}, errno
	}
	if st, errno, held := s.statHeld(name, trailing); held {
		return st, errno
	}
	if errno := s.reach(); errno != 0 {
		return sys.Stat_t{}, errno
	}
	statFn := s.root.Lstat // the root is there once reached
	if follow {
		statFn = s.root.Stat
	}
	fi, err := statFn(withSlash(name, trailing))
	if err != nil {
		return sys.Stat_t{}, toErrno(err)
	}
	return sys.NewStat_t(fi), 0
}

// Mkdir implements experimentalsys.FS.
func (s *FS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	name, _, errno := s.cleanWritable(p)
	if errno != 0 {
		return errno
	}
	if name == "." {
		return experimentalsys.EEXIST
	}
	if errno := s.releaseHeld(name); errno != 0 {
		return errno
	}
	return toErrno(s.root.Mkdir(name, perm&0o777))
}

// Chmod implements experimentalsys.FS. Only the permission bits (0o777) are
// applied; a symbolic link is followed, in-root only.
func (s *FS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	name, trailing, errno := s.cleanWritable(p)
	if errno != 0 {
		return errno
	}
	if errno := s.releaseHeld(name); errno != 0 {
		return errno
	}
	if s.protectedPath(name, true) {
		return experimentalsys.EROFS
	}
	return toErrno(s.root.Chmod(withSlash(name, trailing), perm&0o777))
}

// Rename implements experimentalsys.FS with rename(2) semantics.
func (s *FS) Rename(from, to string) experimentalsys.Errno {
	fromName, fromSlash, toName, toSlash, errno := s.cleanPair(from, to)
	if errno != 0 {
		return errno
	}
	if fromName == "." || toName == "." {
		return experimentalsys.EINVAL // POSIX: renaming "." or onto it
	}
	if errno := s.releaseHeld(fromName, toName); errno != 0 {
		return errno
	}
	if s.protectedPath(fromName, false) || s.protectedPath(toName, false) {
		return experimentalsys.EROFS
	}
	fromInfo, err := s.root.Lstat(fromName)
	if err != nil {
		return toErrno(err)
	}
	if (fromSlash || toSlash) && !fromInfo.IsDir() {
		return experimentalsys.ENOTDIR
	}
	if fromName == toName {
		return 0
	}
	if fromInfo.IsDir() && strings.HasPrefix(toName, fromName+"/") {
		return experimentalsys.EINVAL // POSIX: moving a directory into itself
	}
	if toInfo, err := s.root.Lstat(toName); err == nil && toInfo.IsDir() {
		switch {
		case os.SameFile(fromInfo, toInfo):
			return 0 // hard links to one directory cannot exist; be safe
		case !fromInfo.IsDir():
			return experimentalsys.EISDIR
		}
		// os.Root.Rename refuses to replace a directory; rename(2) replaces
		// an empty one. Remove it first (ENOTEMPTY if it is not empty).
		if err := s.rmdir(toName); err != 0 {
			return err
		}
	}
	return toErrno(s.root.Rename(fromName, toName))
}

// Rmdir implements experimentalsys.FS: only a directory is removed.
func (s *FS) Rmdir(p string) experimentalsys.Errno {
	name, _, errno := s.cleanWritable(p)
	if errno != 0 {
		return errno
	}
	if name == "." {
		return experimentalsys.EINVAL // POSIX rmdir(".")
	}
	if errno := s.releaseHeld(name); errno != 0 {
		return errno
	}
	return s.rmdir(name)
}

func (s *FS) rmdir(name string) experimentalsys.Errno {
	fi, err := s.root.Lstat(name)
	if err != nil {
		return toErrno(err)
	}
	if !fi.IsDir() { // a symbolic link to a directory is not a directory here
		return experimentalsys.ENOTDIR
	}
	// os.Root.Remove tries unlinkat(0), then unlinkat(AT_REMOVEDIR); on a
	// directory the first fails, so this is rmdir. A concurrent swap for a
	// file could remove that file instead, inside the root.
	return toErrno(s.root.Remove(name))
}

// Unlink implements experimentalsys.FS: a directory is refused with EISDIR;
// a symbolic link is removed, not its target.
func (s *FS) Unlink(p string) experimentalsys.Errno {
	name, trailing, errno := s.cleanWritable(p)
	if errno != 0 {
		return errno
	}
	if errno, held := s.unlinkHeld(name, trailing); held {
		return errno
	}
	if errno := s.reach(); errno != 0 {
		return errno
	}
	fi, err := s.root.Lstat(name)
	if err != nil {
		return toErrno(err)
	}
	if fi.IsDir() {
		return experimentalsys.EISDIR
	}
	if trailing {
		return experimentalsys.ENOTDIR
	}
	if s.isProtected(fi) {
		return experimentalsys.EROFS
	}
	return toErrno(s.root.Remove(name))
}

// Link implements experimentalsys.FS (a hard link; both names in-root).
func (s *FS) Link(oldPath, newPath string) experimentalsys.Errno {
	oldName, oldSlash, newName, newSlash, errno := s.cleanPair(oldPath, newPath)
	if errno != 0 {
		return errno
	}
	if errno := s.releaseHeld(oldName, newName); errno != 0 {
		return errno
	}
	return toErrno(s.root.Link(withSlash(oldName, oldSlash), withSlash(newName, newSlash)))
}

// Symlink implements experimentalsys.FS. target is stored as given but must
// be relative and, read from linkName's directory, stay inside the root:
// anything else is refused with EPERM (see the package documentation).
func (s *FS) Symlink(target, linkName string) experimentalsys.Errno {
	name, trailing, errno := s.cleanWritable(linkName)
	if errno != 0 {
		return errno
	}
	if target == "" {
		return experimentalsys.ENOENT
	}
	if strings.IndexByte(target, 0) >= 0 {
		return experimentalsys.EINVAL
	}
	if path.IsAbs(target) {
		return experimentalsys.EPERM
	}
	if resolved := path.Join(path.Dir(name), target); resolved == ".." || strings.HasPrefix(resolved, "../") {
		return experimentalsys.EPERM
	}
	if errno := s.releaseHeld(name); errno != 0 {
		return errno
	}
	return toErrno(s.root.Symlink(target, withSlash(name, trailing)))
}

// Readlink implements experimentalsys.FS. It returns the link text as
// stored, which may name a host path if the host planted the link; the
// target is never followed.
func (s *FS) Readlink(p string) (string, experimentalsys.Errno) {
	name, trailing, errno := clean(p)
	if errno != 0 {
		return "", errno
	}
	if errno, held := s.onHeld(name, trailing, nil); held {
		if errno == 0 {
			errno = experimentalsys.EINVAL // a held file is not a link
		}
		return "", errno
	}
	if errno := s.reach(); errno != 0 {
		return "", errno
	}
	target, err := s.root.Readlink(withSlash(name, trailing))
	if err != nil {
		return "", toErrno(err)
	}
	return target, 0
}

// Utimens implements experimentalsys.FS; a symbolic link is followed,
// in-root only. UTIME_OMIT keeps a time.
func (s *FS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	name, trailing, errno := s.cleanWritable(p)
	if errno != 0 {
		return errno
	}
	if errno := s.releaseHeld(name); errno != 0 {
		return errno
	}
	if s.protectedPath(name, true) {
		return experimentalsys.EROFS
	}
	if atim == experimentalsys.UTIME_OMIT && mtim == experimentalsys.UTIME_OMIT {
		_, err := s.root.Stat(withSlash(name, trailing)) // still report a bad path
		return toErrno(err)
	}
	return toErrno(s.root.Chtimes(withSlash(name, trailing), nanosToTime(atim), nanosToTime(mtim)))
}

// nanosToTime maps UTIME_OMIT to the zero time, which os.Chtimes and
// os.Root.Chtimes leave unchanged.
func nanosToTime(n int64) time.Time {
	if n == experimentalsys.UTIME_OMIT {
		return time.Time{}
	}
	return time.Unix(0, n)
}
