package wasm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero/api"

	"github.com/capsulegate/capsulegate/internal/wasmbin"
)

// Deadlines by interrupt flag (docs/rationale.md "Why deadlines are an interrupt flag").
// At compile every module gets two more mutable i32 globals, exported under reserved
// names: a flag and a countdown. At every loop header the guest traps if the flag is set,
// and every 1024th iteration (counted in a local) it leaves its machine code for Go once
// (memory.grow 0), so Go's scheduler and garbage collector can stop it: compiled wasm
// cannot be preempted. At the entry of every function that makes calls it decrements the
// countdown global instead, and when that reaches 0 it makes the trip, checks the flag
// and restarts the countdown. After every call of an imported function it checks the
// flag. A function with neither loops nor calls runs in bounded time, so it is not
// checked. When the call's context ends the host sets the flag and zeroes the countdown,
// and the guest traps at its next check; the trap is classified by the context
// (deadline or canceled).

// interruptExport and countdownExport name the globals' exports, startExport the
// module's start function when it was moved out of the start section; guests cannot see
// exports.
const (
	interruptExport = "\x00capsulegate:interrupt"
	countdownExport = "\x00capsulegate:countdown"
	startExport     = "\x00capsulegate:start"
)

// yieldEvery is how many checks pass between two trips to Go (a power of two: loop
// headers count with a mask): each costs about what one
// close-on-context-done check does (tens of ns), and it bounds how long a guest can hold
// off a garbage collection that must stop every goroutine.
const yieldEvery = 1024

// errInterrupted wraps the trap of a guest stopped at an interrupt check.
var errInterrupted = errors.New("the call's context ended: the guest was stopped")

