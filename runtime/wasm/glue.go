package wasm

import (
	"encoding/binary"
	"strings"

	"github.com/capsulegate/capsulegate/internal/wasmbin"
	"github.com/capsulegate/capsulegate/runtime/wasm/component"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// glueImport is one item a glue module imports from module Module as Name and
// re-exports as Export.
type glueImport struct {
	Module, Name, Export string
	Kind                 component.CoreKind
	Func                 *component.CoreFuncType // functions: the signature
}

// buildGlue encodes a core module that imports each item and re-exports it: how a
// component's core instance made of other instances' items (an export bag, or one
// module's imports drawn from several sources) is realized on wazero, which resolves a
// module's imports by module name only. Tables are imported as funcref and memories
// with no bounds, the weakest types, so any table or memory matches; the importing
// module's own declaration is checked when it is instantiated against this one.
func buildGlue(items []glueImport) []byte {
	var types, imports, exports []byte
	var ntypes, nfuncs, ntables, nmems uint64
	for _, it := range items {
		imports = appendName(appendName(imports, it.Module), it.Name)
		var idx uint64
		switch it.Kind {
		case component.CoreFunc:
			types = append(types, 0x60)
			types = appendValTypes(types, it.Func.Params)
			types = appendValTypes(types, it.Func.Results)
			imports = append(imports, 0x00)
			imports = binary.AppendUvarint(imports, ntypes)
			ntypes++
			idx = nfuncs
			nfuncs++
		case component.CoreTable:
			imports = append(imports, 0x01, 0x70, 0x00, 0x00)
			idx = ntables
			ntables++
		case component.CoreMemory:
			imports = append(imports, 0x02, 0x00, 0x00)
			idx = nmems
			nmems++
		}
		exports = appendName(exports, it.Export)
		exports = append(exports, byte(it.Kind))
		exports = binary.AppendUvarint(exports, idx)
	}
	out := []byte("\x00asm\x01\x00\x00\x00")
	out = appendSection(out, 1, append(binary.AppendUvarint(nil, ntypes), types...))
	out = appendSection(out, 2, append(binary.AppendUvarint(nil, uint64(len(items))), imports...))
	out = appendSection(out, 7, append(binary.AppendUvarint(nil, uint64(len(items))), exports...))
	return out
}

func appendName(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendValTypes(b []byte, vs []abi.ValType) []byte {
	b = binary.AppendUvarint(b, uint64(len(vs)))
	for _, v := range vs {
		b = append(b, byte(v))
	}
	return b
}

// emptyImportModule replaces the empty import module name, which wit-component's fixup module
// uses and wazero refuses.
const emptyImportModule = "\x00"

// importModuleName is the name under which an import of module name is resolved.
func importModuleName(name string) string {
	if name == "" {
		return emptyImportModule
	}
	return name
}

// preview1Name is the preview1 function an import of wasi_snapshot_preview1 called name
// means: wit-component gives a core module's second import of one function a distinct
// name, "fd_write [v2]" (Go's wasip1 output imports fd_write twice), since a core
// instance's exports must be unique.
func preview1Name(name string) string {
	i := strings.LastIndex(name, " [v")
	if i < 0 || !strings.HasSuffix(name, "]") {
		return name
	}
	n := name[i+3 : len(name)-1]
	if n == "" || strings.Trim(n, "0123456789") != "" {
		return name
	}
	return name[:i]
}

// renameEmptyImports returns mod with every import from module "" importing from
// emptyImportModule instead, and every import of wasi_snapshot_preview1 named by its
// preview1Name, so the host resolves it (mod itself when nothing changes); ok is false
// when mod's import section cannot be read.
func renameEmptyImports(mod []byte) ([]byte, bool) {
	secs, ok := wasmbin.Sections(mod)
	if !ok {
		return nil, false
	}
	for i, s := range secs {
		if s.ID != 2 {
			continue
		}
		r := wasmbin.NewReader(mod[s.Start:s.End])
		n := r.U()
		out := binary.AppendUvarint(nil, n)
		changed := false
		for k := uint64(0); k < n && !r.Bad(); k++ {
			module := string(r.Bytes(r.U()))
			if module == "" {
				changed = true
			}
			out = appendName(out, importModuleName(module))
			name := string(r.Bytes(r.U()))
			if module == wasiP1 && preview1Name(name) != name {
				name, changed = preview1Name(name), true
			}
			out = appendName(out, name)
			rest := r.Rest()
			switch r.Byte() {
			case 0x00:
				r.U()
			case 0x01:
				r.Byte()
				r.Limits()
			case 0x02:
				r.Limits()
			case 0x03:
				r.Byte()
				r.Byte()
			default:
				return nil, false
			}
			out = append(out, rest[:len(rest)-len(r.Rest())]...)
		}
		if r.Bad() || len(r.Rest()) != 0 {
			return nil, false
		}
		if !changed {
			return mod, true
		}
		return wasmbin.Rebuild(mod, secs, map[int][]byte{i: out}), true
	}
	return mod, true
}
