//go:build wasip1

package process

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/capsulegate/capsulegate/wit/guest/internal/cabi"
)

// Layouts of murmur:driver/process@0.6.0's records in memory (32-bit canonical ABI).
const (
	descSize  = 76
	reqSize   = 100
	planRes   = 56
	eventSize = 88
	eventBody = 8 // an event's payload: after its discriminant, at usage's 8-byte alignment
	stateSize = 12
	needSize  = 12 // path-need: path, access
	fileSize  = 16 // driver-file: name, contents
)

var (
	interrupts = []string{InterruptStdin, InterruptSignal, InterruptUnsupported}
	accesses   = []string{"read", "read-write"}
	eventCases = []string{SessionStarted, TextDelta, Text, ThinkingDelta, Thinking, ToolCall, ToolResult, Retry, UsageEvent, TurnEnd, TurnFailed, Note}
	failures   = []string{FailAuth, FailQuota, FailMaxTurns, FailCanceled, FailHarnessError, FailOther}
	states     = []string{LoggedIn, LoggedOut, Unknown}
)

func putStr(f *cabi.Frame, b []byte, off uint32, s string) {
	p, n := f.String(s)
	cabi.PutU32(b, off, p)
	cabi.PutU32(b, off+4, n)
}

func putStrs(f *cabi.Frame, b []byte, off uint32, ss []string) {
	p, l := f.Alloc(uint32(len(ss))*8, 4)
	for i, s := range ss {
		putStr(f, l, uint32(i)*8, s)
	}
	cabi.PutU32(b, off, p)
	cabi.PutU32(b, off+4, uint32(len(ss)))
}

func putBytes(f *cabi.Frame, b []byte, off uint32, data []byte) {
	if data == nil {
		return // none: the discriminant stays 0
	}
	b[off] = 1
	p, n := f.Bytes(data)
	cabi.PutU32(b, off+4, p)
	cabi.PutU32(b, off+8, n)
}

func putOptU64(b []byte, off uint32, v *uint64) {
	if v != nil {
		b[off] = 1
		binary.LittleEndian.PutUint64(b[off+8:], *v)
	}
}

func index(cases []string, c, what string) (byte, error) {
	i := slices.Index(cases, c)
	if i < 0 {
		return 0, fmt.Errorf("process: %s %q is none of %v", what, c, cases)
	}
	return byte(i), nil
}

// protect runs fn, turning a panic into err so a driver's bug is an answer, not a trap
// with no words.
func protect(what string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("process: %s panicked: %v", what, r)
		}
	}()
	if driver == nil {
		return fmt.Errorf("process: no driver installed (call process.Handle from init)")
	}
	return fn()
}

//go:wasmexport murmur:driver/process@0.6.0#describe
func describe() uint32 {
	cabi.ReleaseAll()
	var d Description
	if err := protect("Describe", func() error { d = driver.Describe(); return nil }); err != nil {
		panic(err) // describe has no error case: the host reports the trap at stage
	}
	f := new(cabi.Frame)
	ret, b := f.Alloc(descSize, 4)
	putStr(f, b, 0, d.Harness)
	putStr(f, b, 8, d.Binary)
	putStrs(f, b, 16, d.VersionArgs)
	putStrs(f, b, 24, d.TestedVersions)
	i, err := index(interrupts, d.Interrupt, "interrupt")
	if err != nil {
		panic(err)
	}
	b[32] = i
	putStrs(f, b, 36, d.RequiredEnv)
	b[44], b[45] = boolByte(d.StreamsText), boolByte(d.ReportsUsage)
	np, nb := f.Alloc(uint32(len(d.NeedsPaths))*needSize, 4)
	for k, n := range d.NeedsPaths {
		a, err := index(accesses, n.Access, "path access")
		if err != nil {
			panic(err)
		}
		putStr(f, nb, uint32(k)*needSize, n.Path)
		nb[uint32(k)*needSize+8] = a
	}
	cabi.PutU32(b, 48, np)
	cabi.PutU32(b, 52, uint32(len(d.NeedsPaths)))
	putStrs(f, b, 56, d.NeedsHosts)
	if d.LoginCheck != nil {
		b[64] = 1
		putStrs(f, b, 68, d.LoginCheck)
	}
	cabi.Hold(ret, f)
	return ret
}

//go:wasmexport cabi_post_murmur:driver/process@0.6.0#describe
func postDescribe(ret uint32) { cabi.Release(ret) }

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