// addInterrupts returns wasm with the interrupt flag and its checks added, and its start
// section, if any, replaced by an export of the start function (the host calls it right
// after instantiation, with the flag armed: a start function runs inside
// InstantiateModule, where no flag could reach it yet). Function, global and memory
// indexes do not change: the globals come last, nothing is imported, and a module without
// memory gets one of 0 pages, unexported, for memory.grow 0. DWARF sections are
// dropped, since code offsets move. An error means the module could not be read; the
// caller then compiles the original.
func addInterrupts(wasm []byte) (out []byte, movedStart bool, err error) {
	secs, ok := wasmbin.Sections(wasm)
	if !ok {
		return nil, false, wasmbin.ErrMalformed
	}
	var (
		importedFuncs, importedGlobals, definedGlobals uint64
		importedMems, definedMems                      uint64
		start                                          = int64(-1)
		replace                                        = map[int][]byte{}
		drop                                           = map[int]bool{}
		globalSec, exportSec, codeSec, memorySec       = -1, -1, -1, -1
		typeParams, funcTypes                          []uint64 // parameter counts by type; types by defined function
	)
	for i, s := range secs {
		body := wasm[s.Start:s.End]
		r := wasmbin.NewReader(body)
		switch s.ID {
		case wasmbin.SectionImport:
			importedFuncs, importedGlobals, importedMems, err = countImports(body)
		case wasmbin.SectionMemory:
			memorySec, definedMems = i, r.U()
		case wasmbin.SectionType:
			typeParams, err = paramCounts(body)
		case wasmbin.SectionFunction:
			for n := r.U(); n > 0 && !r.Bad(); n-- {
				funcTypes = append(funcTypes, r.U())
			}
		case wasmbin.SectionGlobal:
			globalSec, definedGlobals = i, r.U()
		case wasmbin.SectionExport:
			exportSec = i
		case wasmbin.SectionStart:
			start = int64(r.U())
			drop[i] = true
		case wasmbin.SectionCode:
			codeSec = i
		case wasmbin.SectionCustom:
			drop[i] = strings.HasPrefix(string(r.Bytes(r.U())), ".debug_")
		}
		if err != nil || r.Bad() {
			return nil, false, wasmbin.ErrMalformed
		}
	}
	flag := importedGlobals + definedGlobals
	countdown := flag + 1
	if codeSec >= 0 {
		s := secs[codeSec]
		params := make([]uint64, len(funcTypes))
		for i, t := range funcTypes {
			if t >= uint64(len(typeParams)) {
				return nil, false, wasmbin.ErrMalformed
			}
			params[i] = typeParams[t]
		}
		code, err := instrumentCode(wasm[s.Start:s.End], flag, countdown, importedFuncs, params)
		if err != nil {
			return nil, false, err
		}
		replace[codeSec] = code
	}

	// The flag, mutable i32 0, and the countdown, mutable i32 yieldEvery.
	globals := []byte{0x7f, 0x01, 0x41, 0x00, wasmbin.OpEnd, 0x7f, 0x01, 0x41}
	globals = append(wasmbin.AppendSigned(globals, yieldEvery), wasmbin.OpEnd)
	if globalSec >= 0 {
		replace[globalSec] = appendToVector(wasm[secs[globalSec].Start:secs[globalSec].End], 2, globals)
	}
	exports := appendExport(nil, interruptExport, 0x03, flag)
	exports = appendExport(exports, countdownExport, 0x03, countdown)
	n := uint64(2)
	if start >= 0 {
		exports = appendExport(exports, startExport, 0x00, uint64(start))
		n++
	}
	if exportSec >= 0 {
		replace[exportSec] = appendToVector(wasm[secs[exportSec].Start:secs[exportSec].End], n, exports)
	}

	out = make([]byte, 0, len(wasm)+len(wasm)/8+64)
	out = append(out, wasm[:8]...)
	// New sections go before the first section that must follow them.
	type newSection struct {
		id      byte
		content []byte
	}
	var pending []newSection
	if memorySec < 0 && importedMems == 0 && definedMems == 0 {
		pending = append(pending, newSection{wasmbin.SectionMemory, []byte{0x01, 0x00, 0x00}})
	}
	if globalSec < 0 {
		pending = append(pending, newSection{wasmbin.SectionGlobal, append([]byte{0x02}, globals...)})
	}
	if exportSec < 0 {
		pending = append(pending, newSection{wasmbin.SectionExport, append(binary.AppendUvarint(nil, n), exports...)})
	}
	for i, s := range secs {
		for len(pending) > 0 && s.ID != wasmbin.SectionCustom && wasmbin.Order(s.ID) > wasmbin.Order(pending[0].id) {
			out = appendSection(out, pending[0].id, pending[0].content)
			pending = pending[1:]
		}
		switch {
		case drop[i]:
		case replace[i] != nil:
			out = appendSection(out, s.ID, replace[i])
		default:
			out = append(out, wasm[s.Header:s.End]...)
		}
	}
	for _, p := range pending {
		out = appendSection(out, p.id, p.content)
	}
	return out, start >= 0, nil
}

