//go:build wasip1

package hook

import (
	"fmt"
	"math"

	"github.com/capsulegate/capsulegate/wit/guest/internal/cabi"
)

// shell-event has 23 flat values, over the 16 passed flat: the host stores the record
// in memory it allocated through cabi_realloc and passes its address. The layout follows
// the canonical ABI: shell-outcome holds u64s, so the option around it is 8-aligned.
const (
	shSize     = 112
	shBinary   = 4
	shCommand  = 12
	shArgv     = 20
	shScript   = 28
	shRecipe   = 40
	shOutcome  = 56 // option discriminant; the shell-outcome follows at 64
	shExit     = 64
	shStdout   = 68
	shStderr   = 76
	shOutBytes = 88
	shErrBytes = 96
	shDuration = 104
)

//go:wasmexport murmur:hook/lifecycle@0.9.0#on-shell
func onShell(p uint32) uint32 {
	cabi.ReleaseAll()
	return answer(handlers.Shell, func() (ShellEvent, error) {
		var e ShellEvent
		b, err := cabi.Take(p, shSize)
		if err != nil {
			return e, err
		}
		e.Turn = cabi.U32(b, 0)
		if err := strs([]*string{&e.Binary, &e.Command}, cabi.U32(b, shBinary), cabi.U32(b, shBinary+4), cabi.U32(b, shCommand), cabi.U32(b, shCommand+4)); err != nil {
			return e, err
		}
		if e.Argv, err = cabi.TakeStrings(cabi.U32(b, shArgv), cabi.U32(b, shArgv+4)); err != nil {
			return e, err
		}
		if e.Script, err = cabi.TakeOptStringAt(b, shScript); err != nil {
			return e, err
		}
		if e.Recipe, err = cabi.TakeOptStringAt(b, shRecipe); err != nil {
			return e, err
		}
		switch b[shOutcome] {
		case 0:
		case 1:
			o := &ShellOutcome{ExitCode: int32(cabi.U32(b, shExit)), StdoutBytes: u64(b, shOutBytes), StderrBytes: u64(b, shErrBytes), DurationMS: u64(b, shDuration)}
			if err := strs([]*string{&o.Stdout, &o.Stderr}, cabi.U32(b, shStdout), cabi.U32(b, shStdout+4), cabi.U32(b, shStderr), cabi.U32(b, shStderr+4)); err != nil {
				return e, err
			}
			e.Outcome = o
		default:
			return e, fmt.Errorf("option discriminant %d", b[shOutcome])
		}
		return e, nil
	})
}

//go:wasmexport cabi_post_murmur:hook/lifecycle@0.9.0#on-shell
func postShell(ret uint32) { cabi.Release(ret) }

// Layout of murmur:hook's message: two strings, two option<string>s, and
// option<context-insertion> (discriminant, then the enum's byte), padded to 4.
const (
	msgSize       = 44
	msgContent    = 8
	msgID         = 16
	msgSourceID   = 28
	msgInsertedBy = 40
)

// insertions are context-insertion's labels in WIT order.
var insertions = []string{CaseReplaceContext, "seed-context"}

// compaction-event is 10 flat values: passed flat.
//
//go:wasmexport murmur:hook/lifecycle@0.9.0#on-compaction
func onCompaction(msgsP, msgsN uint32, tokens uint64, threshold float64, modelD, modelP, modelN, sysD, sysP, sysN uint32) uint32 {
	cabi.ReleaseAll()
	return answer(handlers.Compaction, func() (CompactionEvent, error) {
		e := CompactionEvent{SessionTokens: tokens, Threshold: threshold}
		var err error
		if e.Messages, err = takeMessages(msgsP, msgsN); err != nil {
			return e, err
		}
		if e.Model, err = cabi.TakeOptString(modelD, modelP, modelN); err != nil {
			return e, err
		}
		e.SystemPrompt, err = cabi.TakeOptString(sysD, sysP, sysN)
		return e, err
	})
}

//go:wasmexport cabi_post_murmur:hook/lifecycle@0.9.0#on-compaction
func postCompaction(ret uint32) { cabi.Release(ret) }

// takeMessages lifts a list<message> from its flat (ptr, len).
func takeMessages(p, n uint32) ([]Message, error) {
	if n > math.MaxUint32/msgSize {
		return nil, fmt.Errorf("list of %d messages", n)
	}
	b, err := cabi.Take(p, n*msgSize)
	if err != nil {
		return nil, err
	}
	out := make([]Message, n)
	for i := range out {
		m, e := &out[i], b[uint32(i)*msgSize:]
		if err := strs([]*string{&m.Role, &m.Content}, cabi.U32(e, 0), cabi.U32(e, 4), cabi.U32(e, msgContent), cabi.U32(e, msgContent+4)); err != nil {
			return nil, err
		}
		if m.ID, err = cabi.TakeOptStringAt(e, msgID); err != nil {
			return nil, err
		}
		if m.SourceID, err = cabi.TakeOptStringAt(e, msgSourceID); err != nil {
			return nil, err
		}
		switch e[msgInsertedBy] {
		case 0:
		case 1:
			if int(e[msgInsertedBy+1]) >= len(insertions) {
				return nil, fmt.Errorf("context-insertion %d", e[msgInsertedBy+1])
			}
			m.InsertedBy = &insertions[e[msgInsertedBy+1]]
		default:
			return nil, fmt.Errorf("option discriminant %d", e[msgInsertedBy])
		}
	}
	return out, nil
}

// lowerMessages writes msgs as a list<message> kept alive with f and returns its flat
// (ptr, len). An InsertedBy naming no context-insertion is lowered as none.
func lowerMessages(f *cabi.Frame, msgs []Message) (uint32, uint32) {
	if len(msgs) == 0 {
		return 0, 0
	}
	p, b := f.Alloc(uint32(len(msgs))*msgSize, 4)
	for i, m := range msgs {
		e := b[uint32(i)*msgSize:]
		rp, rn := f.String(m.Role)
		cp, cn := f.String(m.Content)
		cabi.PutU32(e, 0, rp)
		cabi.PutU32(e, 4, rn)
		cabi.PutU32(e, msgContent, cp)
		cabi.PutU32(e, msgContent+4, cn)
		f.PutOptString(e, msgID, m.ID)
		f.PutOptString(e, msgSourceID, m.SourceID)
		for j, label := range insertions {
			if m.InsertedBy != nil && *m.InsertedBy == label {
				e[msgInsertedBy], e[msgInsertedBy+1] = 1, byte(j)
			}
		}
	}
	return p, uint32(len(msgs))
}
