//go:build !linux

package guestfs

import (
	"os"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// Portable fallbacks. capsulegate targets Linux; elsewhere O_DIRECTORY is
// checked after open, O_DSYNC/O_RSYNC become O_SYNC, and opens block on a
// FIFO (it is then refused, once open).
const (
	oDIRECTORY = 0
	oDSYNC     = os.O_SYNC
	oRSYNC     = os.O_SYNC
	oNONBLOCK  = 0
)

func setAppend(*os.File, bool) experimentalsys.Errno { return experimentalsys.ENOSYS }

func pwriteRaw(*os.File, []byte, int64) (int, experimentalsys.Errno) {
	return 0, experimentalsys.ENOSYS
}

func datasync(f *os.File) experimentalsys.Errno { return toErrno(f.Sync()) }

// futimens falls back to the name the file was opened by, resolved in-root.
func futimens(f *file, atim, mtim int64) experimentalsys.Errno {
	return toErrno(f.fs.root.Chtimes(f.name, nanosToTime(atim), nanosToTime(mtim)))
}
