package wasm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/tetratelabs/wazero/api"

	"github.com/capsulegate/capsulegate/internal/wasmbin"
)

// Deadlines by interrupt flag (docs/rationale.md "Why deadlines are an interrupt flag").
// At compile every module gets one more mutable i32 global, exported under a reserved
// name, and a check of it — global.get; if; unreachable; end — at every loop header, at
// the entry of every function that makes calls, and after every call of an imported
// function. A function with neither loops nor calls runs in bounded time, so it is not
// checked. When the call's context ends the host sets the global, and the guest traps at
// its next check; the trap is classified by the context (deadline or canceled).

// interruptExport names the flag's export, startExport the module's start function when
// it was moved out of the start section; guests cannot see exports.
const (
	interruptExport = "\x00capsulegate:interrupt"
	startExport     = "\x00capsulegate:start"
)

// errInterrupted wraps the trap of a guest stopped at an interrupt check.
var errInterrupted = errors.New("the call's context ended: the guest was stopped")

// addInterrupts returns wasm with the interrupt flag and its checks added, and its start
// section, if any, replaced by an export of the start function (the host calls it right
// after instantiation, with the flag armed: a start function runs inside
// InstantiateModule, where no flag could reach it yet). Function and global indexes do
// not change: the flag is the last global, and nothing is imported. DWARF sections are
// dropped, since code offsets move. An error means the module could not be read; the
// caller then compiles the original.
func addInterrupts(wasm []byte) (out []byte, movedStart bool, err error) {
	secs, ok := wasmbin.Sections(wasm)
	if !ok {
		return nil, false, wasmbin.ErrMalformed
	}
	var (
		importedFuncs, importedGlobals, definedGlobals uint64
		start                                          = int64(-1)
		replace                                        = map[int][]byte{}
		drop                                           = map[int]bool{}
		globalSec, exportSec, codeSec                  = -1, -1, -1
	)
	for i, s := range secs {
		body := wasm[s.Start:s.End]
		r := wasmbin.NewReader(body)
		switch s.ID {
		case wasmbin.SectionImport:
			importedFuncs, importedGlobals, err = countImports(body)
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
	if codeSec >= 0 {
		s := secs[codeSec]
		code, err := instrumentCode(wasm[s.Start:s.End], flag, importedFuncs)
		if err != nil {
			return nil, false, err
		}
		replace[codeSec] = code
	}

	// The flag: mutable i32, 0.
	global := []byte{0x7f, 0x01, 0x41, 0x00, wasmbin.OpEnd}
	if globalSec >= 0 {
		replace[globalSec] = appendToVector(wasm[secs[globalSec].Start:secs[globalSec].End], 1, global)
	}
	exports := appendExport(nil, interruptExport, 0x03, flag)
	n := uint64(1)
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
	if globalSec < 0 {
		pending = append(pending, newSection{wasmbin.SectionGlobal, append([]byte{0x01}, global...)})
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

// instrumentCode rewrites a code section's function bodies with the checks of flag;
// calls of a function index below importedFuncs are calls of imports.
func instrumentCode(sec []byte, flag, importedFuncs uint64) ([]byte, error) {
	check := []byte{wasmbin.OpGlobalGet}
	check = binary.AppendUvarint(check, flag)
	check = append(check, wasmbin.OpIf, 0x40, wasmbin.OpUnreachable, wasmbin.OpEnd)

	r := wasmbin.NewReader(sec)
	n := r.U()
	out := binary.AppendUvarint(make([]byte, 0, len(sec)+len(sec)/8), n)
	var body []byte
	for i := uint64(0); i < n && !r.Bad(); i++ {
		fn := r.Bytes(r.U())
		fr := wasmbin.NewReader(fn)
		for locals := fr.U(); locals > 0 && !fr.Bad(); locals-- {
			fr.U()
			fr.Byte()
		}
		if fr.Bad() {
			return nil, wasmbin.ErrMalformed
		}
		code := fr.Rest()
		head := fn[:len(fn)-len(code)]
		// Instructions, each followed by a check where one belongs.
		body = body[:0]
		calls := false
		for len(fr.Rest()) > 0 {
			at := len(code) - len(fr.Rest())
			op, imm, err := fr.Instr()
			if err != nil {
				return nil, fmt.Errorf("function %d: %w", i, err)
			}
			body = append(body, code[at:len(code)-len(fr.Rest())]...)
			switch op {
			case wasmbin.OpLoop:
				body = append(body, check...)
			case wasmbin.OpCall:
				calls = true
				if imm < importedFuncs {
					body = append(body, check...)
				}
			case wasmbin.OpCallIndirect, wasmbin.OpReturnCall, wasmbin.OpReturnCallIndirect:
				calls = true
			}
		}
		size := len(head) + len(body)
		if calls {
			size += len(check)
		}
		out = binary.AppendUvarint(out, uint64(size))
		out = append(out, head...)
		if calls {
			out = append(out, check...)
		}
		out = append(out, body...)
	}
	if r.Bad() || len(r.Rest()) != 0 {
		return nil, wasmbin.ErrMalformed
	}
	return out, nil
}

// countImports counts the functions and globals a module's import section imports.
func countImports(body []byte) (funcs, globals uint64, err error) {
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
		case 0x03:
			r.Byte()
			r.Byte()
			globals++
		default:
			return 0, 0, wasmbin.ErrMalformed
		}
	}
	if r.Bad() {
		return 0, 0, wasmbin.ErrMalformed
	}
	return funcs, globals, nil
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

// interrupter is the interrupt flag of one instance.
type interrupter struct {
	flag api.MutableGlobal
}

// newInterrupter finds m's flag; nil when m has none (a module compiled on the fallback
// runtime, whose deadlines wazero enforces).
func newInterrupter(m api.Module) *interrupter {
	g, ok := m.ExportedGlobal(interruptExport).(api.MutableGlobal)
	if !ok {
		return nil
	}
	return &interrupter{flag: g}
}

// arm clears the flag — a warm instance starts its call with it cleared — and sets it
// when ctx ends. disarm stops that and reports whether the flag was set; when it was,
// it returns only after the setting is done, so nothing writes the flag once it has
// returned.
func (in *interrupter) arm(ctx context.Context) (disarm func() (fired bool)) {
	if in == nil {
		return func() bool { return false }
	}
	in.flag.Set(0)
	done := make(chan struct{})
	// The write is a plain store the guest's compiled code loads at its next check; a
	// torn or late view of it only moves the stop to a later check.
	stop := context.AfterFunc(ctx, func() {
		in.flag.Set(1)
		close(done)
	})
	return func() bool {
		if stop() {
			return false
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
