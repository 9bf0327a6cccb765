package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/clip"
	"github.com/capsulegate/capsulegate/pgstore"
	"github.com/capsulegate/capsulegate/taskdb"
)

// storeLockWait is how long the store commands wait for a gateway's lock before refusing.
const storeLockWait = time.Second

// StoreCheck opens a task store read-only, walks every record and prints what it holds;
// a damaged file is refused with E-STORE-001 naming it (docs/operators.md "Commands").
func StoreCheck(ctx context.Context, e *Env, c Common, file string) int {
	dsn, ok, err := database(e, file)
	if err != nil {
		return e.fail(c, err)
	}
	file = dsn
	if ok {
		r, err := pgstore.Check(ctx, dsn)
		if err != nil {
			return e.fail(c, err)
		}
		if c.JSON {
			e.writeJSON(map[string]any{"ok": true, "database": r.Where, "schema": r.Schema, "bytes": r.Bytes, "capsules": r.Capsules, "tasks": r.Tasks,
				"events": r.Events, "conversations": r.Conversations, "turns": r.Turns, "pushes": r.Pushes, "blobs": r.Blobs})
			return ExitOK
		}
		fmt.Fprintf(e.Stdout, "checked %s (schema %d): %d capsules, %d tasks, %d events, %d turns in %d conversations, %d push configs, %d blobs, %s\n",
			r.Where, r.Schema, r.Capsules, r.Tasks, r.Events, r.Turns, r.Conversations, r.Pushes, r.Blobs, humanBytes64(r.Bytes))
		return ExitOK
	}
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

// StoreMigrate brings a PostgreSQL task store's schema to this release's version under
// the migration lock; an up-to-date one is left as it is.
func StoreMigrate(ctx context.Context, e *Env, c Common, arg string) int {
	dsn, ok, err := database(e, arg)
	if err == nil && !ok {
		err = errs.New(CodeStoreArg, "cli", fmt.Sprintf("%q is not a postgres:// URL nor env:NAME", clip.String(arg, 40)),
			"a task store file needs no migration (a gateway reads every earlier file format); give the database's postgres:// URL, or env:NAME for a variable holding it")
	}
	if err != nil {
		return e.fail(c, err)
	}
	from, to, err := pgstore.Migrate(ctx, dsn)
	if err != nil {
		return e.fail(c, err)
	}
	if c.JSON {
		e.writeJSON(map[string]any{"ok": true, "from": from, "to": to})
		return ExitOK
	}
	if from == to {
		fmt.Fprintf(e.Stdout, "the task store is at schema %d already, this release's\n", to)
	} else {
		fmt.Fprintf(e.Stdout, "migrated the task store from schema %d to %d\n", from, to)
	}
	return ExitOK
}

// database reads a store argument: a postgres:// URL (ok), or env:NAME for a variable
// holding one (so that the password stays out of the process list) or a file's path;
// anything else is a file's path, returned as it is.
func database(e *Env, arg string) (dsn string, ok bool, err error) {
	if name, isEnv := strings.CutPrefix(arg, "env:"); isEnv {
		dsn = e.getenv(name)
		if dsn == "" {
			return "", true, errs.New(CodeStoreArg, "cli", fmt.Sprintf("the variable %s is empty or not set", name),
				"export it with the store's postgres:// URL, or give the URL itself")
		}
		arg = dsn
	}
	if strings.HasPrefix(arg, "postgres://") || strings.HasPrefix(arg, "postgresql://") {
		return arg, true, nil
	}
	return arg, false, nil // a file: the variable's value when env:NAME gave one
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
