package runtime

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/capsulegate/capsulegate/errs"
)

// Layout is a session's folders (docs/reference/guest-abi.md "Files").
type Layout struct {
	Root  string // <work_root>/<capsule>/<session_id>
	Work  string // the accessible workdir: the only folder guests see
	Trace string // trace.jsonl, never visible to guests
	Logs  string // bootstrap.log, guest stdout/stderr
	Tools string // installed artifacts
	// fresh: NewLayout made the session's folder and workdir just now, so they hold
	// nothing (writeMurmurMD then creates the file in place).
	fresh bool
}

// NewLayout creates the folders of session id of capsule under workRoot that guests see
// (the workdir and its out/); workdir, if not empty, replaces <root>/work
// as the accessible workdir (created if absent). The host-only logs/ and tools/ are
// created by their first file, so a session that writes none costs no mkdir.
func NewLayout(workRoot, capsule, id, workdir string) (*Layout, error) {
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
	dirs := []string{filepath.Join(l.Work, "out")}
	// The capsule's folder exists after its first session: one mkdir per folder then,
	// where MkdirAll would stat every parent of each first.
	if workdir == "" && mkdirEach(append([]string{root, l.Work}, dirs...)) == nil {
		l.fresh = true
		return l, nil
	}
	// The records folder too: trace.jsonl goes there even when --workdir moves the work.
	for _, d := range append([]string{root}, dirs...) {
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
