package guestfs

import (
	"io/fs"
	"syscall"
	"testing"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// TestSpecialFilesRefused: a FIFO (which a shell subprocess could create in
// the workdir) is refused at once, never blocking the host in open(2).
func TestSpecialFilesRefused(t *testing.T) {
	fx := newFixture(t)
	if err := syscall.Mkfifo(fx.hostPath("fifo"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, fl := range []experimentalsys.Oflag{experimentalsys.O_RDONLY, experimentalsys.O_WRONLY, experimentalsys.O_RDWR} {
		done := make(chan experimentalsys.Errno, 1)
		go func() {
			f, errno := fx.fs.OpenFile("fifo", fl, 0)
			if f != nil {
				f.Close()
			}
			done <- errno
		}()
		select {
		case errno := <-done:
			if errno == 0 {
				t.Errorf("flag %#x: FIFO opened", fl)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("flag %#x: open of a FIFO blocked", fl)
		}
	}
	if st, errno := fx.fs.Stat("fifo"); errno != 0 || st.Mode.Type() != fs.ModeNamedPipe {
		t.Errorf("Stat(fifo) = %v, %v", st.Mode, errno)
	}
}
