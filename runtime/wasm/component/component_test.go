package component

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/upstream"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/wit/abi"
)

func mustPlan(t *testing.T, wat string) (*Component, *Plan) {
	t.Helper()
	c, err := Parse(watbuild.Wasm(t, wat))
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := p.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	return c, p
}

func importNamed(t *testing.T, w World, name string) WorldItem {
	t.Helper()
	for _, it := range w.Imports {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("no import %q", name)
	return WorldItem{}
}

func funcNamed(t *testing.T, it WorldItem, name string) NamedFunc {
	t.Helper()
	for _, f := range it.Funcs {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("%s has no function %q", it.Name, name)
	return NamedFunc{}
}

// TestToolPlan checks the plan of a component in wit-component's shape: imports with
// versions, the shim/main/fixup instantiations with every core import resolved, the
// lowerings with main's memory, the lift's options and the re-exported function.
func TestToolPlan(t *testing.T) {
	c, p := mustPlan(t, "testdata/tool.wat")
	if len(c.Modules) != 3 || len(c.Components) != 1 || len(c.Imports) != 3 || len(c.Exports) != 1 {
		t.Fatalf("modules %d components %d imports %d exports %d", len(c.Modules), len(c.Components), len(c.Imports), len(c.Exports))
	}
	streams := importNamed(t, p.World, "wasi:io/streams@0.2.6")
	if streams.Interface != "wasi:io/streams" || streams.Version != "0.2.6" || streams.Sort != SortInstance {
		t.Errorf("streams import %+v", streams)
	}
	if got := strings.Join(streams.Resources, ","); got != "output-stream,error" {
		t.Errorf("streams resources %q", got)
	}
	write := funcNamed(t, streams, "[method]output-stream.write")
	if got, want := write.Type.WIT(), "func(self: borrow<output-stream>, contents: list<u8>) -> result<_, stream-error>"; got != want {
		t.Errorf("write renders %q, want %q", got, want)
	}
	if got, want := write.Type.Result.Err.Definition(), "variant { last-operation-failed(own<error>), closed }"; got != want {
		t.Errorf("stream-error is %q, want %q", got, want)
	}
	f, err := write.Type.Func()
	if err != nil {
		t.Fatal(err)
	}
	if ps, rs := f.ImportSignature(); len(ps) != 4 || len(rs) != 0 {
		t.Errorf("write's import signature %v -> %v", ps, rs)
	}
	// The error resource inside stream-error is wasi:io/error's, not a copy of it.
	errRes := write.Type.Result.Err.Cases[0].Type.Target.Resource
	if errRes.Interface != "wasi:io/error@0.2.6" || errRes.Name != "error" {
		t.Errorf("stream-error's error resource is %+v", errRes)
	}

	var kinds []string
	for _, s := range p.Steps {
		kinds = append(kinds, s.Kind.String())
	}
	want := "instantiate resource.drop core-exports lower core-exports instantiate lower core-exports instantiate lift"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("steps %s\nwant  %s", got, want)
	}
	mainStep := p.Steps[5]
	if mainStep.Module != 1 || mainStep.Instance != 3 || len(mainStep.Imports) != 3 {
		t.Fatalf("main instantiation %+v", mainStep)
	}
	byName := map[string]CoreItem{}
	for _, a := range mainStep.Imports {
		byName[a.Module+" "+a.Name] = a.Item
	}
	if it := byName["wasi:io/streams@0.2.0 [method]output-stream.write"]; it.Instance != 0 || it.Name != "0" {
		t.Errorf("write comes from %s, want the shim's export \"0\"", it)
	}
	if it := byName["wasi:cli/stdout@0.2.0 get-stdout"]; it.Instance != -1 || it.Func != 1 {
		t.Errorf("get-stdout comes from %s, want core func #1", it)
	}
	lower := p.Steps[6]
	if lower.Callee != (FuncRef{Import: "wasi:io/streams@0.2.6", Name: "[method]output-stream.write", Lift: -1}) {
		t.Errorf("lower calls %s", lower.Callee)
	}
	if lower.Options.Memory == nil || *lower.Options.Memory != (CoreItem{Kind: CoreMemory, Instance: 3, Name: "memory", Func: -1}) {
		t.Errorf("lower's memory %v", lower.Options.Memory)
	}
	fixup := p.Steps[8]
	if fixup.Imports[1].Item != (CoreItem{Kind: CoreTable, Instance: 0, Name: "$imports", Func: -1}) || fixup.Imports[0].Item.Func != 2 {
		t.Errorf("fixup imports %+v", fixup.Imports)
	}
	lift := p.Steps[9]
	if lift.Core != (CoreItem{Kind: CoreFunc, Instance: 3, Name: "murmur:tool/run@0.1.0#run", Func: -1}) ||
		lift.Options.Realloc == nil || lift.Options.Realloc.Name != "cabi_realloc" ||
		lift.Options.PostReturn == nil || lift.Options.PostReturn.Name != "cabi_post_murmur:tool/run@0.1.0#run" ||
		lift.Options.StringEncoding != "utf8" || lift.Sig.String() != "func(i32 i32) -> (i32)" {
		t.Errorf("lift %s sig %s", lift, lift.Sig)
	}

	if len(p.World.Exports) != 1 {
		t.Fatalf("exports %+v", p.World.Exports)
	}
	exp := p.World.Exports[0]
	if exp.Interface != "murmur:tool/run" || exp.Version != "0.1.0" || len(exp.Funcs) != 1 {
		t.Fatalf("export %+v", exp)
	}
	run := exp.Funcs[0]
	if run.Name != "run" || run.Ref != (FuncRef{Lift: 0}) || run.Type.WIT() != "func(input: tool-input) -> tool-result" {
		t.Errorf("run: %s %s %s", run.Name, run.Ref, run.Type.WIT())
	}
	if !Equal(run.Type, lift.Type) {
		t.Errorf("the exported type %s differs from the lifted %s", run.Type.Definition(), lift.Type.Definition())
	}
	a, err := run.Type.Fields[0].Type.ABI()
	if err != nil || a.String() != "tool-input" || a.Fields()[0].Type != abi.String {
		t.Errorf("tool-input as ABI: %v %v", a, err)
	}
}

// TestResourcePlan checks a component defining a resource: its destructor, the
// built-ins for it and for an imported resource, and handles in exported functions.
func TestResourcePlan(t *testing.T) {
	_, p := mustPlan(t, "testdata/resource.wat")
	var def, newS, drop, dropBlob *Step
	for i := range p.Steps {
		s := &p.Steps[i]
		switch {
		case s.Kind == StepDefineResource:
			def = s
		case s.Kind == StepResourceNew:
			newS = s
		case s.Kind == StepResourceDrop && s.Resource.Defined >= 0:
			drop = s
		case s.Kind == StepResourceDrop:
			dropBlob = s
		}
	}
	if def == nil || newS == nil || drop == nil || dropBlob == nil {
		t.Fatalf("missing resource steps in %v", p.Steps)
	}
	if def.Resource != (ResourceRef{Name: "counter", Defined: 0}) || def.Dtor == nil || def.Dtor.Name != "dtor" {
		t.Errorf("define %s", def)
	}
	if newS.Resource != def.Resource || drop.Resource != def.Resource || newS.Sig.String() != "func(i32) -> (i32)" {
		t.Errorf("new %s drop %s", newS, drop)
	}
	if dropBlob.Resource != (ResourceRef{Import: "blob", Name: "blob", Defined: -1}) {
		t.Errorf("blob drop %s", dropBlob)
	}
	got := map[string]string{}
	for _, e := range p.World.Exports {
		if e.Sort == SortFunc {
			got[e.Name] = e.Type.WIT()
		}
	}
	if got["[constructor]counter"] != "func() -> own<counter>" || got["[method]counter.get"] != "func(self: borrow<counter>) -> u32" {
		t.Errorf("exports %v", got)
	}
	blob := importNamed(t, p.World, "blob")
	if blob.Sort != SortType || blob.Type.Kind != KindResource {
		t.Errorf("blob import %+v", blob)
	}
	size := importNamed(t, p.World, "blob-size")
	f, err := size.Type.Func()
	if err != nil {
		t.Fatal(err)
	}
	if ps, rs := f.ImportSignature(); len(ps) != 1 || ps[0] != abi.I32 || len(rs) != 1 || rs[0] != abi.I64 {
		t.Errorf("blob-size signature %v -> %v", ps, rs)
	}
}

// TestWIT renders types the way a host compares them.
func TestWIT(t *testing.T) {
	res := &Type{Kind: KindResource, Resource: &Resource{Name: "descriptor"}}
	u8 := primTypes[KindU8]
	str := primTypes[KindString]
	errCode := (&Type{Kind: KindEnum, Labels: []string{"access", "again"}}).named("error-code")
	tests := []struct {
		typ       *Type
		wit, defn string
	}{
		{&Type{Kind: KindList, Elem: u8}, "list<u8>", ""},
		{&Type{Kind: KindResult}, "result", ""},
		{&Type{Kind: KindResult, OK: str}, "result<string>", ""},
		{&Type{Kind: KindResult, Err: errCode}, "result<_, error-code>", ""},
		{&Type{Kind: KindOption, Elem: &Type{Kind: KindOwn, Target: res}}, "option<own<descriptor>>", ""},
		{&Type{Kind: KindTuple, Elems: []*Type{str, str}}, "tuple<string, string>", ""},
		{errCode, "error-code", "enum { access, again }"},
		{&Type{Kind: KindFlags, Labels: []string{"read", "write"}}, "flags { read, write }", ""},
		{&Type{Kind: KindFunc, Fields: []Field{{"self", &Type{Kind: KindBorrow, Target: res}}, {"path", str}},
			Result: &Type{Kind: KindResult, OK: &Type{Kind: KindOwn, Target: res}, Err: errCode}},
			"func(self: borrow<descriptor>, path: string) -> result<own<descriptor>, error-code>", ""},
	}
	for _, tt := range tests {
		if got := tt.typ.WIT(); got != tt.wit {
			t.Errorf("WIT %q, want %q", got, tt.wit)
		}
		if tt.defn != "" && tt.typ.Definition() != tt.defn {
			t.Errorf("Definition %q, want %q", tt.typ.Definition(), tt.defn)
		}
	}
	if i, v := SplitName("run"); i != "run" || v != "" {
		t.Error("a plain name split")
	}
	if i, v := SplitName("wasi:http/types@0.2.12"); i != "wasi:http/types" || v != "0.2.12" {
		t.Errorf("split %q %q", i, v)
	}
}

func code(err error) string { return errs.Code(err) }

// TestBadComponents runs one component per refusal class and checks the code, that the
// message names what is wrong, and that the error says where (path and offset).
func TestBadComponents(t *testing.T) {
	tests := []struct {
		file, code, msg string
	}{
		{"idx-core-func", CodeIndex, "core func index 5 out of range"},
		{"idx-core-table", CodeIndex, "core table index 0"},
		{"idx-core-memory", CodeIndex, "core memory index 3"},
		{"idx-core-global", CodeIndex, "core global index 2"},
		{"idx-core-type", CodeIndex, "core type index 4"},
		{"idx-core-module", CodeIndex, "core module index 2"},
		{"idx-core-instance", CodeIndex, "core instance index 3"},
		{"idx-func", CodeIndex, "func index 3"},
		{"idx-type", CodeIndex, "type index 7"},
		{"idx-instance", CodeIndex, "instance index 4"},
		{"idx-component", CodeIndex, "component index 1"},
		{"idx-outer", CodeIndex, "outer type index 9"},
		{"alias-mismatch", CodeType, `export "x" of instance 0 is a type, not a func`},
		{"alias-missing", CodeType, `instance 0 has no export "y"`},
		{"lift-not-func", CodeType, "not a function type"},
		{"lift-sig", CodeType, "needs func(i32) -> ()"},
		{"lower-no-memory", CodeType, "names no memory option"},
		{"missing-arg", CodeType, `imports from "env", which no argument supplies`},
		{"resource-new-imported", CodeType, "only to resources the component defines"},
		{"own-not-resource", CodeType, "not a resource"},
		{"canon-async", CodeUnsupported, "waitable-set.new"},
		{"stream-type", CodeUnsupported, "stream and future"},
		{"value-import", CodeValue, "value imports"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, err := Parse(watbuild.Wasm(t, filepath.Join("testdata", "bad", tt.file+".wat")))
			checkErr(t, err, tt.code, tt.msg)
		})
	}
}

