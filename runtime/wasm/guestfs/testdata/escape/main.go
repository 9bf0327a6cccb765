//go:build wasip1

// Command escape is a WASI preview1 guest used by guestfs's tests: it runs
// one filesystem action named on its command line against the root it was
// given and prints one line, "ok <detail>" or "err <ERRNO>".
//
//	escape read PATH | write PATH DATA | append PATH DATA | mkdir PATH |
//	       readdir PATH | rename FROM TO | remove PATH | symlink TARGET LINK |
//	       link OLD NEW | stat PATH | lstat PATH | readlink PATH |
//	       chtimes PATH | truncate PATH SIZE
//
// Go's wasip1 runtime resolves every name against the working directory "/"
// and cleans it lexically, so "../x" reaches the host as "x": a ".." can
// never climb above the root from here, it stays at "/".
package main

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Println("err USAGE")
		os.Exit(2)
	}
	a := os.Args[1:]
	detail, err := run(a[0], a[1:])
	if err != nil {
		fmt.Println("err " + errName(err))
		return
	}
	fmt.Println(strings.TrimSpace("ok " + detail))
}

func run(action string, args []string) (string, error) {
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	switch action {
	case "read":
		b, err := os.ReadFile(arg(0))
		return string(b), err
	case "write":
		return "", os.WriteFile(arg(0), []byte(arg(1)), 0o644)
	case "append":
		f, err := os.OpenFile(arg(0), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return "", err
		}
		if _, err := f.WriteString(arg(1)); err != nil {
			f.Close()
			return "", err
		}
		return "", f.Close()
	case "mkdir":
		return "", os.Mkdir(arg(0), 0o755)
	case "readdir":
		es, err := os.ReadDir(arg(0))
		if err != nil {
			return "", err
		}
		var names []string
		for _, e := range es {
			n := e.Name()
			if e.IsDir() {
				n += "/"
			}
			names = append(names, n)
		}
		sort.Strings(names)
		return strings.Join(names, ","), nil
	case "rename":
		return "", os.Rename(arg(0), arg(1))
	case "remove":
		return "", os.Remove(arg(0))
	case "symlink":
		return "", os.Symlink(arg(0), arg(1))
	case "link":
		return "", os.Link(arg(0), arg(1))
	case "stat", "lstat":
		var fi os.FileInfo
		var err error
		if action == "stat" {
			fi, err = os.Stat(arg(0))
		} else {
			fi, err = os.Lstat(arg(0))
		}
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s size=%d", fi.Mode().Type(), fi.Size()), nil
	case "readlink":
		return os.Readlink(arg(0))
	case "chtimes":
		t := time.Unix(1000000000, 0)
		return "", os.Chtimes(arg(0), t, t)
	case "truncate":
		n, _ := strconv.ParseInt(arg(1), 10, 64)
		return "", os.Truncate(arg(0), n)
	}
	return "", errors.New("unknown action")
}

func errName(err error) string {
	var en syscall.Errno
	if !errors.As(err, &en) {
		return "OTHER(" + err.Error() + ")"
	}
	names := map[syscall.Errno]string{
		syscall.EACCES: "EACCES", syscall.EBADF: "EBADF", syscall.EEXIST: "EEXIST",
		syscall.EINVAL: "EINVAL", syscall.EIO: "EIO", syscall.EISDIR: "EISDIR",
		syscall.ELOOP: "ELOOP", syscall.ENOENT: "ENOENT", syscall.ENOSYS: "ENOSYS",
		syscall.ENOTDIR: "ENOTDIR", syscall.ENOTEMPTY: "ENOTEMPTY", syscall.EPERM: "EPERM",
		syscall.EROFS: "EROFS", syscall.ENOTCAPABLE: "ENOTCAPABLE", syscall.ENOTSUP: "ENOTSUP",
	}
	if n, ok := names[en]; ok {
		return n
	}
	return "ERRNO" + strconv.Itoa(int(en))
}
