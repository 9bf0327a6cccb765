//go:build wasip1

package hook

import (
	"fmt"

	"github.com/capsulegate/capsulegate/wit/guest/internal/cabi"
)

// Layout of result<hook-output, string> in its return area: the result's discriminant
// at 0, then either hook-output (discriminant at 4, string payload at 8) or the err
// string at 4.
const (
	retSize      = 16
	retOutDisc   = 4
	retOutString = 8
	retErrString = 4
)

// answer runs h on the lifted event and lowers its answer; a lift error or a panic is
// err(string).
func answer[E any](h func(E) (Output, error), lift func() (E, error)) (ret uint32) {
	defer func() {
		if r := recover(); r != nil {
			ret = lower(Output{}, fmt.Errorf("hook: panic: %v", r))
		}
	}()
	ev, err := lift()
	if err != nil {
		return lower(Output{}, fmt.Errorf("hook: bad event: %w", err))
	}
	if h == nil {
		return lower(None(), nil)
	}
	return lower(h(ev))
}

// lower writes the answer in the result layout and returns the return area's address,
// kept alive until cabi_post (or the next call).
func lower(out Output, err error) uint32 {
	f := new(cabi.Frame)
	ret, b := f.Alloc(retSize, 4)
	disc, ok := caseIndex[out.Case]
	if err == nil && !ok {
		err = fmt.Errorf("hook: handler answered case %q, which this SDK does not lower", out.Case)
	}
	if err != nil {
		b[0] = 1
		p, n := f.String(err.Error())
		cabi.PutU32(b, retErrString, p)
		cabi.PutU32(b, retErrString+4, n)
	} else {
		b[retOutDisc] = disc
		var p, n uint32
		switch out.Case {
		case CaseNone:
		case CaseReplaceContext:
			p, n = lowerMessages(f, out.Messages)
		case CaseWriteManifests:
			// Two strings each (16 bytes, aligned 4): a list of string pairs' layout.
			pairs := make([][2]string, len(out.Manifests))
			for i, m := range out.Manifests {
				pairs[i] = [2]string{m.BinaryName, m.Content}
			}
			p, n = f.Pairs(pairs)
		default:
			p, n = f.String(out.Text)
		}
		// A string and a list share the payload's flat (ptr, len) layout.
		cabi.PutU32(b, retOutString, p)
		cabi.PutU32(b, retOutString+4, n)
	}
	cabi.Hold(ret, f)
	return ret
}

// strs lifts strings from their flat forms, stopping at the first error.
func strs(dst []*string, flat ...uint32) error {
	for i, d := range dst {
		s, err := cabi.TakeString(flat[2*i], flat[2*i+1])
		if err != nil {
			return err
		}
		*d = s
	}
	return nil
}

//go:wasmexport murmur:hook/lifecycle@0.9.0#on-session-start
func onSessionStart(nameP, nameN, verP, verN, idP, idN, modelP, modelN, capsP, capsN uint32) uint32 {
	cabi.ReleaseAll()
	return answer(handlers.SessionStart, func() (SessionContext, error) {
		var c SessionContext
		if err := strs([]*string{&c.CapsuleName, &c.CapsuleVersion, &c.SessionID, &c.Model}, nameP, nameN, verP, verN, idP, idN, modelP, modelN); err != nil {
			return c, err
		}
		var err error
		if c.Capabilities, err = cabi.TakeStrings(capsP, capsN); err != nil {
			return c, err
		}
		return c, nil
	})
}

//go:wasmexport cabi_post_murmur:hook/lifecycle@0.9.0#on-session-start
func postSessionStart(ret uint32) { cabi.Release(ret) }

//go:wasmexport murmur:hook/lifecycle@0.9.0#on-task-start
func onTaskStart(idP, idN, ctxP, ctxN, srcP, srcN uint32, inBytes, budget, window, prior uint64) uint32 {
	cabi.ReleaseAll()
	return answer(handlers.TaskStart, func() (TaskStartEvent, error) {
		e := TaskStartEvent{InputBytes: inBytes, BudgetTokens: budget, ContextWindow: window, PriorTokens: prior}
		return e, strs([]*string{&e.TaskID, &e.ContextID, &e.Source}, idP, idN, ctxP, ctxN, srcP, srcN)
	})
}