// instrumentCode rewrites a code section's function bodies with the checks of the flag
// and countdown globals; calls of a function index below importedFuncs are calls of
// imports, and params holds each defined function's parameter count.
func instrumentCode(sec []byte, flag, countdown, importedFuncs uint64, params []uint64) ([]byte, error) {
	getFlag := binary.AppendUvarint([]byte{wasmbin.OpGlobalGet}, flag)
	getCount := binary.AppendUvarint([]byte{wasmbin.OpGlobalGet}, countdown)
	setCount := binary.AppendUvarint([]byte{0x24}, countdown)
	trip := []byte{0x41, 0x00, 0x40, 0x00, 0x1a} // i32.const 0; memory.grow 0; drop
	// flagCheck: if the flag is set, trap.
	flagCheck := append(append([]byte{}, getFlag...), wasmbin.OpIf, 0x40, wasmbin.OpUnreachable, wasmbin.OpEnd)
	// entryCheck: countdown -= 1; if countdown <= 0 { trip to Go; flagCheck; countdown =
	// yieldEvery }. The countdown is a global so that it runs down across calls (a
	// recursion without loops).
	entryCheck := append(append([]byte{}, getCount...), 0x41, 0x01, 0x6b)
	entryCheck = append(append(entryCheck, setCount...), getCount...)
	entryCheck = append(entryCheck, 0x41, 0x00, 0x4c, wasmbin.OpIf, 0x40)
	entryCheck = append(append(entryCheck, trip...), flagCheck...)
	entryCheck = append(wasmbin.AppendSigned(append(entryCheck, 0x41), yieldEvery), setCount...)
	entryCheck = append(entryCheck, wasmbin.OpEnd)

	r := wasmbin.NewReader(sec)
	n := r.U()
	if n != uint64(len(params)) {
		return nil, wasmbin.ErrMalformed
	}
	out := binary.AppendUvarint(make([]byte, 0, len(sec)+len(sec)/8), n)
	var body, loopCheck []byte
	for i := uint64(0); i < n && !r.Bad(); i++ {
		fn := r.Bytes(r.U())
		fr := wasmbin.NewReader(fn)
		groups := fr.U()
		groupsLen := len(fn) - len(fr.Rest())
		locals := params[i]
		for g := groups; g > 0 && !fr.Bad(); g-- {
			locals += fr.U()
			fr.Byte()
		}
		if fr.Bad() || locals >= 1<<32 {
			return nil, wasmbin.ErrMalformed
		}
		code := fr.Rest()
		head := fn[:len(fn)-len(code)]
		// loopCheck: flagCheck; then, every 1024th iteration (counted in a new local,
		// which lives in a register: no memory traffic), a trip to Go.
		counter := locals
		loopCheck = append(loopCheck[:0], flagCheck...)
		loopCheck = binary.AppendUvarint(append(loopCheck, 0x20), counter)
		loopCheck = append(loopCheck, 0x41, 0x01, 0x6a, 0x22)
		loopCheck = binary.AppendUvarint(loopCheck, counter)
		loopCheck = wasmbin.AppendSigned(append(loopCheck, 0x41), yieldEvery-1)
		loopCheck = append(loopCheck, 0x71, 0x45, wasmbin.OpIf, 0x40)
		loopCheck = append(append(loopCheck, trip...), wasmbin.OpEnd)
		// Instructions, each followed by a check where one belongs.
		body = body[:0]
		calls, loops := false, false
		for len(fr.Rest()) > 0 {
			at := len(code) - len(fr.Rest())
			op, imm, err := fr.Instr()
			if err != nil {
				return nil, fmt.Errorf("function %d: %w", i, err)
			}
			body = append(body, code[at:len(code)-len(fr.Rest())]...)
			switch op {
			case wasmbin.OpLoop:
				loops = true
				body = append(body, loopCheck...)
			case wasmbin.OpCall:
				calls = true
				if imm < importedFuncs {
					body = append(body, flagCheck...)
				}
			case wasmbin.OpCallIndirect, wasmbin.OpReturnCall, wasmbin.OpReturnCallIndirect:
				calls = true
			}
		}
		if loops { // one more local group: the loop counter, i32
			head = append(append(binary.AppendUvarint(nil, groups+1), head[groupsLen:]...), 0x01, 0x7f)
		}
		size := len(head) + len(body)
		if calls {
			size += len(entryCheck)
		}
		out = binary.AppendUvarint(out, uint64(size))
		out = append(out, head...)
		if calls {
			out = append(out, entryCheck...)
		}
		out = append(out, body...)
	}
	if r.Bad() || len(r.Rest()) != 0 {
		return nil, wasmbin.ErrMalformed
	}
	return out, nil
}

// paramCounts reads a type section: the parameter count of each function type.
func paramCounts(body []byte) ([]uint64, error) {
	r := wasmbin.NewReader(body)
	n := r.U()
	out := make([]uint64, 0, min(n, 1<<16))
	for i := uint64(0); i < n && !r.Bad(); i++ {
		if r.Byte() != 0x60 {
			return nil, wasmbin.ErrMalformed
		}
		p := r.U()
		r.Bytes(p)
		r.Bytes(r.U())
		out = append(out, p)
	}
	if r.Bad() {
		return nil, wasmbin.ErrMalformed
	}
	return out, nil
}

