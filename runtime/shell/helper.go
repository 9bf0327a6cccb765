package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capsulegate/capsulegate/errs"
)

// HelperName is the file name of the sandbox helper (cmd/capsulegate-sandbox), a binary
// that only runs the wrapper: started in place of the gateway, a command does not pay
// the gateway's package initialisation twice (docs/sandbox.md "How a command runs").
const HelperName = "capsulegate-sandbox"

// helperImport is what builds the helper, for the fixes the gateway prints.
const helperImport = "github.com/capsulegate/capsulegate/cmd/capsulegate-sandbox"

// How a sandbox came to its wrapper (Wrapper.Kind).
const (
	WrapperHelper     = "helper"     // HelperName found next to the gateway's executable
	WrapperConfigured = "configured" // Config.WrapperPath
	WrapperSelf       = "self"       // the gateway's own executable: slower commands (W-SEC-004)
	WrapperNone       = "none"       // outside Linux: tools run without a wrapper
)

// Wrapper is the binary a sandbox starts as the wrapper of each command, and why.
type Wrapper struct {
	Path   string // the binary; "" for WrapperNone
	Kind   string // WrapperHelper, WrapperConfigured, WrapperSelf or WrapperNone
	Why    string // WrapperSelf: why the helper is not used
	Helper string // WrapperSelf: where the helper was looked for
}

// String describes the wrapper for the line that announces the tier.
func (w Wrapper) String() string {
	switch w.Kind {
	case WrapperHelper:
		return w.Path + " (the sandbox helper next to the gateway)"
	case WrapperConfigured:
		return w.Path + " (configured)"
	case WrapperSelf:
		return w.Path + " (the gateway's own binary: slower, see " + WarnSelfWrapper + ")"
	}
	return "none (tools run directly)"
}

// wrapperProtocol is bumped when what a stage does with what it reads changes in a way
// the other side relies on; a change of the spec's shape counts by itself (Protocol).
const wrapperProtocol = 1

var protocolOnce = sync.OnceValue(func() string {
	h := fnv.New64a()
	fmt.Fprintln(h, stageEnv, wrapperArg0, stageOuter, stageReaper, stageInner, rootEnv)
	describeType(h, reflect.TypeFor[runSpec]())
	describeType(h, reflect.TypeFor[command]())
	return fmt.Sprintf("%d-%016x", wrapperProtocol, h.Sum64())
})

// Protocol names what the gateway and its wrapper must agree on: wrapperProtocol and a
// fingerprint of the spec's types, the stage names and the markers. A helper built from
// other source answers another one (docs/errors.md E-SEC-005, W-SEC-004).
func Protocol() string { return protocolOnce() }

// describeType writes t's shape: field names, tags and kinds, nested types included.
func describeType(w io.Writer, t reflect.Type) {
	switch t.Kind() {
	case reflect.Struct:
		fmt.Fprint(w, "struct{")
		for i := range t.NumField() {
			f := t.Field(i)
			fmt.Fprintf(w, "%s %q ", f.Name, f.Tag)
			describeType(w, f.Type)
			fmt.Fprint(w, ";")
		}
		fmt.Fprint(w, "}")
	case reflect.Slice, reflect.Array, reflect.Pointer:
		fmt.Fprint(w, t.Kind(), "[")
		describeType(w, t.Elem())
		fmt.Fprint(w, "]")
	case reflect.Map:
		fmt.Fprint(w, "map[")
		describeType(w, t.Key())
		fmt.Fprint(w, "]")
		describeType(w, t.Elem())
	default:
		fmt.Fprint(w, t.Kind())
	}
}

// printProtocol is the version stage: it tells the gateway which protocol this binary
// speaks, on stdout.
func printProtocol() int {
	fmt.Printf("%s protocol %s\n", wrapperArg0, Protocol())
	return 0
}

// chooseWrapper picks a sandbox's wrapper: configured when set, refused (E-SEC-005)
// unless usable; else HelperName in the folder of the gateway's executable (symlinks
// resolved); else that executable itself, which works but is slower (W-SEC-004).
//
// A helper built from other source is found out here, once per helper file (the answer
// is kept by path, size and modification time), rather than at its first command: a
// wrong helper then costs speed, not the shell tools, because the gateway falls back to
// itself, and no command ever reaches a wrapper that reads its spec differently. A
// configured helper is refused instead: the operator named that binary, and running
// another one would hide the mistake.
func chooseWrapper(configured string, executable func() (string, error)) (Wrapper, error) {
	if configured != "" {
		if err := CheckHelper(configured); err != nil {
			return Wrapper{}, err
		}
		return Wrapper{Path: configured, Kind: WrapperConfigured}, nil
	}
	if !wrapperUsed {
		return Wrapper{Kind: WrapperNone}, nil
	}
	exe, err := executable()
	if err != nil {
		return Wrapper{}, errs.Wrap(err, CodeConfig, part, "cannot find this binary to run the sandbox wrapper", "set Config.WrapperPath")
	}
	helper, why := findHelper(exe)
	if why == "" {
		return Wrapper{Path: helper, Kind: WrapperHelper}, nil
	}
	return Wrapper{Path: exe, Kind: WrapperSelf, Why: why, Helper: helper}, nil
}

