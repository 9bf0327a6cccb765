package wasip2

import (
	"crypto/sha256"
	"encoding/binary"
	"io"
	"io/fs"
	"strings"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// wasi:filesystem types.
var (
	tDescriptorType  = abi.Enum("unknown", "block-device", "character-device", "directory", "fifo", "symbolic-link", "regular-file", "socket").Named("descriptor-type")
	tDescriptorFlags = abi.Flags("read", "write", "file-integrity-sync", "data-integrity-sync", "requested-write-sync", "mutate-directory").Named("descriptor-flags")
	tPathFlags       = abi.Flags("symlink-follow").Named("path-flags")
	tOpenFlags       = abi.Flags("create", "directory", "exclusive", "truncate").Named("open-flags")
	tDescriptorStat  = abi.Record(
		abi.F("type", tDescriptorType), abi.F("link-count", abi.U64), abi.F("size", abi.U64),
		abi.F("data-access-timestamp", abi.OptionOf(tDatetime)),
		abi.F("data-modification-timestamp", abi.OptionOf(tDatetime)),
		abi.F("status-change-timestamp", abi.OptionOf(tDatetime)),
	).Named("descriptor-stat")
	tDirectoryEntry = abi.Record(abi.F("type", tDescriptorType), abi.F("name", abi.String)).Named("directory-entry")
	tFSErrorCode    = abi.Enum(fsErrorNames...).Named("error-code")
	tMetadataHash   = abi.Record(abi.F("lower", abi.U64), abi.F("upper", abi.U64)).Named("metadata-hash-value")
)

var fsErrorNames = []string{
	"access", "would-block", "already", "bad-descriptor", "busy", "deadlock", "quota", "exist",
	"file-too-large", "illegal-byte-sequence", "in-progress", "interrupted", "invalid", "io",
	"is-directory", "loop", "too-many-links", "message-size", "name-too-long", "no-device",
	"no-entry", "no-lock", "insufficient-memory", "insufficient-space", "not-directory",
	"not-empty", "not-recoverable", "unsupported", "no-tty", "no-such-device", "overflow",
	"not-permitted", "pipe", "read-only", "invalid-seek", "text-file-busy", "cross-device",
}

// Cases of error-code used here.
const (
	ecAccess        = 0
	ecBadDescriptor = 3
	ecExist         = 7
	ecInvalid       = 12
	ecIO            = 13
	ecIsDirectory   = 14
	ecLoop          = 15
	ecNameTooLong   = 18
	ecNoEntry       = 20
	ecNotDirectory  = 24
	ecNotEmpty      = 25
	ecUnsupported   = 27
	ecOverflow      = 30
	ecNotPermitted  = 31
	ecReadOnly      = 33
)

// Descriptor flags and descriptor types.
const (
	dfRead            = 1 << 0
	dfWrite           = 1 << 1
	dfMutateDirectory = 1 << 5

	dtUnknown     = 0
	dtBlockDevice = 1
	dtCharDevice  = 2
	dtDirectory   = 3
	dtFifo        = 4
	dtSymlink     = 5
	dtRegular     = 6
	dtSocket      = 7
)

// fsError is a filesystem failure as an error-code case.
type fsError struct {
	code uint32
	msg  string
}

func (e *fsError) Error() string { return "filesystem: " + fsErrorNames[e.code] + ": " + e.msg }

func errnoCode(e experimentalsys.Errno) uint32 {
	switch e {
	case experimentalsys.EACCES:
		return ecAccess
	case experimentalsys.EAGAIN:
		return 1
	case experimentalsys.EBADF:
		return ecBadDescriptor
	case experimentalsys.EEXIST:
		return ecExist
	case experimentalsys.EINTR:
		return 11
	case experimentalsys.EINVAL, experimentalsys.EFAULT:
		return ecInvalid
	case experimentalsys.EISDIR:
		return ecIsDirectory
	case experimentalsys.ELOOP:
		return ecLoop
	case experimentalsys.ENAMETOOLONG:
		return ecNameTooLong
	case experimentalsys.ENOENT:
		return ecNoEntry
	case experimentalsys.ENOSYS, experimentalsys.ENOTSUP, experimentalsys.ENOTSOCK:
		return ecUnsupported
	case experimentalsys.ENOTDIR:
		return ecNotDirectory
	case experimentalsys.ERANGE:
		return ecOverflow
	case experimentalsys.ENOTEMPTY:
		return ecNotEmpty
	case experimentalsys.EPERM:
		return ecNotPermitted
	case experimentalsys.EROFS:
		return ecReadOnly
	}
	return ecIO
}

// descriptor is an open file or directory of the guest's filesystem. Streams made from
// it hold a reference, so the file stays open until the last of them ends.
type descriptor struct {
	h     *Host
	path  string // relative to the filesystem's root; "." is the root
	f     experimentalsys.File
	flags uint32
	typ   uint32
	refs  int
}

func (d *descriptor) close() {
	if d.refs--; d.refs == 0 {
		_ = d.f.Close()
	}
}

// at joins a guest path to d: WASI paths are relative, and whatever climbs above the
// root or follows a link out of it is refused by the filesystem (runtime/wasm/guestfs) as in
// preview1.
func (d *descriptor) at(p string) (string, *fsError) {
	if d.typ != dtDirectory {
		return "", &fsError{ecNotDirectory, "the descriptor is not a directory"}
	}
	if strings.HasPrefix(p, "/") {
		return "", &fsError{ecNotPermitted, "absolute path " + clipPath(p)}
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", &fsError{ecInvalid, "path holds a NUL byte"}
	}
	if p == "" {
		return "", &fsError{ecNoEntry, "empty path"}
	}
	if d.path == "." {
		return p, nil
	}
	return d.path + "/" + p, nil
}

func clipPath(p string) string {
	if len(p) > 200 {
		return p[:200] + "…"
	}
	return p
}

func errnoResult(e experimentalsys.Errno) abi.Result { return fail(errnoCode(e)) }

func (e *fsError) result() abi.Result { return fail(e.code) }

func descType(mode fs.FileMode) uint32 {
	switch {
	case mode.IsRegular():
		return dtRegular
	case mode&fs.ModeDir != 0:
		return dtDirectory
	case mode&fs.ModeSymlink != 0:
		return dtSymlink
	case mode&fs.ModeNamedPipe != 0:
		return dtFifo
	case mode&fs.ModeSocket != 0:
		return dtSocket
	case mode&fs.ModeCharDevice != 0:
		return dtCharDevice
	case mode&fs.ModeDevice != 0:
		return dtBlockDevice
	}
	return dtUnknown
}

func datetime(ns int64) abi.Option {
	if ns < 0 {
		return none
	}
	return some([]any{uint64(ns / 1e9), uint32(ns % 1e9)})
}

func statValue(st sys.Stat_t) []any {
	return []any{descType(st.Mode), st.Nlink, uint64(max(st.Size, 0)), datetime(st.Atim), datetime(st.Mtim), datetime(st.Ctim)}
}

func hashValue(st sys.Stat_t) []any {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], st.Dev)
	binary.LittleEndian.PutUint64(b[8:], uint64(st.Ino))
	sum := sha256.Sum256(b[:])
	return []any{binary.LittleEndian.Uint64(sum[:]), binary.LittleEndian.Uint64(sum[8:])}
}