func checkErr(t *testing.T, err error, wantCode, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want %s", wantCode)
	}
	var e *errs.Error
	if !errors.As(err, &e) {
		t.Fatalf("%v is not an *errs.Error", err)
	}
	if e.Code != wantCode || !strings.Contains(e.Msg, msg) {
		t.Fatalf("got %v\nwant %s containing %q", err, wantCode, msg)
	}
	if !strings.HasPrefix(e.Pos, "offset ") || !strings.HasPrefix(e.Path, "component") {
		t.Errorf("no position or path: pos %q path %q", e.Pos, e.Path)
	}
	t.Log(err)
}

// leb encodes n as unsigned LEB128.
func leb(n uint64) []byte {
	var b []byte
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

var header = []byte{0, 'a', 's', 'm', 0x0d, 0, 1, 0}

func section(id byte, content []byte) []byte {
	return append(append([]byte{id}, leb(uint64(len(content)))...), content...)
}

func comp(sections ...[]byte) []byte {
	b := append([]byte(nil), header...)
	for _, s := range sections {
		b = append(b, s...)
	}
	return b
}

// TestBinaryErrors covers refusals that text cannot express: headers, truncation,
// unknown sections, section kinds refused outright, and inputs built to exhaust memory
// or time (huge counts, exponentially shared types, deep nesting).
func TestBinaryErrors(t *testing.T) {
	tool := watbuild.Wasm(t, "testdata/tool.wat")
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), tool...)) }

	// A chain of tuples each holding the previous twice expands to 2^n parts.
	var types []byte
	types = append(types, leb(30)...)
	types = append(types, 0x6f, 2, 0x79, 0x79)
	for i := 1; i < 30; i++ {
		types = append(types, 0x6f, 2)
		types = append(types, leb(uint64(i-1))...)
		types = append(types, leb(uint64(i-1))...)
	}
	nested := comp()
	for i := 0; i < maxDepth+2; i++ {
		nested = comp(section(4, nested))
	}

	tests := []struct {
		name string
		in   []byte
		code string
		msg  string
	}{
		{"empty", nil, CodeHeader, "no \\0asm magic"},
		{"core module", []byte("\x00asm\x01\x00\x00\x00"), CodeHeader, "a core module"},
		{"version", mutate(func(b []byte) []byte { b[4] = 0x0c; return b }), CodeHeader, "version"},
		{"layer", mutate(func(b []byte) []byte { b[6] = 2; return b }), CodeHeader, "unknown layer"},
		{"truncated", tool[:len(tool)/2], CodeMalformed, "exceeds"},
		{"truncated header of a section", comp([]byte{7}), CodeMalformed, "unexpected end"},
		{"unknown section", comp(section(13, nil)), CodeUnknown, "unknown section id 13"},
		{"value section", comp(section(12, []byte{0})), CodeValue, "value definitions"},
		{"start section", comp(section(9, []byte{0, 0, 0})), CodeValue, "start definitions"},
		{"huge count", comp(section(7, []byte{0xff, 0xff, 0xff, 0xff, 0x0f})), CodeMalformed, "count 4294967295 exceeds"},
		{"long LEB", comp(section(7, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00})), CodeMalformed, "longer than 5 bytes"},
		{"trailing bytes", comp(section(7, []byte{1, 0x73, 0x00})), CodeMalformed, "unread bytes"},
		{"unknown type", comp(section(7, []byte{1, 0x20})), CodeUnknown, "unknown type opcode 0x20"},
		{"bad utf-8 name", comp(section(10, []byte{1, 0, 1, 0xff, 1, 0})), CodeMalformed, "not valid UTF-8"},
		{"type size", comp(section(7, types)), CodeLimit, "expands to more than"},
		{"nesting", nested, CodeLimit, "nested more than"},
		{"flags over 32", comp(section(7, append([]byte{1, 0x6e, 33}, bytes.Repeat([]byte{1, 'a'}, 33)...))), CodeType, "at most 32"},
		{"empty record", comp(section(7, []byte{1, 0x72, 0})), CodeType, "record without fields"},
		{"borrow in result", comp(section(7, []byte{3, 0x3f, 0x7f, 0x00, 0x68, 0x00, 0x40, 0x00, 0x00, 0x01})), CodeType, "holds a borrow"},
		{"async func type", comp(section(7, []byte{1, 0x43, 0, 1, 0})), CodeUnsupported, "async function"},
		{"core module truncated", comp(section(1, []byte("\x00asm\x01\x00\x00\x00\x01\x05"))), CodeMalformed, "exceeds"},
		{"core module GC type", comp(section(1, []byte("\x00asm\x01\x00\x00\x00\x01\x03\x01\x5f\x00"))), CodeUnsupported, "GC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.in)
			checkErr(t, err, tt.code, tt.msg)
		})
	}
}

