package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/runtime/wasm/guestfs"
)

// Layout is a session's folders (docs/reference/guest-abi.md "Files").
type Layout struct {
	Root  string // <work_root>/<capsule>/<session_id>
	Work  string // the accessible workdir: the only folder guests see
	Trace string // trace.jsonl, never visible to guests
	Logs  string // bootstrap.log, guest stdout/stderr
	Tools string // installed artifacts
	// fresh: NewLayout made the session's folder just now, so its workdir holds nothing
	// (workdirPrep then creates MURMUR.md in place).
	fresh bool
	// lazy: the workdir may not be made yet; whoever first needs it makes it
	// (guestfs.LazyDir).
	lazy bool
}

// NewLayout creates the folders of session id of capsule under workRoot that guests see
// (the workdir and, unless lazy, its out/); workdir, if not empty, replaces <root>/work
// as the accessible workdir (created if absent). The host-only logs/ and tools/ are
// created by their first file, so a session that writes none costs no mkdir. With lazy,
// out/ is too, and so is the workdir of a session folder made now: a gateway context's
// session makes them when something first needs them (workdirPrep, guestfs.LazyDir).
func NewLayout(workRoot, capsule, id, workdir string, lazy bool) (*Layout, error) {
	root := filepath.Join(workRoot, capsule, id)
	l := &Layout{Root: root, Work: filepath.Join(root, "work"), Trace: filepath.Join(root, "trace.jsonl"),
		Logs: filepath.Join(root, "logs"), Tools: filepath.Join(root, "tools")}
	if workdir != "" {
		abs, err := filepath.Abs(workdir)
		if err != nil {
			return nil, errs.Wrap(err, CodeWorkdir, "runtime", "cannot resolve --workdir "+workdir, "pass a usable folder")
		}
		l.Work = abs
	}
	// The workdir's logs/ and .capsule-home/ are the shell's, made when it first needs
	// them (runtime/shell): a session without shell or native tools costs no mkdir for them.
	// The records folder too: trace.jsonl goes there even when --workdir moves the work.
	dirs := []string{root}
	if !lazy {
		dirs = append(dirs, l.Work, filepath.Join(l.Work, "out"))
	}
	l.lazy = lazy
	// The capsule's folder exists after its first session: one mkdir per folder then,
	// where MkdirAll would stat every parent of each first.
	if workdir == "" && mkdirEach(dirs) == nil {
		l.fresh = true
		return l, nil
	}
	// A session folder there already (a context's, from its earlier sessions) may hold its
	// workdir or not.
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, errs.Wrap(err, CodeWorkdir, "runtime", fmt.Sprintf("cannot create %s", d), "check that work_root is writable")
		}
	}
	return l, nil
}

// mkdirEach creates each folder in order, whose parent must exist; it stops at the first
// failure.
func mkdirEach(dirs []string) error {
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// workdirPrep makes what a gateway context's workdir holds for whoever looks in it — its
// out/ and MURMUR.md — the first time something needs them: a guest reaching the folder
// (guestfs.Before), a subprocess, a file the host writes there. A new session does not
// make them up front: a script capsule's task, whose task.md and answer the held files
// serve, never looks, and each folder or file created costs the kernel an inode.
type workdirPrep struct {
	work  *guestfs.Dir
	fresh bool // the workdir was made by this session: MURMUR.md is created in place
	mu    sync.Mutex
	made  bool
	// url is the capsule URL MURMUR.md names (setURL), and md its content for a URL.
	url string
	md  func(url string) []byte
}

// make creates out/ unless it is there (a link a tool left there stays: the writes
// through the root refuse one that leads out), then writes MURMUR.md.
func (p *workdirPrep) make() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.made {
		return nil
	}
	work, err := p.work.Root() // the workdir first, when nothing has made it yet
	if err != nil {
		return fmt.Errorf("making the workdir: %w", err)
	}
	if err := work.Mkdir("out", 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("making the workdir's out/: %w", err)
	}
	if err := writeMurmurMD(p.work.Path(), p.md(p.url), p.fresh); err != nil {
		return err
	}
	p.made = true
	return nil
}

// setURL makes url the capsule URL MURMUR.md names: written again now if it was made
// already, otherwise when it is.
func (p *workdirPrep) setURL(url string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.url = url
	if !p.made {
		return nil
	}
	return writeMurmurMD(p.work.Path(), p.md(url), false)
}
