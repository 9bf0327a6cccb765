package runtime

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/capsulegate/capsulegate/internal/errs"
)

// CodeWorkdir refuses a session whose folders cannot be created.
const CodeWorkdir = "E-RUN-009"

// NewID returns prefix + 32 lowercase hex digits of a UUIDv7: time-ordered, so folders
// and traces sort by creation, with 74 random bits.
func NewID(prefix string) string {
	var u [16]byte
	rand.Read(u[:])
	ms := uint64(time.Now().UnixMilli())
	binary.BigEndian.PutUint16(u[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(u[2:6], uint32(ms))
	u[6] = 0x70 | u[6]&0x0f // version 7
	u[8] = 0x80 | u[8]&0x3f // RFC 9562 variant
	return prefix + hex.EncodeToString(u[:])
}

// Layout is a session's folders (docs/reference/guest-abi.md "Files").
type Layout struct {
	Root  string // <work_root>/<capsule>/<session_id>
	Work  string // the accessible workdir: the only folder guests see
	Trace string // trace.jsonl, never visible to guests
	Logs  string // bootstrap.log, guest stdout/stderr
	Tools string // installed artifacts
}

// NewLayout creates the folders of session id of capsule under workRoot; workdir, if not
// empty, replaces <root>/work as the accessible workdir (created if absent).
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
	for _, d := range []string{l.Logs, l.Tools, filepath.Join(l.Work, "out"), filepath.Join(l.Work, "logs"), filepath.Join(l.Work, ".capsule-home")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, errs.Wrap(err, CodeWorkdir, "runtime", fmt.Sprintf("cannot create %s", d), "check that work_root is writable")
		}
	}
	return l, nil
}
