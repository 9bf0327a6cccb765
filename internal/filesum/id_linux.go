package filesum

import (
	"os"
	"syscall"
)

// idOf is fi's identity; false when the platform does not say.
func idOf(fi os.FileInfo) (id, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() {
		return id{}, false
	}
	return id{dev: int64(st.Dev), ino: int64(st.Ino), size: st.Size,
		mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec, ctime: st.Ctim.Sec*1e9 + st.Ctim.Nsec}, true
}