//go:wasmexport cabi_post_murmur:hook/lifecycle@0.9.0#on-task-start
func postTaskStart(ret uint32) { cabi.Release(ret) }

// inference-event has 17 flat values, over the 16 passed flat: the host stores the
// record in memory it allocated through cabi_realloc and passes its address.
const (
	infSize     = 80
	infInTok    = 8
	infOutTok   = 16
	infDecision = 24
	infToolName = 32
	infPrompt   = 44
	infOutput   = 56
	infTools    = 68
)

//go:wasmexport murmur:hook/lifecycle@0.9.0#on-inference
func onInference(p uint32) uint32 {
	cabi.ReleaseAll()
	return answer(handlers.Inference, func() (InferenceEvent, error) {
		var e InferenceEvent
		b, err := cabi.Take(p, infSize)
		if err != nil {
			return e, err
		}
		e.Turn, e.InputTokens, e.OutputTokens = cabi.U32(b, 0), u64(b, infInTok), u64(b, infOutTok)
		if e.Decision, err = cabi.TakeString(cabi.U32(b, infDecision), cabi.U32(b, infDecision+4)); err != nil {
			return e, err
		}
		for _, o := range []struct {
			dst **string
			off uint32
		}{{&e.ToolName, infToolName}, {&e.Prompt, infPrompt}, {&e.Output, infOutput}, {&e.Tools, infTools}} {
			if *o.dst, err = cabi.TakeOptStringAt(b, o.off); err != nil {
				return e, err
			}
		}
		return e, nil
	})
}

//go:wasmexport cabi_post_murmur:hook/lifecycle@0.9.0#on-inference
func postInference(ret uint32) { cabi.Release(ret) }

func u64(b []byte, off uint32) uint64 {
	return uint64(cabi.U32(b, off)) | uint64(cabi.U32(b, off+4))<<32
}

//go:wasmexport murmur:hook/lifecycle@0.9.0#on-tool-call
func onToolCall(turn, nameP, nameN uint32, inBytes uint64, inP, inN, outDisc uint32, outBytes, outDur uint64, stP, stN uint32) uint32 {
	cabi.ReleaseAll()
	return answer(handlers.ToolCall, func() (ToolEvent, error) {
		e := ToolEvent{Turn: turn, InputBytes: inBytes}
		if err := strs([]*string{&e.ToolName, &e.Input}, nameP, nameN, inP, inN); err != nil {
			return e, err
		}
		switch outDisc {
		case 0:
		case 1:
			o := &ToolOutcome{OutputBytes: outBytes, DurationMS: outDur}
			if err := strs([]*string{&o.Status}, stP, stN); err != nil {
				return e, err
			}
			e.Outcome = o
		default:
			return e, fmt.Errorf("option discriminant %d", outDisc)
		}
		return e, nil
	})
}

//go:wasmexport cabi_post_murmur:hook/lifecycle@0.9.0#on-tool-call
func postToolCall(ret uint32) { cabi.Release(ret) }

//go:wasmexport murmur:hook/lifecycle@0.9.0#on-task-end
func onTaskEnd(idP, idN, stP, stN uint32) uint32 {
	cabi.ReleaseAll()
	return answer(handlers.TaskEnd, func() (TaskEndEvent, error) {
		var e TaskEndEvent
		return e, strs([]*string{&e.TaskID, &e.ExitStatus}, idP, idN, stP, stN)
	})
}

//go:wasmexport cabi_post_murmur:hook/lifecycle@0.9.0#on-task-end
func postTaskEnd(ret uint32) { cabi.Release(ret) }

//go:wasmexport murmur:hook/lifecycle@0.9.0#on-session-end
func onSessionEnd(turns uint32, inTok, outTok uint64, tools, shells uint32, dur uint64, stP, stN uint32) uint32 {
	cabi.ReleaseAll()
	return answer(handlers.SessionEnd, func() (SessionEndEvent, error) {
		e := SessionEndEvent{TotalTurns: turns, TotalInputTokens: inTok, TotalOutputTokens: outTok, TotalToolCalls: tools, TotalShellCalls: shells, DurationMS: dur}
		return e, strs([]*string{&e.ExitStatus}, stP, stN)
	})
}

//go:wasmexport cabi_post_murmur:hook/lifecycle@0.9.0#on-session-end
func postSessionEnd(ret uint32) { cabi.Release(ret) }
