package murmur

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// Test components are written in the component text format, in the shape wit-component
// gives wasm32-wasip2 guests (see component/testdata/tool.wat): the imported
// interfaces' instance types, a main core module, a shim module whose table the fixup
// module fills with the lowered functions (they need main's memory, which exists only
// after main), export bags, the lift of run and the world's export. The instance types
// are written from the host's own types (wasip2.Func.ABI, the murmur imports), so only
// the main module is hand-written per test.

// compImport is one function a test component imports and lowers; Type and Sig replace
// the host's function type and core signature (for functions the host does not serve,
// or a wrong type).
type compImport struct {
	iface, name, id string
	typ, sig        string
}

// compSpec is a test component.
type compSpec struct {
	world   string // "tool" or "script"
	version string // of the exported interface ("" for 0.1.0)
	imports []compImport
	main    string // the main module's body after the prelude (memory, cabi_realloc, print helpers)
	extra   string // component-level text added before the export
	runCore string // the core export the run lifts ("" for <iface>@<ver>#run)
	liftOpt string // extra canon lift options
}

// funcSig renders f's parameters and results in component text, resources by res.
func funcSig(f *abi.Func, res map[string]int) string {
	var b strings.Builder
	for j, p := range f.Params() {
		fmt.Fprintf(&b, " (param \"p%d\" ", j)
		writeType(&b, p, res)
		b.WriteString(")")
	}
	for _, r := range f.Results() {
		b.WriteString(" (result ")
		writeType(&b, r, res)
		b.WriteString(")")
	}
	return b.String()
}

// writeType writes t in component text with resources as instance type indexes.
func writeType(b *strings.Builder, t *abi.Type, res map[string]int) {
	switch t.Kind() {
	case abi.KindList:
		b.WriteString("(list ")
		writeType(b, t.Elem(), res)
		b.WriteString(")")
	case abi.KindOption:
		b.WriteString("(option ")
		writeType(b, t.Elem(), res)
		b.WriteString(")")
	case abi.KindResult:
		b.WriteString("(result")
		if ok := t.Cases()[0].Type; ok != nil {
			b.WriteString(" ")
			writeType(b, ok, res)
		}
		if e := t.Cases()[1].Type; e != nil {
			b.WriteString(" (error ")
			writeType(b, e, res)
			b.WriteString(")")
		}
		b.WriteString(")")
	case abi.KindTuple:
		b.WriteString("(tuple")
		for _, f := range t.Fields() {
			b.WriteString(" ")
			writeType(b, f.Type, res)
		}
		b.WriteString(")")
	case abi.KindRecord:
		b.WriteString("(record")
		for _, f := range t.Fields() {
			fmt.Fprintf(b, " (field %q ", f.Name)
			writeType(b, f.Type, res)
			b.WriteString(")")
		}
		b.WriteString(")")
	case abi.KindVariant:
		b.WriteString("(variant")
		for _, c := range t.Cases() {
			fmt.Fprintf(b, " (case %q", c.Name)
			if c.Type != nil {
				b.WriteString(" ")
				writeType(b, c.Type, res)
			}
			b.WriteString(")")
		}
		b.WriteString(")")
	case abi.KindEnum:
		b.WriteString("(enum")
		for _, c := range t.Cases() {
			fmt.Fprintf(b, " %q", c.Name)
		}
		b.WriteString(")")
	case abi.KindFlags:
		b.WriteString("(flags")
		for _, l := range t.Labels() {
			fmt.Fprintf(b, " %q", l)
		}
		b.WriteString(")")
	case abi.KindOwn:
		fmt.Fprintf(b, "(own %d)", res[t.Resource()])
	case abi.KindBorrow:
		fmt.Fprintf(b, "(borrow %d)", res[t.Resource()])
	default:
		b.WriteString(t.Named("").String())
	}
}

func collectResources(t *abi.Type, add func(string)) {
	if t == nil {
		return
	}
	switch t.Kind() {
	case abi.KindOwn, abi.KindBorrow:
		add(t.Resource())
	case abi.KindList, abi.KindOption:
		collectResources(t.Elem(), add)
	case abi.KindRecord, abi.KindTuple:
		for _, f := range t.Fields() {
			collectResources(f.Type, add)
		}
	case abi.KindResult, abi.KindVariant:
		for _, c := range t.Cases() {
			collectResources(c.Type, add)
		}
	}
}

// hostABI is the host's function for iface#name.
func hostABI(t *testing.T, iface, name string) *abi.Func {
	if strings.HasPrefix(iface, "wasi:") {
		f, ok := probeHost.Func(iface, name)
		if !ok {
			t.Fatalf("the host serves no %s#%s", iface, name)
		}
		return f.ABI()
	}
	i, _, _ := strings.Cut(iface, "@")
	f, ok := findHostFunc(componentImports[i], name)
	if !ok {
		t.Fatalf("the host serves no %s#%s", iface, name)
	}
	return f.Func
}

