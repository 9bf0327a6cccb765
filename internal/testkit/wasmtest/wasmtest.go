// Package wasmtest encodes tiny WebAssembly modules for tests: exact imports, exports and
// bodies (a spin loop, a trap, a memory bomb) without a toolchain in the loop.
package wasmtest

import (
	"encoding/binary"

	"github.com/capsulegate/capsulegate/internal/wasmbin"
)

// I32 is the i32 value type.
const I32 byte = 0x7f

// Import is an imported function; it returns nothing.
type Import struct {
	Module, Name string
	Params       []byte
}

// Func is a defined function without parameters or results; Body is its instructions
// without the final end.
type Func struct {
	Export string
	Locals uint32 // i32 locals
	Body   []byte
}

// Module is a module to encode.
type Module struct {
	Imports []Import
	Funcs   []Func
	// MemoryPages is the initial memory size; a memory named "memory" is exported when > 0.
	MemoryPages uint32
}

// Bodies of common test functions.
var (
	Spin = []byte{0x03, 0x40, 0x0c, 0x00, 0x0b} // loop br 0 end
	Trap = []byte{0x00}                         // unreachable
	Nop  = []byte{}                             // returns at once
	// GrowUntilRefused grows memory 16 pages at a time until memory.grow fails, then traps.
	GrowUntilRefused = []byte{
		0x02, 0x40, // block
		0x03, 0x40, // loop
		0x41, 0x10, 0x40, 0x00, // i32.const 16; memory.grow 0
		0x41, 0x7f, 0x46, // i32.const -1; i32.eq
		0x0d, 0x01, // br_if 1 (leave the block)
		0x0c, 0x00, // br 0
		0x0b, 0x0b, // end loop, end block
		0x00, // unreachable
	}
)

// CallLoop returns a body that calls function idx n times (one i32 local as counter):
// a call-heavy loop, the worst case for per-call and back-edge checks.
func CallLoop(idx uint32, n int32) []byte {
	b := []byte{0x03, 0x40, // loop
		0x20, 0x00, 0x41, 0x01, 0x6a, 0x21, 0x00, // local.get 0; i32.const 1; i32.add; local.set 0
		0x10} // call
	b = append(b, uleb(uint64(idx))...)
	b = append(b, 0x20, 0x00, 0x41) // local.get 0; i32.const n
	b = append(b, sleb(int64(n))...)
	return append(b, 0x49, 0x0d, 0x00, 0x0b) // i32.lt_u; br_if 0; end
}

// CallImport returns a body that calls imported function idx with one i32 argument.
func CallImport(idx uint32, arg int32) []byte {
	b := append([]byte{0x41}, sleb(int64(arg))...)
	return append(append(b, 0x10), uleb(uint64(idx))...)
}

// Encode returns the binary module.
func (m Module) Encode() []byte {
	out := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	var types [][]byte
	for _, im := range m.Imports {
		types = append(types, funcType(im.Params))
	}
	for range m.Funcs {
		types = append(types, funcType(nil))
	}
	out = section(out, 1, vec(types))
	var imps [][]byte
	for i, im := range m.Imports {
		e := append(name(im.Module), name(im.Name)...)
		imps = append(imps, append(append(e, 0x00), uleb(uint64(i))...))
	}
	if len(imps) > 0 {
		out = section(out, 2, vec(imps))
	}
	var fns [][]byte
	for i := range m.Funcs {
		fns = append(fns, uleb(uint64(len(m.Imports)+i)))
	}
	out = section(out, 3, vec(fns))
	if m.MemoryPages > 0 {
		out = section(out, 5, vec([][]byte{append([]byte{0x00}, uleb(uint64(m.MemoryPages))...)}))
	}
	var exps [][]byte
	for i, f := range m.Funcs {
		if f.Export != "" {
			exps = append(exps, append(append(name(f.Export), 0x00), uleb(uint64(len(m.Imports)+i))...))
		}
	}
	if m.MemoryPages > 0 {
		exps = append(exps, append(append(name("memory"), 0x02), 0x00))
	}
	out = section(out, 7, vec(exps))
	var codes [][]byte
	for _, f := range m.Funcs {
		body := []byte{0x00}
		if f.Locals > 0 {
			body = append(append([]byte{0x01}, uleb(uint64(f.Locals))...), I32)
		}
		body = append(body, f.Body...)
		body = append(body, 0x0b)
		codes = append(codes, append(uleb(uint64(len(body))), body...))
	}
	return section(out, 10, vec(codes))
}

// funcType is the type of a function taking params and returning nothing.
func funcType(params []byte) []byte {
	t := []byte{0x60}
	t = append(t, uleb(uint64(len(params)))...)
	t = append(t, params...)
	return append(t, 0x00)
}

func section(out []byte, id byte, content []byte) []byte {
	out = append(out, id)
	out = append(out, uleb(uint64(len(content)))...)
	return append(out, content...)
}

func vec(items [][]byte) []byte {
	out := uleb(uint64(len(items)))
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

func name(s string) []byte { return append(uleb(uint64(len(s))), s...) }

func uleb(v uint64) []byte { return binary.AppendUvarint(nil, v) }

func sleb(v int64) []byte { return wasmbin.AppendSigned(nil, v) }