// TestPlanRefusals covers graphs that parse but cannot be planned.
func TestPlanRefusals(t *testing.T) {
	// (import "m" (core module (type 0))) with an empty module type.
	modImport := comp(section(3, []byte{1, 0x50, 0}), section(10, []byte{1, 0, 1, 'm', 0x00, 0x11, 0}))
	c, err := Parse(modImport)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Plan()
	checkErr(t, err, CodePlan, "only instances, functions and types can be imported")
}

// TestFixtures parses and plans every component upstream Murmur ships, from the mirror
// of its repository $MURMUR_MIRROR names (skipped, saying so, where there is none).
func TestFixtures(t *testing.T) {
	repo := upstream.Mirror(t)
	out, err := exec.Command("git", "-C", repo, "ls-tree", "-r", "--name-only", "HEAD").Output()
	if err != nil {
		t.Skipf("git ls-tree: %v", err)
	}
	n := 0
	for _, name := range strings.Fields(string(out)) {
		if !strings.HasSuffix(name, ".wasm") {
			continue
		}
		t.Run(filepath.Base(name), func(t *testing.T) {
			b, err := exec.Command("git", "-C", repo, "show", "HEAD:"+name).Output()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, []byte("\x00asm")) {
				t.Skipf("%s is not WebAssembly (%d bytes)", name, len(b))
			}
			n++
			c, err := Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			p, err := c.Plan()
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range p.World.Imports {
				if strings.HasPrefix(imp.Name, "wasi:") && !strings.HasPrefix(imp.Version, "0.2.") {
					t.Errorf("import %s: version %q", imp.Name, imp.Version)
				}
				for _, f := range imp.Funcs {
					if _, err := f.Type.Func(); err != nil {
						t.Errorf("%s %s: %v", imp.Name, f.Name, err)
					}
				}
			}
			if len(p.World.Exports) == 0 || !strings.HasSuffix(p.World.Exports[0].Interface, "/run") {
				t.Errorf("exports %+v", p.World.Exports)
			}
			var b2 strings.Builder
			_ = p.WriteSummary(&b2)
			t.Log("\n" + b2.String())
		})
	}
}

