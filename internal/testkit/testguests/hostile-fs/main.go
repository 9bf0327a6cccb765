//go:build wasip1

// Command hostile-fs is a tool guest that tries to read and write outside its workdir.
// Its input data is "<op> <path>":
//
//	read P      os.ReadFile(P)
//	write P     os.WriteFile(P, "escaped")
//	mkwrite P   os.MkdirAll(dir(P)) then write
//	rawread P   WASI path_open of P on the root preopen, then read: bypasses Go's
//	            lexical cleaning, so "../x" reaches the host as "../x"
//	rawwrite P  the same with O_CREAT|O_TRUNC, then write "escaped"
//	ls P        os.ReadDir(P): the names listed, one a line
//	rename A B  os.Rename(A, B): moving a file out of (or into) the workdir
//	ok          nothing: status passed
//
// Success is status passed with what was read in data; failure is status failed with
// the error in summary.
package main

import (
	"io"
	"os"
	"path"
	"strings"
	"syscall"
	"unsafe"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

//go:wasmimport wasi_snapshot_preview1 path_open
func pathOpen(fd int32, dirflags uint32, path uint32, pathLen uint32, oflags uint32, rightsBase, rightsInheriting uint64, fdflags uint32, resultFD uint32) uint32

const (
	rootPreopen     = 3 // the first (and only) preopen: the guest's "/"
	lookupFollow    = 1 // lookupflags.symlink_follow
	oflagCreat      = 1
	oflagTrunc      = 8
	allRights       = 1<<29 - 1
	escapedContents = "escaped"
)

func rawOpen(p string, oflags uint32) (*os.File, error) {
	b := []byte(p)
	var fd int32
	errno := pathOpen(rootPreopen, lookupFollow,
		uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))), uint32(len(b)),
		oflags, allRights, allRights, 0,
		uint32(uintptr(unsafe.Pointer(&fd))))
	if errno != 0 {
		return nil, &os.PathError{Op: "path_open", Path: p, Err: syscall.Errno(errno)}
	}
	return os.NewFile(uintptr(fd), p), nil
}

func run(op, p string) (string, error) {
	switch op {
	case "ok":
		return "ok", nil
	case "read":
		b, err := os.ReadFile(p)
		return string(b), err
	case "write":
		return "", os.WriteFile(p, []byte(escapedContents), 0o644)
	case "mkwrite":
		if err := os.MkdirAll(path.Dir(p), 0o755); err != nil {
			return "", err
		}
		return "", os.WriteFile(p, []byte(escapedContents), 0o644)
	case "rawread":
		f, err := rawOpen(p, 0)
		if err != nil {
			return "", err
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		return string(b), err
	case "ls":
		ents, err := os.ReadDir(p)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return strings.Join(names, "\n"), err
	case "rename":
		from, to, _ := strings.Cut(p, " ")
		return "", os.Rename(from, to)
	case "rawwrite":
		f, err := rawOpen(p, oflagCreat|oflagTrunc)
		if err != nil {
			return "", err
		}
		_, err = f.Write([]byte(escapedContents))
		return "", errorsJoin(err, f.Close())
	}
	return "", os.ErrInvalid
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func init() {
	tool.Handle(func(in tool.Input) tool.Result {
		op, p, _ := strings.Cut(guest.Value(in.Data), " ")
		data, err := run(op, p)
		if err != nil {
			return tool.Result{Status: tool.Failed, Summary: guest.Some(err.Error())}
		}
		return tool.Result{Status: tool.Passed, Data: guest.Some(data)}
	})
}

func main() {}