func coreSig(f *abi.Func) string {
	p, r := f.ImportSignature()
	var b strings.Builder
	if len(p) > 0 {
		b.WriteString("(param")
		for _, v := range p {
			b.WriteString(" " + v.String())
		}
		b.WriteString(")")
	}
	if len(r) > 0 {
		b.WriteString(" (result")
		for _, v := range r {
			b.WriteString(" " + v.String())
		}
		b.WriteString(")")
	}
	return b.String()
}

const mainPrelude = `
    (memory (export "memory") 4)
    (global $heap (mut i32) (i32.const 0x20000))
    (func $realloc (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
      (local $p i32)
      (local.set $p (i32.and (i32.add (global.get $heap) (i32.sub (local.get 2) (i32.const 1)))
                             (i32.sub (i32.const 0) (local.get 2))))
      (global.set $heap (i32.add (local.get $p) (local.get 3)))
      (local.get $p))
`

// printHelpers are $print and $eprint (ptr, len), for mains importing $get_stdout,
// $get_stderr and $bwf (output-stream.blocking-write-and-flush).
const printHelpers = `
    (global $stdout (mut i32) (i32.const -1))
    (global $stderr (mut i32) (i32.const -1))
    (func $print (param i32 i32)
      (if (i32.lt_s (global.get $stdout) (i32.const 0)) (then (global.set $stdout (call $get_stdout))))
      (call $bwf (global.get $stdout) (local.get 0) (local.get 1) (i32.const 0x80)))
    (func $eprint (param i32 i32)
      (if (i32.lt_s (global.get $stderr) (i32.const 0)) (then (global.set $stderr (call $get_stderr))))
      (call $bwf (global.get $stderr) (local.get 0) (local.get 1) (i32.const 0x80)))
`

// printImports are what printHelpers need.
var printImports = []compImport{
	{iface: "wasi:cli/stdout@0.2.6", name: "get-stdout", id: "get_stdout"},
	{iface: "wasi:cli/stderr@0.2.6", name: "get-stderr", id: "get_stderr"},
	{iface: "wasi:io/streams@0.2.6", name: "[method]output-stream.blocking-write-and-flush", id: "bwf"},
}

const toolTypes = `
  (type $input (record (field "data" (option string)) (field "log-path" (option string))))
  (type $status (enum "passed" "failed" "error"))
  (type $output (record (field "status" $status) (field "summary" (option string)) (field "data" (option string))
    (field "data-path" (option string)) (field "truncated" bool) (field "metadata" (list (tuple string string)))))
`

// toolTypes02 are toolTypes at murmur:tool/run 0.2: the result adds attachments.
const toolTypes02 = `
  (type $input (record (field "data" (option string)) (field "log-path" (option string))))
  (type $status (enum "passed" "failed" "error"))
  (type $attachment (record (field "media-type" string) (field "path" string)))
  (type $output (record (field "status" $status) (field "summary" (option string)) (field "data" (option string))
    (field "data-path" (option string)) (field "truncated" bool) (field "metadata" (list (tuple string string)))
    (field "attachments" (list $attachment))))
`