// findHelper looks for HelperName next to exe, symlinks resolved: a gateway and its
// helper are installed side by side. It returns where it looked and, when that helper
// cannot serve, why.
func findHelper(exe string) (string, string) {
	real, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return "", fmt.Sprintf("the gateway's executable %s cannot be resolved: %v", exe, err)
	}
	helper := filepath.Join(filepath.Dir(real), HelperName)
	if helper == real {
		return helper, "the gateway's executable is itself named " + HelperName
	}
	if err := inspectHelper(helper); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return helper, fmt.Sprintf("there is no %s next to it in %s", HelperName, filepath.Dir(real))
		}
		return helper, err.Error()
	}
	return helper, ""
}

// CheckHelper refuses (E-SEC-005) a wrapper binary that cannot serve this gateway: path
// must be absolute and name an executable file that speaks this gateway's Protocol (a
// helper built from the same source). The gateway checks its sandbox_helper option with
// it when the config loads; New checks Config.WrapperPath the same way.
func CheckHelper(path string) error {
	const rule = "it must be an absolute path to an executable capsulegate-sandbox built from the same capsulegate source as the gateway"
	fix := fmt.Sprintf("build it there with `go build -o %s %s` from the gateway's source, or leave the setting out to use the %s next to the gateway", path, helperImport, HelperName)
	if !filepath.IsAbs(path) {
		return errs.New(CodeHelper, part, fmt.Sprintf("the sandbox helper %q is not an absolute path; %s", path, rule), "write the path from /")
	}
	if err := inspectHelper(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%s does not exist", path)
		}
		if errors.Is(err, errNotExecutable) {
			fix = "if it is the helper, make it executable (chmod 755 " + path + "); else " + fix
		}
		return errs.Wrap(err, CodeHelper, part, fmt.Sprintf("the sandbox helper %q cannot be used; %s", path, rule), fix)
	}
	return nil
}

var errNotExecutable = errors.New("not executable")

// inspectHelper says why the file at path cannot be the wrapper, or nil: it must be an
// executable regular file that answers this gateway's protocol. A missing file is an
// fs.ErrNotExist.
func inspectHelper(path string) error {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case !st.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file (%s)", path, st.Mode().Type())
	case st.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s is %w (mode %s)", path, errNotExecutable, st.Mode().Perm())
	}
	proto, err := helperProtocol(path, st)
	if err != nil {
		return fmt.Errorf("%s does not answer the sandbox protocol query, so it is no %s of this release: %w", path, HelperName, err)
	}
	if proto != Protocol() {
		return fmt.Errorf("%s speaks sandbox protocol %s and this gateway %s: it was built from other source", path, proto, Protocol())
	}
	return nil
}

// helperAnswer is what a helper file answered, kept while the file stays the same.
type helperAnswer struct {
	size     int64
	mtime    time.Time
	protocol string
	err      error
}

var (
	answersMu sync.Mutex // held while asking, so sessions starting together ask once
	answers   = map[string]helperAnswer{}
)

// helperProtocol returns the protocol the binary at path (stat st) speaks, asking it
// once per path, size and modification time: every session checks its wrapper, and a
// reinstalled helper is asked again. Only what the binary itself answered is kept: a
// start that failed or timed out (no process, a busy host) is tried again next time.
func helperProtocol(path string, st os.FileInfo) (string, error) {
	answersMu.Lock()
	defer answersMu.Unlock()
	if a, ok := answers[path]; ok && a.size == st.Size() && a.mtime.Equal(st.ModTime()) {
		return a.protocol, a.err
	}
	p, answered, err := queryProtocol(path)
	if answered {
		answers[path] = helperAnswer{size: st.Size(), mtime: st.ModTime(), protocol: p, err: err}
	}
	return p, err
}

// queryProtocol starts the binary at path as the wrapper in the version stage, where it
// prints its protocol and exits; answered reports that it ran and exited by itself, so
// the outcome is the binary's own.
func queryProtocol(path string) (proto string, answered bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	cmd.Args, cmd.Env, cmd.Dir = []string{wrapperArg0}, wrapperEnv(stageVersion, false), "/"
	var out, stderr capped
	out.max, stderr.max = 512, 512
	cmd.Stdout, cmd.Stderr = &out, &stderr
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		// ENOEXEC (not a program) is the file's own; EAGAIN and the like are the host's.
		return "", errors.Is(err, syscall.ENOEXEC), err
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		return "", false, errors.New("no answer within 10s")
	}
	proto, ok := strings.CutPrefix(strings.TrimSpace(out.String()), wrapperArg0+" protocol ")
	if err != nil || !ok || proto == "" || strings.ContainsAny(proto, " \n") {
		if err == nil {
			err = fmt.Errorf("it printed %q", clip(out.String(), 80))
		} else if s := strings.TrimSpace(stderr.String()); s != "" {
			err = fmt.Errorf("%w: %s", err, clip(s, 200))
		}
		return "", true, err
	}
	return proto, true, nil
}

// capped keeps the first max bytes written to it and drops the rest.
type capped struct {
	bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