func liftRequest(p uint32) (LaunchRequest, error) {
	var r LaunchRequest
	b, err := cabi.Take(p, reqSize)
	if err != nil {
		return r, err
	}
	if r.Model, err = cabi.TakeOptStringAt(b, 0); err != nil {
		return r, err
	}
	if r.SystemPrompt, err = cabi.TakeString(cabi.U32(b, 12), cabi.U32(b, 16)); err != nil {
		return r, err
	}
	if r.Config, err = cabi.TakeOptStringAt(b, 20); err != nil {
		return r, err
	}
	if b[32] == 1 {
		br := &Bridge{}
		for _, s := range []struct {
			dst *string
			off uint32
		}{{&br.ServerName, 36}, {&br.URL, 44}, {&br.BearerToken, 52}} {
			if *s.dst, err = cabi.TakeString(cabi.U32(b, s.off), cabi.U32(b, s.off+4)); err != nil {
				return r, err
			}
		}
		if br.ToolNames, err = cabi.TakeStrings(cabi.U32(b, 60), cabi.U32(b, 64)); err != nil {
			return r, err
		}
		r.Bridge = br
	}
	if r.SessionID, err = cabi.TakeString(cabi.U32(b, 68), cabi.U32(b, 72)); err != nil {
		return r, err
	}
	r.Resume = b[76] == 1
	if r.HarnessVersion, err = cabi.TakeOptStringAt(b, 80); err != nil {
		return r, err
	}
	r.Task, err = cabi.TakeString(cabi.U32(b, 92), cabi.U32(b, 96))
	return r, err
}

//go:wasmexport murmur:driver/process@0.6.0#launch
func launch(p uint32) uint32 {
	cabi.ReleaseAll()
	f := new(cabi.Frame)
	ret, b := f.Alloc(planRes, 4)
	var plan LaunchPlan
	err := protect("Launch", func() error {
		req, err := liftRequest(p)
		if err != nil {
			return fmt.Errorf("process: bad launch-request: %w", err)
		}
		plan, err = driver.Launch(req)
		return err
	})
	if err != nil {
		b[0] = 1
		putStr(f, b, 4, err.Error())
		cabi.Hold(ret, f)
		return ret
	}
	const at = 4
	putStrs(f, b, at, plan.Args)
	ep, en := f.Pairs(plan.EnvSet)
	cabi.PutU32(b, at+8, ep)
	cabi.PutU32(b, at+12, en)
	fp, fb := f.Alloc(uint32(len(plan.Files))*fileSize, 4)
	for i, file := range plan.Files {
		putStr(f, fb, uint32(i)*fileSize, file.Name)
		putStr(f, fb, uint32(i)*fileSize+8, file.Contents)
	}
	cabi.PutU32(b, at+16, fp)
	cabi.PutU32(b, at+20, uint32(len(plan.Files)))
	putBytes(f, b, at+24, plan.Stdin)
	b[at+36] = boolByte(plan.KeepStdinOpen)
	putBytes(f, b, at+40, plan.InterruptStdin)
	cabi.Hold(ret, f)
	return ret
}

//go:wasmexport cabi_post_murmur:driver/process@0.6.0#launch
func postLaunch(ret uint32) { cabi.Release(ret) }

// putEvent writes e at b (eventSize bytes).
func putEvent(f *cabi.Frame, b []byte, e Event) error {
	c, err := index(eventCases, e.Case, "event case")
	if err != nil {
		return err
	}
	b[0] = c
	p := b[eventBody:]
	switch e.Case {
	case SessionStarted:
		putStr(f, p, 0, e.SessionID)
		putStr(f, p, 8, e.Auth)
		f.PutOptString(p, 16, e.Model)
	case ToolCall:
		putStr(f, p, 0, e.ToolID)
		putStr(f, p, 8, e.ToolName)
		putStr(f, p, 16, e.ToolInput)
	case ToolResult:
		putStr(f, p, 0, e.ToolID)
		putStr(f, p, 8, e.Text)
		p[16] = boolByte(e.IsError)
	case Retry:
		cabi.PutU32(p, 0, e.Attempt)
		putStr(f, p, 4, e.Text)
	case UsageEvent:
		u := e.Usage
		for i, v := range []*uint64{u.Input, u.Output, u.CacheRead, u.CacheCreation, u.Thinking} {
			putOptU64(p, uint32(i)*16, v)
		}
	case TurnFailed:
		k, err := index(failures, e.FailureKind, "failure kind")
		if err != nil {
			return err
		}
		p[0] = k
		putStr(f, p, 4, e.Text)
	default:
		putStr(f, p, 0, e.Text)
	}
	return nil
}

