package abi

import (
	"reflect"
	"strings"
	"testing"
)

func TestLayout(t *testing.T) {
	names := func(n int) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = "c" + itoa(uint32(i))
		}
		return s
	}
	tests := []struct {
		name        string
		typ         *Type
		size, align uint32
		flat        string
	}{
		{"bool", Bool, 1, 1, "i32"},
		{"s16", S16, 2, 2, "i32"},
		{"u64", U64, 8, 8, "i64"},
		{"f32", Float32, 4, 4, "f32"},
		{"f64", Float64, 8, 8, "f64"},
		{"char", Char, 4, 4, "i32"},
		{"string", String, 8, 4, "i32 i32"},
		{"list", List(U64), 8, 4, "i32 i32"},
		{"record padding", Record(F("a", U8), F("b", U32), F("c", U16)), 12, 4, "i32 i32 i32"},
		{"tuple u8 u64", Tuple(U8, U64), 16, 8, "i32 i64"},
		{"empty tuple", Tuple(), 0, 1, ""},
		{"option u8", OptionOf(U8), 2, 1, "i32 i32"},
		{"option u64", OptionOf(U64), 16, 8, "i32 i64"},
		{"option string", OptionOf(String), 12, 4, "i32 i32 i32"},
		{"result none", ResultOf(nil, nil), 1, 1, "i32"},
		{"result u32 f32 joins to i32", ResultOf(U32, Float32), 8, 4, "i32 i32"},
		{"result f32 f64 joins to i64", ResultOf(Float32, Float64), 16, 8, "i32 i64"},
		{"result u64 f32 joins to i64", ResultOf(U64, Float32), 16, 8, "i32 i64"},
		{"variant same f32", VariantOf(C("a", Float32), C("b", Float32)), 8, 4, "i32 f32"},
		{"variant mixed widths", VariantOf(C("a", Tuple(Float32, U32)), C("b", Tuple(U32, Float64)), C("c", nil)), 24, 8, "i32 i32 i64"},
		{"variant u8 payload u16", VariantOf(C("a", U16), C("b", U8)), 4, 2, "i32 i32"},
		{"enum 3", Enum("a", "b", "c"), 1, 1, "i32"},
		{"enum 256", Enum(names(256)...), 1, 1, "i32"},
		{"enum 257", Enum(names(257)...), 2, 2, "i32"},
		{"variant 257 with u8", VariantOf(append([]Case{C("x", U8)}, casesOf(names(256))...)...), 4, 2, "i32 i32"},
		{"flags 8", Flags(names(8)...), 1, 1, "i32"},
		{"flags 9", Flags(names(9)...), 2, 2, "i32"},
		{"flags 17", Flags(names(17)...), 4, 4, "i32"},
		{"flags 32", Flags(names(32)...), 4, 4, "i32"},
		{"tool-input", ToolInputType, 24, 4, strings.Repeat("i32 ", 5) + "i32"},
		{"tool-result", ToolResultType, 52, 4, strings.TrimSpace(strings.Repeat("i32 ", 13))},
		{"tool-result 0.2.0", ToolResultType02, 60, 4, strings.TrimSpace(strings.Repeat("i32 ", 15))},
		{"http request", HTTPRequestType, 32, 4, strings.TrimSpace(strings.Repeat("i32 ", 8))},
		{"http response", HTTPResponseType, 20, 4, strings.TrimSpace(strings.Repeat("i32 ", 5))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.typ.size; got != tt.size {
				t.Errorf("size = %d, want %d", got, tt.size)
			}
			if got := tt.typ.align; got != tt.align {
				t.Errorf("align = %d, want %d", got, tt.align)
			}
			if got := flatString(tt.typ.flat); got != tt.flat {
				t.Errorf("flat = %q, want %q", got, tt.flat)
			}
		})
	}
}

func casesOf(names []string) []Case {
	cs := make([]Case, len(names))
	for i, n := range names {
		cs[i] = C(n, nil)
	}
	return cs
}

func flatString(vs []ValType) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = v.String()
	}
	return strings.Join(s, " ")
}

func TestSignatures(t *testing.T) {
	u32s := func(n int) []*Type {
		ts := make([]*Type, n)
		for i := range ts {
			ts[i] = U32
		}
		return ts
	}
	tests := []struct {
		name                  string
		fn                    *Func
		expParams, expResults string
		impParams, impResults string
	}{
		{"no params no results", capsuleRun, "", "", "", ""},
		{"16 flat params stay flat", NewFunc(u32s(16), nil), strings.TrimSpace(strings.Repeat("i32 ", 16)), "", strings.TrimSpace(strings.Repeat("i32 ", 16)), ""},
		{"17 flat params spill", NewFunc(u32s(17), nil), "i32", "", "i32", ""},
		{"8 strings spill", NewFunc([]*Type{String, String, String, String, String, String, String, String, U8}, nil), "i32", "", "i32", ""},
		{"one i64 result", NewFunc(nil, []*Type{U64}), "", "i64", "", "i64"},
		{"multi-value results spill", NewFunc(nil, []*Type{U32, U32}), "", "i32", "i32", ""},
		{"string result spills", RequestIn, "i32 i32", "i32", "i32 i32 i32", ""},
		{"tool run", ToolRun01, "i32 i32 i32 i32 i32 i32", "i32", "i32 i32 i32 i32 i32 i32 i32", ""},
		{"invoke", Invoke, strings.TrimSpace(strings.Repeat("i32 ", 8)), "i32", strings.TrimSpace(strings.Repeat("i32 ", 9)), ""},
		{"input bytes", InputBytes, "i32 i32 i64", "", "i32 i32 i64", ""},
		{"http send", HTTPSend, strings.TrimSpace(strings.Repeat("i32 ", 8)), "i32", strings.TrimSpace(strings.Repeat("i32 ", 9)), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, r := tt.fn.ExportSignature()
			if flatString(p) != tt.expParams || flatString(r) != tt.expResults {
				t.Errorf("export = (%s) -> (%s), want (%s) -> (%s)", flatString(p), flatString(r), tt.expParams, tt.expResults)
			}
			p, r = tt.fn.ImportSignature()
			if flatString(p) != tt.impParams || flatString(r) != tt.impResults {
				t.Errorf("import = (%s) -> (%s), want (%s) -> (%s)", flatString(p), flatString(r), tt.impParams, tt.impResults)
			}
		})
	}
}

func TestTypeString(t *testing.T) {
	got := ResultOf(List(Tuple(String, Char)), nil).String()
	if want := "result<list<tuple<string, char>>, _>"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if !reflect.DeepEqual(ToolInputType.Fields()[1].Name, "log-path") {
		t.Error("field name lost")
	}
}

func TestConstructorsPanicOnMalformedTypes(t *testing.T) {
	for name, f := range map[string]func(){
		"nil list":      func() { List(nil) },
		"empty enum":    func() { Enum() },
		"empty variant": func() { VariantOf() },
		"no flags":      func() { Flags() },
		"33 flags":      func() { Flags(make([]string, 33)...) },
		"nil field":     func() { Record(F("a", nil)) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		})
	}
}
