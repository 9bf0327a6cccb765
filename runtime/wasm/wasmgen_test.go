package wasm

import (
	"encoding/binary"

	"github.com/capsulegate/capsulegate/internal/wasmbin"
)

// Value types for test modules.
const (
	tI32 byte = 0x7f
	tI64 byte = 0x7e
)

// gType is a function type.
type gType struct{ params, results []byte }

// gImport is an imported function (kind 0, Type) or global (kind 3, Global mutable).
type gImport struct {
	module, name string
	kind         byte
	typ          uint32 // function type index
	global       byte   // global value type
	mutable      bool
}

// gFunc is a defined function: its type index, locals (of one type each) and body (the
// final end included).
type gFunc struct {
	typ    uint32
	locals []byte
	body   []byte
}

// gGlobal is a defined global with an i32.const or i64.const initial value.
type gGlobal struct {
	typ     byte
	mutable bool
	init    int64
}

// gExport exports a function (kind 0) or global (kind 3).
type gExport struct {
	name string
	kind byte
	idx  uint32
}

// gModule is a test module with everything the interrupt rewrite must keep: imports of
// functions and globals, a table with elements, memory, globals, exports and a start.
type gModule struct {
	types    []gType
	imports  []gImport
	funcs    []gFunc
	table    []uint32 // function indexes in a funcref table, element segment at 0
	memory   uint32   // pages; exported as "memory" when > 0
	globals  []gGlobal
	exports  []gExport
	start    int64 // -1: none
	noExport bool  // leave the export section out entirely
}

func (m gModule) encode() []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	var b []byte
	b = uv(nil, len(m.types))
	for _, t := range m.types {
		b = append(b, 0x60)
		b = append(uv(b, len(t.params)), t.params...)
		b = append(uv(b, len(t.results)), t.results...)
	}
	out = appendSection(out, 1, b)
	if len(m.imports) > 0 {
		b = uv(nil, len(m.imports))
		for _, im := range m.imports {
			b = gName(gName(b, im.module), im.name)
			b = append(b, im.kind)
			if im.kind == 0 {
				b = uv(b, int(im.typ))
			} else {
				b = append(b, im.global, map[bool]byte{false: 0, true: 1}[im.mutable])
			}
		}
		out = appendSection(out, 2, b)
	}
	b = uv(nil, len(m.funcs))
	for _, f := range m.funcs {
		b = uv(b, int(f.typ))
	}
	out = appendSection(out, 3, b)
	if len(m.table) > 0 {
		out = appendSection(out, 4, append([]byte{0x01, 0x70, 0x00}, uv(nil, len(m.table))...))
	}
	if m.memory > 0 {
		out = appendSection(out, 5, uv([]byte{0x01, 0x00}, int(m.memory)))
	}
	if len(m.globals) > 0 {
		b = uv(nil, len(m.globals))
		for _, g := range m.globals {
			b = append(b, g.typ, map[bool]byte{false: 0, true: 1}[g.mutable])
			if g.typ == tI64 {
				b = append(b, 0x42)
			} else {
				b = append(b, 0x41)
			}
			b = append(wasmbin.AppendSigned(b, g.init), 0x0b)
		}
		out = appendSection(out, 6, b)
	}
	if !m.noExport {
		exps := m.exports
		if m.memory > 0 {
			exps = append(exps, gExport{"memory", 2, 0})
		}
		b = uv(nil, len(exps))
		for _, e := range exps {
			b = append(gName(b, e.name), e.kind)
			b = uv(b, int(e.idx))
		}
		out = appendSection(out, 7, b)
	}
	if m.start >= 0 {
		out = appendSection(out, 8, uv(nil, int(m.start)))
	}
	if len(m.table) > 0 {
		b = append([]byte{0x01, 0x00, 0x41, 0x00, 0x0b}, uv(nil, len(m.table))...)
		for _, f := range m.table {
			b = uv(b, int(f))
		}
		out = appendSection(out, 9, b)
	}
	b = uv(nil, len(m.funcs))
	for _, f := range m.funcs {
		var fb []byte
		fb = uv(fb, len(f.locals))
		for _, l := range f.locals {
			fb = append(uv(fb, 1), l)
		}
		fb = append(fb, f.body...)
		b = append(uv(b, len(fb)), fb...)
	}
	return appendSection(out, 10, b)
}

func uv(b []byte, v int) []byte { return binary.AppendUvarint(b, uint64(v)) }

func gName(b []byte, s string) []byte { return append(uv(b, len(s)), s...) }

// cat joins instruction sequences.
func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func i32c(v int32) []byte { return wasmbin.AppendSigned([]byte{0x41}, int64(v)) }

func i64c(v int64) []byte { return wasmbin.AppendSigned([]byte{0x42}, v) }

func op(code byte, imm ...int) []byte {
	b := []byte{code}
	for _, v := range imm {
		b = uv(b, v)
	}
	return b
}
