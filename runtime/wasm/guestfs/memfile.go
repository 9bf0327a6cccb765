package guestfs

import (
	"io"
	"os"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// memFile is an open handle on a held file (Held), served from memory. When the file is
// flushed to the folder, the handle is opened there again by the name it was opened by
// (before whatever flushed it acts on the folder: a rename moves the open file) and goes on
// at the same offset. The handle's fields are touched under the Held's lock: a Flush comes
// from the host's goroutine.
type memFile struct {
	fs   *FS
	f    *heldFile
	name string // FS-relative, for the reopen

	read, write, append, nonblock bool
	pos                           int64
	closed                        bool
	disk                          experimentalsys.File  // the folder's file, once released
	lost                          experimentalsys.Errno // why it could not be opened there
}

var _ experimentalsys.PollableFile = (*memFile)(nil)

// use returns the folder's file to delegate to once the held file was released, or nil to
// serve from memory.
func (m *memFile) use() (experimentalsys.File, experimentalsys.Errno) {
	h := m.fs.held
	h.mu.Lock()
	defer h.mu.Unlock()
	if m.closed {
		return nil, experimentalsys.EBADF
	}
	return m.disk, m.lost
}

// reopenLocked opens the handle's file in the folder, just written there by a Flush.
func (m *memFile) reopenLocked() {
	flag, osflag := experimentalsys.O_RDONLY, os.O_RDONLY
	switch {
	case m.read && m.write:
		flag, osflag = experimentalsys.O_RDWR, os.O_RDWR
	case m.write:
		flag, osflag = experimentalsys.O_WRONLY, os.O_WRONLY
	}
	if m.append {
		flag, osflag = flag|experimentalsys.O_APPEND, osflag|os.O_APPEND
	}
	d, errno := m.fs.openFolder(m.name, false, flag, osflag|oNONBLOCK, 0)
	if errno == 0 && !m.append {
		if _, errno = d.Seek(m.pos, io.SeekStart); errno != 0 {
			_ = d.Close()
		}
	}
	if errno != 0 {
		m.lost = errno
		return
	}
	m.disk = d
}

// Dev implements experimentalsys.File.
func (m *memFile) Dev() (uint64, experimentalsys.Errno) {
	h := m.fs.held
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.devLocked(), 0
}

// Ino implements experimentalsys.File.
func (m *memFile) Ino() (sys.Inode, experimentalsys.Errno) { return m.f.ino, 0 }

// IsDir implements experimentalsys.File: a held file is never a directory.
func (m *memFile) IsDir() (bool, experimentalsys.Errno) { return false, 0 }

// IsAppend implements experimentalsys.File.
func (m *memFile) IsAppend() bool { return m.append }

// SetAppend implements experimentalsys.File.
func (m *memFile) SetAppend(enable bool) experimentalsys.Errno {
	d, errno := m.use()
	if errno != 0 {
		return errno
	}
	if d != nil {
		if errno := d.SetAppend(enable); errno != 0 {
			return errno
		}
	}
	m.append = enable
	return 0
}

// IsNonblock implements experimentalsys.PollableFile.
func (m *memFile) IsNonblock() bool { return m.nonblock }

// SetNonblock implements experimentalsys.PollableFile: memory never blocks.
func (m *memFile) SetNonblock(enable bool) experimentalsys.Errno {
	if _, errno := m.use(); errno == experimentalsys.EBADF {
		return errno
	}
	m.nonblock = enable
	return 0
}

// Poll implements experimentalsys.Pollable: always ready.
func (m *memFile) Poll(experimentalsys.Pflag, int32) (bool, experimentalsys.Errno) {
	if _, errno := m.use(); errno == experimentalsys.EBADF {
		return false, errno
	}
	return true, 0
}

// Stat implements experimentalsys.File.
func (m *memFile) Stat() (sys.Stat_t, experimentalsys.Errno) {
	if d, errno := m.use(); errno != 0 || d != nil {
		if errno != 0 {
			return sys.Stat_t{}, errno
		}
		return d.Stat()
	}
	h := m.fs.held
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.statLocked(m.f), 0
}

// Read implements experimentalsys.File; end of file is n == 0 with no error.
func (m *memFile) Read(buf []byte) (int, experimentalsys.Errno) { return m.Pread(buf, -1) }

// Pread implements experimentalsys.File; off -1 (from Read) reads at the handle's offset.
func (m *memFile) Pread(buf []byte, off int64) (int, experimentalsys.Errno) {
	d, errno := m.use()
	switch {
	case errno != 0:
		return 0, errno
	case d != nil && off == -1:
		return d.Read(buf)
	case d != nil:
		return d.Pread(buf, off)
	case !m.read:
		return 0, experimentalsys.EBADF
	case off < -1:
		return 0, experimentalsys.EINVAL
	}
	h := m.fs.held
	h.mu.Lock()
	defer h.mu.Unlock()
	at := off
	if off == -1 {
		at = m.pos
	}
	if at >= int64(len(m.f.data)) {
		return 0, 0
	}
	n := copy(buf, m.f.data[at:])
	if off == -1 {
		m.pos += int64(n)
	}
	return n, 0
}

// Seek implements experimentalsys.File.
func (m *memFile) Seek(offset fileOffset, whence int) (int64, experimentalsys.Errno) {
	d, errno := m.use()
	if errno != 0 {
		return 0, errno
	}
	if d != nil {
		return d.Seek(offset, whence)
	}
	h := m.fs.held
	h.mu.Lock()
	defer h.mu.Unlock()
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = m.pos
	case io.SeekEnd:
		base = int64(len(m.f.data))
	default:
		return 0, experimentalsys.EINVAL
	}
	if base+offset < 0 {
		return 0, experimentalsys.EINVAL
	}
	m.pos = base + offset
	return m.pos, 0
}

