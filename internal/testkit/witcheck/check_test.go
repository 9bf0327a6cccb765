package witcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// demoWIT uses each kind the rule maps: flags, an alias, enums (one as a named integer
// type, one as a string with a map case list), a record, a variant and a resource.
const demoWIT = `package t:demo@1.0.0;

interface i {
  flags perms { read, write }
  type handle = u32;
  enum kind { a, b }
  enum label { x, y }
  resource res;
  record thing {
    perms: perms,
    h: handle,
    pairs: list<tuple<string, u32>>,
    kind: kind,
    note: option<string>,
    label: option<label>,
    blob: option<list<u8>>,
    r: own<res>,
  }
  variant shape { circle(f64), box(thing), empty }
  f: func(t: thing) -> result<shape, string>;
}
`

const demoGo = `package p

type Perms uint8

const (
	PermRead Perms = 1 << iota
	PermWrite
)

type Handle = uint32

type Kind uint32

const (
	KindA Kind = iota
	KindB
)

type Res struct{}

type Pair struct {
	K string
	V uint32
}

type Thing struct {
	Perms   Perms
	H       Handle
	Pairs   []Pair
	Kind    Kind
	Note    string
	HasNote bool
	Label   *string
	Blob    []byte
	R       uint32
	private int
}

type Shape struct {
	Case   string
	Radius float64
	Thing  *Thing
}

var shapeCases = []string{"circle", "box", "empty"}

var labels = map[string]int{"x": 0, "y": 1}
`

// demoFunc is the host's descriptor of i.f.
func demoFunc(edit func(thing, shape *abi.Type) (*abi.Type, *abi.Type)) *abi.Func {
	thing := abi.Record(abi.F("perms", abi.Flags("read", "write")), abi.F("h", abi.U32),
		abi.F("pairs", abi.List(abi.Tuple(abi.String, abi.U32))), abi.F("kind", abi.Enum("a", "b")),
		abi.F("note", abi.OptionOf(abi.String)), abi.F("label", abi.OptionOf(abi.Enum("x", "y"))),
		abi.F("blob", abi.OptionOf(abi.List(abi.U8))), abi.F("r", abi.Own("res"))).Named("thing")
	shape := abi.VariantOf(abi.C("circle", abi.Float64), abi.C("box", thing), abi.C("empty", nil)).Named("shape")
	if edit != nil {
		thing, shape = edit(thing, shape)
	}
	return abi.NewFunc([]*abi.Type{thing}, []*abi.Type{abi.ResultOf(shape, abi.String)})
}

const iface = "t:demo/i@1.0.0"

func demoConfig(root string) Config {
	b := func() Binding {
		return Binding{Interface: iface, Dir: "p", CaseLists: map[string]string{"label": "labels", "shape": "shapeCases"}}
	}
	return Config{
		Root: root, Host: []Binding{b()}, Guest: []Binding{b()},
		HostFuncs: map[string]HostFunc{iface + "#f": {Name: "demo.F", Func: demoFunc(nil)}},
	}
}

type key = Key

func both(subject, member string) []key {
	return []key{{subject, member, Host}, {subject, member, Guest}}
}

