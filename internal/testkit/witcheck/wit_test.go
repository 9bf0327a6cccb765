package witcheck

import (
	"strings"
	"testing"
)

const everything = `package ex:demo@1.2.0-rc.1;

/* a block /* nested */ comment */
interface types {
  /// a doc comment
  flags perms { read, write, }
  type handle = u32;
  enum kind { a, %record }
  record rec { perms: perms, h: handle, pairs: list<tuple<string, u32>>, r: result<_, string>, s: result, t: result<u8> }
  variant shape { circle(f64), empty, }
  resource blob {
    constructor(size: u64);
    read: func(n: u32) -> list<u8>;
    open: static func(name: string) -> own<blob>;
  }
  take: func(b: borrow<blob>, k: kind);
}

interface user {
  use types.{rec, kind as sort};
  use ex:demo/types@1.2.0-rc.1.{shape};
  f: func(r: rec, s: sort) -> option<shape>;
}

world w {
  import types;
  export ex:demo/user@1.2.0-rc.1;
  import other:pkg/iface@0.1.0;
}
`

func TestParseEverything(t *testing.T) {
	c, err := Load([]Source{{Path: "ex.wit", Data: []byte(everything)}})
	if err != nil {
		t.Fatal(err)
	}
	f := c.Files[0]
	if got := f.Package.String(); got != "ex:demo@1.2.0-rc.1" {
		t.Errorf("package %s", got)
	}
	types := c.Interface("ex:demo/types@1.2.0-rc.1")
	if types == nil || len(types.Types) != 6 || len(types.Funcs) != 1 {
		t.Fatalf("interface types: %+v", types)
	}
	var got []string
	for _, d := range types.Types {
		got = append(got, d.Label())
	}
	want := "flags ex:demo/types.perms type ex:demo/types.handle enum ex:demo/types.kind record ex:demo/types.rec variant ex:demo/types.shape resource ex:demo/types.blob"
	if strings.Join(got, " ") != want {
		t.Errorf("types %q, want %q", strings.Join(got, " "), want)
	}
	rec := types.Types[3]
	var fields []string
	for _, m := range rec.Fields {
		fields = append(fields, m.Name+":"+m.Type.String())
	}
	if s := strings.Join(fields, " "); s != "perms:perms h:handle pairs:list<tuple<string, u32>> r:result<_, string> s:result<_, _> t:result<u8, _>" {
		t.Errorf("rec fields %s", s)
	}
	if rec.Fields[1].Type.Def != types.Types[1] {
		t.Error("rec.h does not resolve to the alias handle")
	}
	if k := types.Types[2]; k.Cases[1].Name != "record" {
		t.Errorf("escaped case %q", k.Cases[1].Name)
	}
	if b := types.Types[5]; len(b.Funcs) != 3 || b.Funcs[2].Result.Args[0].Def != b {
		t.Errorf("resource blob: %+v", b.Funcs)
	}
	user := c.Interface("ex:demo/user@1.2.0-rc.1")
	fn := user.Funcs[0]
	if fn.Params[1].Type.Def != types.Types[2] || fn.Result.Args[0].Def != types.Types[4] {
		t.Error("user.f's types do not resolve through the uses")
	}
	if w := f.Worlds[0]; len(w.Items) != 3 || !w.Items[1].Export || w.Items[2].Path.String() != "other:pkg/iface@0.1.0" {
		t.Errorf("world %+v", w.Items)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"no package", "interface i {}", "x.wit:1:1: want the package declaration first"},
		{"gate", "package a:b;\n@since(version = 1.0.0)\ninterface i {}", "x.wit:2:1: feature gates"},
		{"gate inside", "package a:b;\ninterface i {\n  @unstable(feature = x)\n  f: func();\n}", "x.wit:3:3: feature gates"},
		{"future", "package a:b;\ninterface i { f: func() -> future<u8>; }", "x.wit:2:28: future types are not supported"},
		{"async", "package a:b;\ninterface i { f: async func(); }", "async functions are not supported"},
		{"named results", "package a:b;\ninterface i { f: func() -> (a: u8); }", "named results"},
		{"fixed list", "package a:b;\ninterface i { type t = list<u8, 4>; }", "fixed-size lists (list<T, N>) are not supported"},
		{"include", "package a:b;\nworld w { include other; }", "want import or export in world w"},
		{"inline import", "package a:b;\nworld w { import f: func(); }", "inline world items"},
		{"top-level use", "package a:b;\nuse a:c/d;", "top-level use"},
		{"nested package", "package a:b { }", "nested package blocks"},
		{"unterminated comment", "package a:b;\n/* open", "x.wit:2:1: unterminated block comment"},
		{"bad identifier", "package a:b;\ninterface i { record r { a--b: u8 } }", "not a WIT identifier"},
		{"missing semicolon", "package a:b;\ninterface i { f: func() }", `want ";", found "}"`},
		{"empty enum", "package a:b;\ninterface i { enum e { } }", "enum e has no cases"},
		{"old float", "package a:b;\ninterface i { type t = float32; }", "write f32"},
		{"unclosed interface", "package a:b;\ninterface i { f: func();", "interface i is not closed"},
		{"unknown type", "package a:b;\ninterface i { record r { a: nope } }", "x.wit:2:29: type nope is neither defined"},
		{"unknown use", "package a:b;\ninterface i { use c:d/e@1.0.0.{t}; }", "interface c:d/e@1.0.0 is not among the files loaded"},
		{"used name missing", "package a:b;\ninterface j { }\ninterface i { use j.{t}; }", "interface a:b/j has no type t"},
		{"duplicate field", "package a:b;\ninterface i { record r { a: u8, a: u8 } }", "has a twice"},
		{"own of a record", "package a:b;\ninterface i { record r { } type t = own<r>; }", "r is not a resource"},
		{"local world import", "package a:b;\nworld w { import nope; }", "interface a:b/nope is not among the files loaded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]Source{{Path: "x.wit", Data: []byte(tc.src)}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestGoName(t *testing.T) {
	for in, want := range map[string]string{
		"tool-input": "ToolInput", "log-path": "LogPath", "session-id": "SessionID", "url": "URL",
		"duration-ms": "DurationMS", "io-error": "IOError", "keep-stdin-open": "KeepStdinOpen", "a": "A",
	} {
		if got := GoName(in); got != want {
			t.Errorf("GoName(%q) = %q, want %q", in, got, want)
		}
	}
}