// FuzzParse feeds mutated components to Parse and Plan: neither may panic, and every
// refusal carries an E-COMP code.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.wat")
	bad, _ := filepath.Glob("testdata/bad/*.wat")
	for _, name := range append(files, bad...) {
		f.Add(watbuild.Wasm(f, name))
	}
	f.Add(comp(section(7, []byte{1, 0x6f, 2, 0x79, 0x79})))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			if !strings.HasPrefix(code(err), "E-COMP-") {
				t.Fatalf("error without a code: %v", err)
			}
			return
		}
		p, err := c.Plan()
		if err != nil {
			if !strings.HasPrefix(code(err), "E-COMP-") {
				t.Fatalf("plan error without a code: %v", err)
			}
			return
		}
		_ = p.WriteSummary(io.Discard)
		for _, it := range append(p.World.Imports, p.World.Exports...) {
			for _, fn := range it.Funcs {
				if fn.Type != nil {
					_, _ = fn.Type.Func()
				}
			}
		}
	})
}

// TestFlat checks the flat counts and memory needs Parse records on each type against
// the canonical ABI's own flattening.
func TestFlat(t *testing.T) {
	_, p := mustPlan(t, "testdata/tool.wat")
	for _, s := range p.Steps {
		if s.Kind != StepLower && s.Kind != StepLift {
			continue
		}
		for _, f := range s.Type.Fields {
			a := f.Type.abi()
			fn := abi.NewFunc([]*abi.Type{a}, nil)
			ps, _ := fn.ExportSignature()
			if f.Type.flat <= abi.MaxFlatParams && len(ps) != f.Type.flat {
				t.Errorf("%s: flat %d, abi %d", f.Type.WIT(), f.Type.flat, len(ps))
			}
		}
	}
	str := primTypes[KindString]
	if str.flat != 2 || !str.buffer || primTypes[KindU64].flat != 1 {
		t.Error("primitive flat counts")
	}
}