func TestCheckDemo(t *testing.T) {
	const (
		thing = "record t:demo/i.thing"
		shape = "variant t:demo/i.shape"
		cfgS  = "configuration"
	)
	for _, tc := range []struct {
		name     string
		goOld    string // an edit of demoGo
		goNew    string
		witOld   string // an edit of demoWIT
		witNew   string
		config   func(*Config)
		want     []key
		contains string // a part of the first finding's message
	}{
		{name: "agreeing"},
		{
			name: "flags out of order", goOld: "PermRead Perms = 1 << iota\n\tPermWrite", goNew: "PermWrite Perms = 1 << iota\n\tPermRead",
			want:     append(both("flags t:demo/i.perms", `label "read"`), both("flags t:demo/i.perms", `label "write"`)...),
			contains: "the host's p.Perms constant valued 1 is PermWrite, not one ending in Read",
		},
		{
			name: "enum constant beyond the cases", goOld: "\tKindB\n", goNew: "\tKindB\n\tKindC\n",
			want: both("enum t:demo/i.kind", "Go constant KindC"),
		},
		{
			name: "alias retyped", goOld: "type Handle = uint32", goNew: "type Handle = uint64",
			want:     append(both("type t:demo/i.handle", ""), both(thing, `field "h"`)...),
			contains: "the host's p.Handle is uint64, but u32 maps to uint32",
		},
		{
			name: "tuple struct retyped", goOld: "\tV uint32", goNew: "\tV string",
			want:     both(thing, `field "pairs"`),
			contains: "list<tuple<string, u32>> maps to []struct{string; uint32}",
		},
		{
			name: "option without its Has field", goOld: "\tHasNote bool\n", goNew: "",
			want: both(thing, `field "note"`),
		},
		{
			name: "renamed field", goOld: "\tBlob    []byte", goNew: "\tBytes   []byte",
			want:     append(both(thing, `field "blob"`), both(thing, "Go field Bytes")...),
			contains: `record t:demo/i.thing field "blob": the host's p.Thing has no field Blob (fix: rename the Go field or the WIT field so both sides agree)`,
		},
		{
			name: "map case list's discriminant", goOld: `{"x": 0, "y": 1}`, goNew: `{"x": 1, "y": 0}`,
			want: append(both("enum t:demo/i.label", `case "x"`), both("enum t:demo/i.label", `case "y"`)...),
		},
		{
			name: "case list out of order", goOld: `{"circle", "box", "empty"}`, goNew: `{"box", "circle", "empty"}`,
			want:     both(shape, `case "circle"`),
			contains: `has "box" at index 0, where the WIT order puts "circle"`,
		},
		{
			name: "payload not carried", goOld: "\tThing  *Thing\n", goNew: "",
			want:     both(shape, `case "box"`),
			contains: "the host's p.Shape has no field of type p.Thing to carry its payload thing",
		},
		{
			name: "variant without a case list", config: func(c *Config) { delete(c.Host[0].CaseLists, "shape") },
			want: []key{{shape, "", Host}},
		},
		{
			name: "string enum without a case list", config: func(c *Config) {
				c.Guest = []Binding{{Interface: iface, Dir: "p", CaseLists: map[string]string{"shape": "shapeCases"}}}
			},
			want: []key{{"enum t:demo/i.label", "", Guest}, {thing, `field "label"`, Guest}},
		},
		{
			name: "no guest binding", config: func(c *Config) { c.Guest = nil },
			want: []key{{"interface t:demo/i", "", Guest}},
		},
		{
			name:   "WIT field added, descriptor and Go behind",
			witOld: "    r: own<res>,\n", witNew: "    r: own<res>,\n    extra: u8,\n",
			want: append(both(thing, `field "extra"`), key{thing, `field "extra"`, Host}),
		},
		{
			name: "descriptor drift",
			config: func(c *Config) {
				c.HostFuncs[iface+"#f"] = HostFunc{Name: "demo.F", Func: demoFunc(func(thing, shape *abi.Type) (*abi.Type, *abi.Type) {
					return thing.Named("things"), abi.VariantOf(abi.C("circle", abi.Float64), abi.C("box", thing), abi.C("empty", abi.U8)).Named("shape")
				})}
			},
			want:     []key{{thing, "", Host}, {shape, `case "empty"`, Host}},
			contains: `the host's descriptor (demo.F parameter 0) is named "things"`,
		},
		{
			name:   "no descriptor",
			config: func(c *Config) { delete(c.HostFuncs, iface+"#f") },
			want:   []key{{"func t:demo/i.f", "", Host}},
		},
		{
			name: "stale configuration",
			config: func(c *Config) {
				c.Exceptions = []Exception{
					{Kind: NoGoType, Side: Host, Type: iface + ".thing", Reason: "wrong: it exists"},
					{Kind: ExtraField, Side: Guest, Type: iface + ".thing", Member: "Gone", Reason: "no such field"},
					{Kind: NoGoType, Side: Host, Type: "t:other/j@1.0.0.x", Reason: "no such interface"},
				}
				c.Host[0].Names = map[string]string{"nothing": "Nothing"}
				c.HostFuncs["t:demo/i@1.0.0#g"] = HostFunc{Name: "demo.G", Func: demoFunc(nil)}
			},
			want: []key{{thing, "", Host}, {cfgS, "", ""}, {cfgS, "", ""}, {cfgS, "", ""}, {cfgS, "", ""}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			gosrc := demoGo
			if tc.goOld != "" {
				if !strings.Contains(gosrc, tc.goOld) {
					t.Fatalf("demoGo lacks %q", tc.goOld)
				}
				gosrc = strings.Replace(gosrc, tc.goOld, tc.goNew, 1)
			}
			witsrc := demoWIT
			if tc.witOld != "" {
				if !strings.Contains(witsrc, tc.witOld) {
					t.Fatalf("demoWIT lacks %q", tc.witOld)
				}
				witsrc = strings.Replace(witsrc, tc.witOld, tc.witNew, 1)
			}
			write(t, filepath.Join(root, "go.mod"), "module example.com/m\n\ngo 1.26\n")
			write(t, filepath.Join(root, "p", "p.go"), gosrc)
			cfg := demoConfig(root)
			if tc.config != nil {
				tc.config(&cfg)
			}
			findings, err := Check(cfg, []Source{{Path: "demo.wit", Data: []byte(witsrc)}})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range findings {
				t.Log(f)
			}
			if same, got := SameKeys(findings, tc.want); !same {
				t.Errorf("findings %v,\nwant %v", got, tc.want)
			}
			if tc.contains != "" && (len(findings) == 0 || !strings.Contains(findings[0].String(), tc.contains)) {
				t.Errorf("the first finding does not contain %q", tc.contains)
			}
		})
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