//go:wasmexport murmur:driver/process@0.6.0#parse
func parse(p, n uint32) uint32 {
	cabi.ReleaseAll()
	var events []Event
	err := protect("Parse", func() error {
		lines, err := cabi.TakeStrings(p, n)
		if err != nil {
			return fmt.Errorf("process: bad lines: %w", err)
		}
		events = driver.Parse(lines)
		return nil
	})
	if err != nil {
		events = []Event{{Case: Note, Text: err.Error()}}
	}
	f := new(cabi.Frame)
	ret, b := f.Alloc(8, 4)
	lp, lb := f.Alloc(uint32(len(events))*eventSize, 8)
	for i, e := range events {
		if err := putEvent(f, lb[uint32(i)*eventSize:(uint32(i)+1)*eventSize], e); err != nil {
			clear(lb[uint32(i)*eventSize : (uint32(i)+1)*eventSize])
			putEvent(f, lb[uint32(i)*eventSize:(uint32(i)+1)*eventSize], Event{Case: Note, Text: err.Error()})
		}
	}
	cabi.PutU32(b, 0, lp)
	cabi.PutU32(b, 4, uint32(len(events)))
	cabi.Hold(ret, f)
	return ret
}

//go:wasmexport cabi_post_murmur:driver/process@0.6.0#parse
func postParse(ret uint32) { cabi.Release(ret) }

func optS32(disc, v uint32) *int32 {
	if disc == 0 {
		return nil
	}
	n := int32(v)
	return &n
}

//go:wasmexport murmur:driver/process@0.6.0#classify-exit
func classifyExit(codeDisc, code, sigDisc, sig, tailP, tailN, interrupted, sawTerminal uint32) uint32 {
	cabi.ReleaseAll()
	var e Event
	err := protect("ClassifyExit", func() error {
		tail, err := cabi.TakeString(tailP, tailN)
		if err != nil {
			return err
		}
		e = driver.ClassifyExit(ExitStatus{Code: optS32(codeDisc, code), Signal: optS32(sigDisc, sig), StderrTail: tail,
			Interrupted: interrupted != 0, SawTerminal: sawTerminal != 0})
		if e.Case != TurnEnd && e.Case != TurnFailed {
			return fmt.Errorf("process: ClassifyExit answered %q; it may answer only turn-end or turn-failed", e.Case)
		}
		return nil
	})
	if err != nil {
		e = Event{Case: TurnFailed, FailureKind: FailOther, Text: err.Error()}
	}
	f := new(cabi.Frame)
	ret, b := f.Alloc(eventSize, 8)
	if err := putEvent(f, b, e); err != nil {
		clear(b)
		putEvent(f, b, Event{Case: TurnFailed, FailureKind: FailOther, Text: err.Error()})
	}
	cabi.Hold(ret, f)
	return ret
}

//go:wasmexport cabi_post_murmur:driver/process@0.6.0#classify-exit
func postClassify(ret uint32) { cabi.Release(ret) }

//go:wasmexport murmur:driver/process@0.6.0#read-login
func readLogin(codeDisc, code, outP, outN, errP, errN uint32) uint32 {
	cabi.ReleaseAll()
	state, detail := Unknown, ""
	err := protect("ReadLogin", func() error {
		out, err := cabi.TakeString(outP, outN)
		if err != nil {
			return err
		}
		stderr, err := cabi.TakeString(errP, errN)
		if err != nil {
			return err
		}
		state, detail = driver.ReadLogin(LoginOutput{Code: optS32(codeDisc, code), Stdout: out, Stderr: stderr})
		return nil
	})
	if err != nil {
		state, detail = Unknown, err.Error()
	}
	s, err := index(states, state, "login state")
	if err != nil {
		s, detail = 2, err.Error()
	}
	f := new(cabi.Frame)
	ret, b := f.Alloc(stateSize, 4)
	b[0] = s
	putStr(f, b, 4, detail)
	cabi.Hold(ret, f)
	return ret
}

//go:wasmexport cabi_post_murmur:driver/process@0.6.0#read-login
func postReadLogin(ret uint32) { cabi.Release(ret) }