// fileInput reads a file from an offset.
type fileInput struct {
	d   *descriptor
	off int64
}

func (r *fileInput) read(p []byte) (int, error) {
	n, errno := r.d.f.Pread(p, r.off)
	if errno != 0 {
		return 0, &fsError{errnoCode(errno), "read"}
	}
	if n == 0 {
		return 0, io.EOF
	}
	r.off += int64(n)
	return n, nil
}

// fileSink writes a file from an offset, or at its end.
type fileSink struct {
	d      *descriptor
	off    int64
	append bool
}

func (w *fileSink) write(p []byte) error {
	if w.append {
		st, errno := w.d.f.Stat()
		if errno != 0 {
			return &fsError{errnoCode(errno), "stat"}
		}
		w.off = st.Size
	}
	for len(p) > 0 {
		n, errno := w.d.f.Pwrite(p, w.off)
		if errno != 0 {
			return &fsError{errnoCode(errno), "write"}
		}
		if n == 0 {
			return &fsError{ecIO, "short write"}
		}
		w.off += int64(n)
		p = p[n:]
	}
	return nil
}

// dirStream lists a directory, a batch at a time.
type dirStream struct {
	f       experimentalsys.File
	pending []experimentalsys.Dirent
	done    bool
}

func (s *dirStream) close() { _ = s.f.Close() }

