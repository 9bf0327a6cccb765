package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/capsulegate/capsulegate/taskdb"
)

// storeLockWait is how long the store commands wait for a gateway's lock before refusing.
const storeLockWait = time.Second

// StoreCheck opens a task store read-only, walks every record and prints what it holds;
// a damaged file is refused with E-STORE-001 naming it (docs/operators.md "Commands").
func StoreCheck(ctx context.Context, e *Env, c Common, file string) int {
	db, err := taskdb.Open(file, taskdb.Options{ReadOnly: true, LockTimeout: storeLockWait})
	if err != nil {
		return e.fail(c, err)
	}
	r, err := db.Check()
	_ = db.Close()
	if err != nil {
		return e.fail(c, err)
	}
	if c.JSON {
		e.writeJSON(map[string]any{"ok": true, "file": r.File, "bytes": r.Bytes, "capsules": r.Capsules, "tasks": r.Tasks,
			"events": r.Events, "conversations": r.Conversations, "turns": r.Turns, "pushes": r.Pushes})
		return ExitOK
	}
	fmt.Fprintf(e.Stdout, "checked %s: %d capsules, %d tasks, %d events, %d turns in %d conversations, %d push configs, %s\n",
		r.File, r.Capsules, r.Tasks, r.Events, r.Turns, r.Conversations, r.Pushes, humanBytes64(r.Bytes))
	return ExitOK
}

// StoreCompact rewrites a task store without its free pages, through a verified copy
// renamed over the original; it refuses while a gateway holds the store (E-STORE-002).
func StoreCompact(ctx context.Context, e *Env, c Common, file string) int {
	before, after, err := taskdb.Compact(file, taskdb.Options{LockTimeout: storeLockWait})
	if err != nil {
		return e.fail(c, err)
	}
	if c.JSON {
		e.writeJSON(map[string]any{"ok": true, "file": file, "bytes_before": before.Bytes, "bytes_after": after.Bytes,
			"capsules": after.Capsules, "tasks": after.Tasks, "events": after.Events, "conversations": after.Conversations, "turns": after.Turns, "pushes": after.Pushes})
		return ExitOK
	}
	fmt.Fprintf(e.Stdout, "compacted %s: %s → %s (%d tasks, %d events, %d turns, %d push configs kept)\n",
		file, humanBytes64(before.Bytes), humanBytes64(after.Bytes), after.Tasks, after.Events, after.Turns, after.Pushes)
	return ExitOK
}

func humanBytes64(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return humanBytes(int(n))
}
