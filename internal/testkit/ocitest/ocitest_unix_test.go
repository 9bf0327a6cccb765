//go:build unix

package ocitest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestRunsUnprivileged proves that under root the registry runs as nobody: the blobs it
// writes are nobody's.
func TestRunsUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: the registry runs as the tests do")
	}
	r := Start(t)
	who, err := serverAccount()
	if err != nil {
		t.Fatal(err)
	}
	sum := pushBlob(t, r, Prefix+"/owner", []byte("whose?"))
	fi, err := os.Stat(filepath.Join(r.Storage, "docker", "registry", "v2", "blobs", "sha256", sum[:2], sum, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != who.UID {
		t.Fatalf("the blob is uid %d's, want nobody's (%d)", st.Uid, who.UID)
	}
}