// wat renders the component.
func (s compSpec) wat(t *testing.T) string {
	var b strings.Builder
	b.WriteString("(component\n")
	// One instance import per interface, in order of first use.
	var ifaces []string
	byIface := map[string][]int{}
	for i, imp := range s.imports {
		if _, ok := byIface[imp.iface]; !ok {
			ifaces = append(ifaces, imp.iface)
		}
		byIface[imp.iface] = append(byIface[imp.iface], i)
	}
	sigs := make([]string, len(s.imports))
	for k, iface := range ifaces {
		res := map[string]int{}
		var decl strings.Builder
		var funcs []string
		for _, i := range byIface[iface] {
			imp := s.imports[i]
			if imp.typ != "" {
				sigs[i] = imp.sig
				funcs = append(funcs, fmt.Sprintf("    (export %q (func %s))\n", imp.name, imp.typ))
				continue
			}
			f := hostABI(t, iface, imp.name)
			sigs[i] = coreSig(f)
			add := func(r string) {
				if _, ok := res[r]; !ok {
					res[r] = len(res)
					fmt.Fprintf(&decl, "    (export %q (type (sub resource)))\n", r)
				}
			}
			for _, p := range f.Params() {
				collectResources(p, add)
			}
			for _, r := range f.Results() {
				collectResources(r, add)
			}
			funcs = append(funcs, fmt.Sprintf("    (export %q (func%s))\n", imp.name, funcSig(f, res)))
		}
		fmt.Fprintf(&b, "  (type $ty%d (instance\n%s%s  ))\n", k, decl.String(), strings.Join(funcs, ""))
		fmt.Fprintf(&b, "  (import %q (instance $imp%d (type $ty%d)))\n", iface, k, k)
	}
	// The main module.
	b.WriteString("  (core module $main\n")
	for i, imp := range s.imports {
		fmt.Fprintf(&b, "    (import %q %q (func $%s %s))\n", imp.iface, imp.name, imp.id, sigs[i])
	}
	b.WriteString(mainPrelude)
	b.WriteString(s.main)
	b.WriteString("  )\n")
	n := len(s.imports)
	if n > 0 {
		b.WriteString("  (core module $shim\n")
		for i := range s.imports {
			fmt.Fprintf(&b, "    (type $t%d (func %s))\n", i, sigs[i])
		}
		fmt.Fprintf(&b, "    (table (export \"$imports\") %d %d funcref)\n", n, n)
		for i := range s.imports {
			np := strings.Count(strings.SplitN(sigs[i], "(result", 2)[0], "i32") + strings.Count(strings.SplitN(sigs[i], "(result", 2)[0], "i64")
			fmt.Fprintf(&b, "    (func (export \"%d\") (type $t%d)", i, i)
			for j := 0; j < np; j++ {
				fmt.Fprintf(&b, " local.get %d", j)
			}
			fmt.Fprintf(&b, " i32.const %d call_indirect (type $t%d))\n", i, i)
		}
		b.WriteString("  )\n  (core module $fixup\n")
		for i := range s.imports {
			fmt.Fprintf(&b, "    (import \"\" \"%d\" (func $f%d %s))\n", i, i, sigs[i])
		}
		fmt.Fprintf(&b, "    (import \"\" \"$imports\" (table %d %d funcref))\n    (elem (i32.const 0) func", n, n)
		for i := range s.imports {
			fmt.Fprintf(&b, " $f%d", i)
		}
		b.WriteString("))\n  (core instance $shim-i (instantiate $shim))\n")
		for i := range s.imports {
			fmt.Fprintf(&b, "  (alias core export $shim-i \"%d\" (core func $s%d))\n", i, i)
		}
	}
	var with []string
	for k, iface := range ifaces {
		fmt.Fprintf(&b, "  (core instance $bag%d", k)
		for _, i := range byIface[iface] {
			fmt.Fprintf(&b, " (export %q (func $s%d))", s.imports[i].name, i)
		}
		b.WriteString(")\n")
		with = append(with, fmt.Sprintf("(with %q (instance $bag%d))", iface, k))
	}
	fmt.Fprintf(&b, "  (core instance $main-i (instantiate $main %s))\n", strings.Join(with, " "))
	b.WriteString("  (alias core export $main-i \"memory\" (core memory $memory))\n")
	b.WriteString("  (alias core export $main-i \"cabi_realloc\" (core func $realloc))\n")
	if n > 0 {
		for k, iface := range ifaces {
			for _, i := range byIface[iface] {
				fmt.Fprintf(&b, "  (alias export $imp%d %q (func $c%d))\n", k, s.imports[i].name, i)
				fmt.Fprintf(&b, "  (core func $l%d (canon lower (func $c%d) (memory $memory) (realloc $realloc)))\n", i, i)
			}
		}
		b.WriteString("  (alias core export $shim-i \"$imports\" (core table $table))\n  (core instance $fixup-args (export \"$imports\" (table $table))")
		for i := range s.imports {
			fmt.Fprintf(&b, " (export \"%d\" (func $l%d))", i, i)
		}
		b.WriteString(")\n  (core instance (instantiate $fixup (with \"\" (instance $fixup-args))))\n")
	}
	iface, ver := "murmur:capsule/run", s.version
	if s.world == "tool" {
		iface = "murmur:tool/run"
	}
	if ver == "" {
		ver = "0.1.0"
	}
	export := iface + "@" + ver + "#run"
	core := s.runCore
	if core == "" {
		core = export
	}
	fmt.Fprintf(&b, "  (alias core export $main-i %q (core func $run-core))\n", core)
	b.WriteString(s.extra)
	if s.world == "tool" {
		types, attachment := toolTypes, ""
		if strings.HasPrefix(ver, "0.2.") {
			types, attachment = toolTypes02, ` (export "attachment" (type $attachment))`
		}
		b.WriteString(types)
		fmt.Fprintf(&b, "  (alias core export $main-i \"cabi_post_%s\" (core func $post))\n", export)
		fmt.Fprintf(&b, "  (func $run (param \"input\" $input) (result $output) (canon lift (core func $run-core) (memory $memory) (realloc $realloc) (post-return $post)%s))\n", s.liftOpt)
		fmt.Fprintf(&b, "  (instance $e (export \"tool-input\" (type $input)) (export \"status\" (type $status))%s (export \"tool-result\" (type $output)) (export \"run\" (func $run)))\n", attachment)
	} else {
		fmt.Fprintf(&b, "  (func $run (canon lift (core func $run-core)%s))\n", s.liftOpt)
		b.WriteString("  (instance $e (export \"run\" (func $run)))\n")
	}
	fmt.Fprintf(&b, "  (export \"%s@%s\" (instance $e))\n)\n", iface, ver)
	return b.String()
}

// build assembles the component in a temporary folder.
func (s compSpec) build(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.wat")
	if err := os.WriteFile(path, []byte(s.wat(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	return watbuild.Wasm(t, path)
}