const fsTypes = "wasi:filesystem/types"

func fsSpecs() []*spec {
	res := func(ok *abi.Type) *abi.Type { return abi.ResultOf(ok, tFSErrorCode) }
	m := func(name string, params []param, result *abi.Type, impl func(c *call, d *descriptor, a []any) (any, error)) *spec {
		return fn(fsTypes, "[method]descriptor."+name, append(ps(self(kDescriptor)), params...), result, func(c *call, a []any) (any, error) {
			d, err := borrowed[*descriptor](c, a[0], kDescriptor)
			if err != nil {
				return nil, err
			}
			return impl(c, d, a[1:])
		})
	}
	pathP := pr("path", abi.String)
	return []*spec{
		drop(fsTypes, kDescriptor),
		drop(fsTypes, kDirEntryStream),
		fn("wasi:filesystem/preopens", "get-directories", nil, abi.List(abi.Tuple(own(kDescriptor), abi.String)), getDirectories),

		m("read-via-stream", ps(pr("offset", abi.U64)), res(own(kInputStream)), func(c *call, d *descriptor, a []any) (any, error) {
			if d.flags&dfRead == 0 || d.typ == dtDirectory {
				return fail(uint32(ecBadDescriptor)), nil
			}
			return c.fileStream(d, &inputStream{src: &fileInput{d: d, off: int64(min(a[0].(uint64), 1<<62))}})
		}),
		m("write-via-stream", ps(pr("offset", abi.U64)), res(own(kOutputStream)), func(c *call, d *descriptor, a []any) (any, error) {
			if d.flags&dfWrite == 0 || d.typ == dtDirectory {
				return fail(uint32(ecBadDescriptor)), nil
			}
			return c.fileStream(d, &outputStream{sink: &fileSink{d: d, off: int64(min(a[0].(uint64), 1<<62))}})
		}),
		m("append-via-stream", nil, res(own(kOutputStream)), func(c *call, d *descriptor, a []any) (any, error) {
			if d.flags&dfWrite == 0 || d.typ == dtDirectory {
				return fail(uint32(ecBadDescriptor)), nil
			}
			return c.fileStream(d, &outputStream{sink: &fileSink{d: d, append: true}})
		}),
		m("get-flags", nil, res(tDescriptorFlags), func(c *call, d *descriptor, a []any) (any, error) {
			return ok(d.flags), nil
		}),
		m("get-type", nil, res(tDescriptorType), func(c *call, d *descriptor, a []any) (any, error) {
			return ok(d.typ), nil
		}),
		m("advise", ps(pr("offset", abi.U64), pr("length", abi.U64), pr("advice", abi.Enum("normal", "sequential", "random", "will-need", "dont-need", "no-reuse").Named("advice"))), res(nil),
			func(*call, *descriptor, []any) (any, error) { return ok(nil), nil }),
		m("sync-data", nil, res(nil), func(c *call, d *descriptor, a []any) (any, error) { return errnoOK(d.f.Datasync()), nil }),
		m("sync", nil, res(nil), func(c *call, d *descriptor, a []any) (any, error) { return errnoOK(d.f.Sync()), nil }),
		m("set-size", ps(pr("size", abi.U64)), res(nil), func(c *call, d *descriptor, a []any) (any, error) {
			if d.flags&dfWrite == 0 {
				return fail(uint32(ecBadDescriptor)), nil
			}
			if a[0].(uint64) > 1<<62 {
				return fail(uint32(ecInvalid)), nil
			}
			return errnoOK(d.f.Truncate(int64(a[0].(uint64)))), nil
		}),
		{iface: fsTypes, name: "[method]descriptor.read", params: ps(self(kDescriptor), pr("length", abi.U64), pr("offset", abi.U64)),
			result: res(abi.Tuple(tBytes, abi.Bool)), impl: func(c *call, a []any) (any, error) {
				d, err := borrowed[*descriptor](c, a[0], kDescriptor)
				if err != nil {
					return nil, err
				}
				if d.flags&dfRead == 0 {
					return fail(uint32(ecBadDescriptor)), nil
				}
				buf := make([]byte, min(a[1].(uint64), uint64(c.h.maxRead)))
				n, errno := d.f.Pread(buf, int64(min(a[2].(uint64), 1<<62)))
				if errno != 0 {
					return errnoResult(errno), nil
				}
				return ok([]any{buf[:n], n == 0 && len(buf) > 0}), nil
			}},
		{iface: fsTypes, name: "[method]descriptor.write", params: ps(self(kDescriptor), pr("buffer", tBytes), pr("offset", abi.U64)),
			result: res(abi.U64), impl: func(c *call, a []any) (any, error) {
				d, err := borrowed[*descriptor](c, a[0], kDescriptor)
				if err != nil {
					return nil, err
				}
				if d.flags&dfWrite == 0 {
					return fail(uint32(ecBadDescriptor)), nil
				}
				p := a[1].([]byte)
				if len(p) > c.h.maxWrite {
					p = p[:c.h.maxWrite]
				}
				n, errno := d.f.Pwrite(p, int64(min(a[2].(uint64), 1<<62)))
				if errno != 0 {
					return errnoResult(errno), nil
				}
				return ok(uint64(n)), nil
			}},
		m("read-directory", nil, res(own(kDirEntryStream)), func(c *call, d *descriptor, a []any) (any, error) {
			if d.typ != dtDirectory {
				return fail(uint32(ecNotDirectory)), nil
			}
			if d.flags&dfRead == 0 {
				return fail(uint32(ecBadDescriptor)), nil
			}
			f, errno := c.h.env.FS.OpenFile(d.path, experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
			if errno != 0 {
				return errnoResult(errno), nil
			}
			h, err := c.h.tab.add(kDirEntryStream, &dirStream{f: f}, 0)
			if err != nil {
				_ = f.Close()
				return nil, err
			}
			return ok(h), nil
		}),
		m("create-directory-at", ps(pathP), res(nil), func(c *call, d *descriptor, a []any) (any, error) {
			p, ferr := c.mutateAt(d, a[0].(string))
			if ferr != nil {
				return ferr.result(), nil
			}
			return errnoOK(c.h.env.FS.Mkdir(p, 0o777)), nil
		}),
		m("stat", nil, res(tDescriptorStat), func(c *call, d *descriptor, a []any) (any, error) {
			st, errno := d.f.Stat()
			if errno != 0 {
				return errnoResult(errno), nil
			}
			return ok(statValue(st)), nil
		}),
		m("stat-at", ps(pr("path-flags", tPathFlags), pathP), res(tDescriptorStat), func(c *call, d *descriptor, a []any) (any, error) {
			st, r := c.statAt(d, a[0].(uint32), a[1].(string))
			if r != nil {
				return *r, nil
			}
			return ok(statValue(st)), nil
		}),
		m("open-at", ps(pr("path-flags", tPathFlags), pathP, pr("open-flags", tOpenFlags), pr("flags", tDescriptorFlags)), res(own(kDescriptor)), openAt),
		m("readlink-at", ps(pathP), res(abi.String), func(c *call, d *descriptor, a []any) (any, error) {
			p, ferr := d.at(a[0].(string))
			if ferr != nil {
				return ferr.result(), nil
			}
			s, errno := c.h.env.FS.Readlink(p)
			if errno != 0 {
				return errnoResult(errno), nil
			}
			return ok(validUTF8(s)), nil
		}),
		m("remove-directory-at", ps(pathP), res(nil), func(c *call, d *descriptor, a []any) (any, error) {
			p, ferr := c.mutateAt(d, a[0].(string))
			if ferr != nil {
				return ferr.result(), nil
			}
			return errnoOK(c.h.env.FS.Rmdir(p)), nil
		}),
		m("unlink-file-at", ps(pathP), res(nil), func(c *call, d *descriptor, a []any) (any, error) {
			p, ferr := c.mutateAt(d, a[0].(string))
			if ferr != nil {
				return ferr.result(), nil
			}
			return errnoOK(c.h.env.FS.Unlink(p)), nil
		}),
		m("rename-at", ps(pr("old-path", abi.String), pr("new-descriptor", abi.Borrow("descriptor")), pr("new-path", abi.String)), res(nil), func(c *call, d *descriptor, a []any) (any, error) {
			nd, err := borrowed[*descriptor](c, a[1], kDescriptor)
			if err != nil {
				return nil, err
			}
			from, ferr := c.mutateAt(d, a[0].(string))
			if ferr != nil {
				return ferr.result(), nil
			}
			to, ferr := c.mutateAt(nd, a[2].(string))
			if ferr != nil {
				return ferr.result(), nil
			}
			return errnoOK(c.h.env.FS.Rename(from, to)), nil
		}),
		m("is-same-object", ps(pr("other", abi.Borrow("descriptor"))), abi.Bool, func(c *call, d *descriptor, a []any) (any, error) {
			o, err := borrowed[*descriptor](c, a[0], kDescriptor)
			if err != nil {
				return nil, err
			}
			s1, e1 := d.f.Stat()
			s2, e2 := o.f.Stat()
			return e1 == 0 && e2 == 0 && s1.Dev == s2.Dev && s1.Ino == s2.Ino, nil
		}),
		m("metadata-hash", nil, res(tMetadataHash), func(c *call, d *descriptor, a []any) (any, error) {
			st, errno := d.f.Stat()
			if errno != 0 {
				return errnoResult(errno), nil
			}
			return ok(hashValue(st)), nil
		}),
		m("metadata-hash-at", ps(pr("path-flags", tPathFlags), pathP), res(tMetadataHash), func(c *call, d *descriptor, a []any) (any, error) {
			st, r := c.statAt(d, a[0].(uint32), a[1].(string))
			if r != nil {
				return *r, nil
			}
			return ok(hashValue(st)), nil
		}),

		fn(fsTypes, "[method]directory-entry-stream.read-directory-entry", ps(self(kDirEntryStream)), res(abi.OptionOf(tDirectoryEntry)), func(c *call, a []any) (any, error) {
			s, err := borrowed[*dirStream](c, a[0], kDirEntryStream)
			if err != nil {
				return nil, err
			}
			for {
				if len(s.pending) > 0 {
					e := s.pending[0]
					s.pending = s.pending[1:]
					if e.Name == "." || e.Name == ".." || !validName(e.Name) {
						continue
					}
					return ok(some([]any{descType(e.Type), e.Name})), nil
				}
				if s.done {
					return ok(none), nil
				}
				batch, errno := s.f.Readdir(64)
				if errno != 0 {
					return errnoResult(errno), nil
				}
				if len(batch) == 0 {
					s.done = true
				}
				s.pending = batch
			}
		}),
		fn(fsTypes, "filesystem-error-code", ps(pr("err", abi.Borrow("error"))), abi.OptionOf(tFSErrorCode), func(c *call, a []any) (any, error) {
			e, err := borrowed[*ioError](c, a[0], kError)
			if err != nil {
				return nil, err
			}
			if e.fsCode < 0 {
				return none, nil
			}
			return some(uint32(e.fsCode)), nil
		}),
	}
}

// validName reports whether a directory entry's name can be lowered as a string; a name
// that is not UTF-8 is skipped rather than mangled, as the guest could not open it.
func validName(s string) bool { return s != "" && validUTF8(s) == s }

func errnoOK(e experimentalsys.Errno) abi.Result {
	if e != 0 {
		return errnoResult(e)
	}
	return ok(nil)
}

// fileStream adds a stream reading or writing d, holding a reference to it.
func (c *call) fileStream(d *descriptor, s any) (any, error) {
	k := kInputStream
	if _, out := s.(*outputStream); out {
		k = kOutputStream
	}
	d.refs++
	release := func() { d.close() }
	switch s := s.(type) {
	case *inputStream:
		s.onDrop = release
	case *outputStream:
		s.onDrop = release
	}
	h, err := c.h.tab.add(k, s, 0)
	if err != nil {
		d.refs--
		return nil, err
	}
	return ok(h), nil
}

// mutateAt is d.at for a call that changes the directory: d must allow it.
func (c *call) mutateAt(d *descriptor, p string) (string, *fsError) {
	if d.typ == dtDirectory && d.flags&dfMutateDirectory == 0 {
		return "", &fsError{ecNotPermitted, "the descriptor does not allow changing the directory"}
	}
	return d.at(p)
}

func (c *call) statAt(d *descriptor, pathFlags uint32, p string) (sys.Stat_t, *abi.Result) {
	full, ferr := d.at(p)
	if ferr != nil {
		r := ferr.result()
		return sys.Stat_t{}, &r
	}
	stat := c.h.env.FS.Lstat
	if pathFlags&1 != 0 {
		stat = c.h.env.FS.Stat
	}
	st, errno := stat(full)
	if errno != 0 {
		r := errnoResult(errno)
		return sys.Stat_t{}, &r
	}
	return st, nil
}

func openAt(c *call, d *descriptor, a []any) (any, error) {
	pathFlags, p, oflags, dflags := a[0].(uint32), a[1].(string), a[2].(uint32), a[3].(uint32)
	const (
		ofCreate, ofDirectory, ofExclusive, ofTruncate = 1, 2, 4, 8
	)
	mutating := oflags&(ofCreate|ofTruncate) != 0 || dflags&(dfWrite|dfMutateDirectory) != 0
	var full string
	var ferr *fsError
	if mutating {
		full, ferr = c.mutateAt(d, p)
	} else {
		full, ferr = d.at(p)
	}
	if ferr != nil {
		return ferr.result(), nil
	}
	if d.flags&dfRead == 0 && dflags&dfRead != 0 {
		return fail(uint32(ecNotPermitted)), nil
	}
	var flag experimentalsys.Oflag
	switch {
	case dflags&dfWrite != 0 && dflags&dfRead != 0:
		flag = experimentalsys.O_RDWR
	case dflags&dfWrite != 0:
		flag = experimentalsys.O_WRONLY
	default:
		flag = experimentalsys.O_RDONLY
	}
	if oflags&ofCreate != 0 {
		flag |= experimentalsys.O_CREAT
	}
	if oflags&ofDirectory != 0 {
		flag |= experimentalsys.O_DIRECTORY
	}
	if oflags&ofExclusive != 0 {
		flag |= experimentalsys.O_EXCL
	}
	if oflags&ofTruncate != 0 {
		flag |= experimentalsys.O_TRUNC
	}
	if pathFlags&1 == 0 {
		flag |= experimentalsys.O_NOFOLLOW
	}
	f, errno := c.h.env.FS.OpenFile(full, flag, 0o666)
	if errno != 0 {
		return errnoResult(errno), nil
	}
	st, errno := f.Stat()
	if errno != 0 {
		_ = f.Close()
		return errnoResult(errno), nil
	}
	nd := &descriptor{h: c.h, path: full, f: f, typ: descType(st.Mode), refs: 1}
	nd.flags = dflags &^ dfMutateDirectory
	if nd.typ == dtDirectory {
		// A directory opened below d may change what d may change.
		nd.flags = dflags & (dfRead | dfMutateDirectory) & (d.flags | dfRead)
	}
	h, err := c.h.tab.add(kDescriptor, nd, 0)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return ok(h), nil
}

// getDirectories answers the one preopen: the guest's root (the workdir) as ".".
func getDirectories(c *call, _ []any) (any, error) {
	if c.h.env.FS == nil {
		return []any{}, nil
	}
	f, errno := c.h.env.FS.OpenFile(".", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
	if errno != 0 {
		// A root that cannot be opened is no preopen at all.
		return []any{}, nil
	}
	d := &descriptor{h: c.h, path: ".", f: f, typ: dtDirectory, flags: dfRead | dfMutateDirectory, refs: 1}
	h, err := c.h.tab.add(kDescriptor, d, 0)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return []any{[]any{h, "."}}, nil
}