// countImports counts the functions, globals and memories a module's import section
// imports.
func countImports(body []byte) (funcs, globals, mems uint64, err error) {
	r := wasmbin.NewReader(body)
	n := r.U()
	for i := uint64(0); i < n && !r.Bad(); i++ {
		r.Bytes(r.U()) // module
		r.Bytes(r.U()) // name
		switch r.Byte() {
		case 0x00:
			r.U()
			funcs++
		case 0x01:
			r.Byte()
			r.Limits()
		case 0x02:
			r.Limits()
			mems++
		case 0x03:
			r.Byte()
			r.Byte()
			globals++
		default:
			return 0, 0, 0, wasmbin.ErrMalformed
		}
	}
	if r.Bad() {
		return 0, 0, 0, wasmbin.ErrMalformed
	}
	return funcs, globals, mems, nil
}

// appendToVector returns a vector section's content with n more items, encoded in items.
func appendToVector(content []byte, n uint64, items []byte) []byte {
	r := wasmbin.NewReader(content)
	count := r.U()
	out := binary.AppendUvarint(nil, count+n)
	out = append(out, r.Rest()...)
	return append(out, items...)
}

func appendExport(b []byte, name string, kind byte, idx uint64) []byte {
	b = binary.AppendUvarint(b, uint64(len(name)))
	b = append(b, name...)
	b = append(b, kind)
	return binary.AppendUvarint(b, idx)
}

func appendSection(b []byte, id byte, content []byte) []byte {
	b = append(b, id)
	b = binary.AppendUvarint(b, uint64(len(content)))
	return append(b, content...)
}

// interrupter is the interrupt flag and countdown of one instance.
type interrupter struct {
	mu              sync.Mutex // between the AfterFunc and host functions that fire
	flag, countdown api.MutableGlobal
	fired           bool // fire ran since the last arm (mu)
}

// fire sets the flag and zeroes the countdown: the guest traps at its next check.
func (in *interrupter) fire() {
	if in == nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.flag.Set(1)
	in.countdown.Set(0)
	in.fired = true
}

// newInterrupter finds m's flag and countdown; nil when m has none (a module compiled on
// the fallback runtime, whose deadlines wazero enforces).
func newInterrupter(m api.Module) *interrupter {
	f, ok1 := m.ExportedGlobal(interruptExport).(api.MutableGlobal)
	c, ok2 := m.ExportedGlobal(countdownExport).(api.MutableGlobal)
	if !ok1 || !ok2 {
		return nil
	}
	return &interrupter{flag: f, countdown: c}
}

// arm clears the flag — a warm instance starts its call with it cleared — and sets it
// when ctx ends. disarm stops that and reports whether the flag was set (by ctx's end or
// by a host function that fired it); when the AfterFunc ran,
// it returns only after the setting is done, so nothing writes the flag once it has
// returned.
func (in *interrupter) arm(ctx context.Context) (disarm func() (fired bool)) {
	if in == nil {
		return func() bool { return false }
	}
	in.mu.Lock()
	in.flag.Set(0)
	in.fired = false
	in.mu.Unlock()
	done := make(chan struct{})
	// The writes are plain stores the guest's compiled code loads at its next check. A
	// late view, or the guest's own decrement overwriting the zero, only moves the stop
	// to a later check: at most yieldEvery checks later, the countdown runs out by itself
	// and the flag is seen.
	stop := context.AfterFunc(ctx, func() {
		in.fire()
		close(done)
	})
	return func() bool {
		if stop() {
			// The AfterFunc did not run, but a host function may have fired the flag
			// itself (the guest's sleep, when the context ended), or the context ended
			// and a host call saw it before the AfterFunc was scheduled (stop then wins
			// the race): that call was interrupted all the same.
			in.mu.Lock()
			defer in.mu.Unlock()
			return in.fired || ctx.Err() != nil
		}
		<-done
		return true
	}
}

// wrapInterrupted marks err as the trap of an interrupt check when the flag was set.
func wrapInterrupted(err error, fired bool) error {
	if err == nil || !fired {
		return err
	}
	return fmt.Errorf("%w: %w", errInterrupted, err)
}