// Readdir implements experimentalsys.File: a held file is not a directory.
func (m *memFile) Readdir(int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	return nil, experimentalsys.EBADF
}

// Write implements experimentalsys.File.
func (m *memFile) Write(buf []byte) (int, experimentalsys.Errno) { return m.Pwrite(buf, -1) }

// Pwrite implements experimentalsys.File; off -1 (from Write) writes at the handle's
// offset. In append mode every write goes to the end, as Linux's pwrite(2) does.
func (m *memFile) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	d, errno := m.use()
	switch {
	case errno != 0:
		return 0, errno
	case d != nil && off == -1:
		return d.Write(buf)
	case d != nil:
		return d.Pwrite(buf, off)
	case !m.write:
		return 0, experimentalsys.EBADF
	case off < -1:
		return 0, experimentalsys.EINVAL
	}
	if len(buf) == 0 {
		return 0, 0
	}
	h := m.fs.held
	h.mu.Lock()
	defer h.mu.Unlock()
	f := m.f
	at := off
	switch {
	case m.append:
		at = int64(len(f.data))
	case off == -1:
		at = m.pos
	}
	if off == -1 || m.append {
		m.pos = at + int64(len(buf))
	}
	off = at
	if end := off + int64(len(buf)); end > int64(len(f.data)) {
		f.data = append(f.data, make([]byte, end-int64(len(f.data)))...)
	}
	copy(f.data[off:], buf)
	f.mtime = time.Now()
	return len(buf), 0
}

// Truncate implements experimentalsys.File.
func (m *memFile) Truncate(size int64) experimentalsys.Errno {
	d, errno := m.use()
	switch {
	case errno != 0:
		return errno
	case d != nil:
		return d.Truncate(size)
	case size < 0:
		return experimentalsys.EINVAL
	case !m.write:
		return experimentalsys.EBADF
	}
	h := m.fs.held
	h.mu.Lock()
	defer h.mu.Unlock()
	f := m.f
	if size <= int64(len(f.data)) {
		f.data = f.data[:size]
	} else {
		f.data = append(f.data, make([]byte, size-int64(len(f.data)))...)
	}
	f.mtime = time.Now()
	return 0
}

// Sync implements experimentalsys.File: a held file reaches the folder at Flush.
func (m *memFile) Sync() experimentalsys.Errno {
	d, errno := m.use()
	if errno != 0 || d == nil {
		return errno
	}
	return d.Sync()
}

// Datasync implements experimentalsys.File, as Sync.
func (m *memFile) Datasync() experimentalsys.Errno {
	d, errno := m.use()
	if errno != 0 || d == nil {
		return errno
	}
	return d.Datasync()
}

// Utimens implements experimentalsys.File on the folder's file: the held file is flushed
// there first, so the times set are the folder's.
func (m *memFile) Utimens(atim, mtim int64) experimentalsys.Errno {
	d, errno := m.use()
	if errno == 0 && d == nil {
		if m.fs.readOnly {
			return experimentalsys.EROFS
		}
		if errno = m.fs.releaseHeld(m.name); errno == 0 {
			d, errno = m.use()
		}
	}
	if errno != 0 {
		return errno
	}
	if d == nil { // an unlinked file, still open: it has no folder copy to carry the times
		h := m.fs.held
		h.mu.Lock()
		defer h.mu.Unlock()
		setTimes(m.f, atim, mtim)
		return 0
	}
	return d.Utimens(atim, mtim)
}

// Close implements experimentalsys.File; closing twice is not an error.
func (m *memFile) Close() experimentalsys.Errno {
	h := m.fs.held
	h.mu.Lock()
	if m.closed {
		h.mu.Unlock()
		return 0
	}
	m.closed = true
	delete(m.f.handles, m)
	d := m.disk
	h.mu.Unlock()
	if d != nil {
		return d.Close()
	}
	return 0
}

func setTimes(f *heldFile, atim, mtim int64) {
	if atim != experimentalsys.UTIME_OMIT {
		f.atime = time.Unix(0, atim)
	}
	if mtim != experimentalsys.UTIME_OMIT {
		f.mtime = time.Unix(0, mtim)
	}
}
