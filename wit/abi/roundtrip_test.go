package abi

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"
)

var roundTrips = []struct {
	name string
	typ  *Type
	val  any
}{
	{"bool true", Bool, true},
	{"bool false", Bool, false},
	{"u8", U8, uint8(0xfe)},
	{"u16", U16, uint16(0xfffe)},
	{"u32", U32, uint32(0xfffffffe)},
	{"u64", U64, uint64(math.MaxUint64)},
	{"s8", S8, int8(-128)},
	{"s16", S16, int16(-2)},
	{"s32", S32, int32(math.MinInt32)},
	{"s64", S64, int64(math.MinInt64)},
	{"f32", Float32, float32(-1.5)},
	{"f32 inf", Float32, float32(math.Inf(1))},
	{"f64", Float64, 3.25e-300},
	{"char ascii", Char, 'a'},
	{"char max", Char, rune(0x10FFFF)},
	{"char before surrogates", Char, rune(0xD7FF)},
	{"string empty", String, ""},
	{"string utf8", String, "héllo, 世界 🌍"},
	{"list<u8>", List(U8), []byte{0, 1, 2, 255}},
	{"list<u8> empty", List(U8), []byte{}},
	{"list<string>", List(String), []any{"a", "", "ccc"}},
	{"list<u64>", List(U64), []any{uint64(1), uint64(1 << 63)}},
	{"list<list<s16>>", List(List(S16)), []any{[]any{int16(-1)}, []any{}, []any{int16(2), int16(3)}}},
	{"record", Record(F("a", U8), F("b", String), F("c", U64)), []any{uint8(7), "x", uint64(9)}},
	{"tuple", Tuple(Char, Float64, Bool), []any{'z', 0.5, true}},
	{"empty tuple", Tuple(), []any{}},
	{"option none", OptionOf(String), Option{}},
	{"option some", OptionOf(String), Option{Some: true, Value: "yes"}},
	{"option option", OptionOf(OptionOf(U8)), Option{Some: true, Value: Option{Some: true, Value: uint8(3)}}},
	{"result ok", ResultOf(U32, String), Result{Value: uint32(5)}},
	{"result err", ResultOf(U32, String), Result{Err: true, Value: "bad"}},
	{"result no payloads", ResultOf(nil, nil), Result{Err: true}},
	{"result ok without payload", ResultOf(nil, String), Result{}},
	{"result f32 vs f64 join", ResultOf(Float32, Float64), Result{Value: float32(-2.5)}},
	{"result f64 side", ResultOf(Float32, Float64), Result{Err: true, Value: -7.75}},
	{"result u32 vs f32 join", ResultOf(U32, Float32), Result{Err: true, Value: float32(1.25)}},
	{"result s8 vs u64", ResultOf(S8, U64), Result{Value: int8(-3)}},
	{"enum", Enum("a", "b", "c"), uint32(2)},
	{"variant no payload", VariantOf(C("a", U8), C("b", nil)), Variant{Case: 1}},
	{"variant payload", VariantOf(C("a", Tuple(Float32, U32)), C("b", Tuple(U32, Float64))), Variant{Case: 1, Value: []any{uint32(4), 8.5}}},
	{"variant first payload", VariantOf(C("a", Tuple(Float32, U32)), C("b", Tuple(U32, Float64))), Variant{Case: 0, Value: []any{float32(4), uint32(8)}}},
	{"variant 300 cases", VariantOf(append(casesOf(strings.Split(strings.Repeat("c,", 298)+"c", ",")), C("last", String))...), Variant{Case: 299, Value: "end"}},
	{"flags 3", Flags("r", "w", "x"), uint32(5)},
	{"flags 32", Flags(strings.Split(strings.Repeat("f,", 31)+"f", ",")...), uint32(0x80000001)},
	{"tool-input", ToolInputType, ToolInput{Data: ptr("{}"), LogPath: nil}.Value()},
	{"tool-result", ToolResultType, sampleResult().Value(false)},
	{"tool-result 0.2.0", ToolResultType02, sampleResult().Value(true)},
	{"http request", HTTPRequestType, HTTPRequest{Method: "GET", URL: "https://x", Headers: [][2]string{{"a", "b"}}, Body: []byte("hi")}.value()},
	{"invoke result", ResultOf(ToolResultType, String), Result{Value: sampleResult().Value(false)}},
}

func sampleResult() ToolResult {
	return ToolResult{
		Status: StatusFailed, Summary: ptr("2 failed"), DataPath: ptr("/out/x.json"),
		Truncated: true, Metadata: [][2]string{{"continuation_id", "c1"}, {"k", ""}},
		Attachments: []Attachment{{MediaType: "image/png", Path: "/a.png"}},
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, tt := range roundTrips {
		t.Run(tt.name, func(t *testing.T) {
			m := newMem(1 << 16)
			a := newBump(m, 8)

			// Memory: store at a guest-allocated address, load back.
			p, err := a.realloc(ctx, 0, 0, tt.typ.align, tt.typ.size)
			if err != nil {
				t.Fatal(err)
			}
			if err := store(ctx, m, a.realloc, tt.typ, p, tt.val); err != nil {
				t.Fatalf("store: %v", err)
			}
			got, err := load(m, tt.typ, p, limits{})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !reflect.DeepEqual(got, tt.val) {
				t.Errorf("Load = %#v, want %#v", got, tt.val)
			}

			// Flat values.
			flat, err := lowerFlat(ctx, m, a.realloc, tt.typ, tt.val)
			if err != nil {
				t.Fatalf("LowerFlat: %v", err)
			}
			if len(flat) != len(tt.typ.flat) {
				t.Fatalf("lowerFlat gave %d values, want %d", len(flat), len(tt.typ.flat))
			}
			got, err = liftFlat(m, tt.typ, flat, limits{})
			if err != nil {
				t.Fatalf("LiftFlat: %v", err)
			}
			if !reflect.DeepEqual(got, tt.val) {
				t.Errorf("LiftFlat = %#v, want %#v", got, tt.val)
			}
		})
	}
}

// TestFuncRoundTrip passes values through both call directions, with few and many
// params, flat and spilled results.
func TestFuncRoundTrip(t *testing.T) {
	ctx := context.Background()
	many := make([]*Type, 0, 20)
	manyVals := make([]any, 0, 20)
	for i := range 20 {
		many = append(many, U32)
		manyVals = append(manyVals, uint32(i*1000))
	}
	tests := []struct {
		name            string
		fn              *Func
		params, results []any
	}{
		{"capsule run", capsuleRun, []any{}, []any{}},
		{"tool run", ToolRun01, []any{ToolInput{Data: ptr("d"), LogPath: ptr("/l")}.Value()}, []any{sampleResult().Value(false)}},
		{"tool run 0.2.0", ToolRun02, []any{ToolInput{}.Value()}, []any{sampleResult().Value(true)}},
		{"invoke", Invoke, []any{"grep", ToolInput{}.Value()}, []any{Result{Err: true, Value: "no such tool"}}},
		{"input bytes", InputBytes, []any{"id", uint64(1 << 40)}, []any{}},
		{"request input", RequestIn, []any{"name?"}, []any{"Ada"}},
		{"http send", HTTPSend, []any{HTTPRequest{Method: "POST", URL: "u", Body: []byte{1}}.value()},
			[]any{Result{Value: HTTPResponse{Status: 204, Headers: [][2]string{{"x", "y"}}}.Value()}}},
		{"20 params, one u64 result", NewFunc(many, []*Type{U64}), manyVals, []any{uint64(42)}},
		{"multi-value results", NewFunc([]*Type{Bool}, []*Type{U8, String, Float64}), []any{true}, []any{uint8(1), "two", 3.0}},
		{"f32 result", NewFunc(nil, []*Type{Float32}), []any{}, []any{float32(0.125)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMem(1 << 16)
			a := newBump(m, 16)

			// Host calls a guest export: lower params; the guest "reads" them as an
			// import would (LiftParams without a retptr).
			flat, err := tt.fn.LowerParams(ctx, m, a.realloc, tt.params)
			if err != nil {
				t.Fatalf("LowerParams: %v", err)
			}
			imp, _ := tt.fn.ImportSignature()
			exp, _ := tt.fn.ExportSignature()
			if len(flat) != len(exp) {
				t.Fatalf("LowerParams gave %d values, want %d", len(flat), len(exp))
			}
			if len(imp) > len(exp) {
				flat = append(flat, 0) // the retptr slot an import would carry
			}
			got, err := tt.fn.LiftParams(m, flat)
			if err != nil {
				t.Fatalf("LiftParams: %v", err)
			}
			if !reflect.DeepEqual(got, nonNil(tt.params)) {
				t.Errorf("params = %#v, want %#v", got, tt.params)
			}

			// Results: the guest (as an import's host) writes them into a return area
			// it allocated, then the host lifts them as an export's results.
			ret, _ := a.realloc(ctx, 0, 0, 8, 256)
			rflat, err := tt.fn.LowerResults(ctx, m, a.realloc, tt.results, ret)
			if err != nil {
				t.Fatalf("LowerResults: %v", err)
			}
			if rflat == nil {
				rflat = []uint64{uint64(ret)}
				if _, r := tt.fn.ExportSignature(); len(r) == 0 {
					rflat = nil
				}
			}
			res, err := tt.fn.LiftResults(m, rflat)
			if err != nil {
				t.Fatalf("LiftResults: %v", err)
			}
			if !reflect.DeepEqual(res, nonNil(tt.results)) {
				t.Errorf("results = %#v, want %#v", res, tt.results)
			}
		})
	}
}

func nonNil(v []any) []any {
	if v == nil {
		return []any{}
	}
	return v
}

func TestRetPtr(t *testing.T) {
	if p, ok := RequestIn.RetPtr([]uint64{1, 2, 0x40}); !ok || p != 0x40 {
		t.Errorf("RetPtr = %d, %v; want 0x40, true", p, ok)
	}
	if _, ok := EmitChunk.RetPtr([]uint64{1, 2}); ok {
		t.Error("RetPtr for a function without spilled results")
	}
}

func TestNaNBitsPassThrough(t *testing.T) {
	ctx := context.Background()
	m := newMem(64)
	nan32 := math.Float32frombits(0x7fc00001)
	nan64 := math.Float64frombits(0x7ff8000000000002)
	ty := Tuple(Float32, Float64)
	if err := store(ctx, m, nil, ty, 0, []any{nan32, nan64}); err != nil {
		t.Fatal(err)
	}
	got, err := load(m, ty, 0, limits{})
	if err != nil {
		t.Fatal(err)
	}
	vs := got.([]any)
	if math.Float32bits(vs[0].(float32)) != 0x7fc00001 || math.Float64bits(vs[1].(float64)) != 0x7ff8000000000002 {
		t.Errorf("NaN bits changed: %#v", vs)
	}
}

func TestToolTypesConvert(t *testing.T) {
	in := ToolInput{Data: ptr("x"), LogPath: ptr("/log")}
	gotIn, err := ToToolInput(in.Value())
	if err != nil || !reflect.DeepEqual(gotIn, in) {
		t.Errorf("ToolInput = %+v, %v", gotIn, err)
	}
	r := sampleResult()
	got02, err := ToToolResult(r.Value(true))
	if err != nil || !reflect.DeepEqual(got02, r) {
		t.Errorf("ToolResult 0.2.0 = %+v, %v", got02, err)
	}
	r.Attachments = nil
	got01, err := ToToolResult(r.Value(false))
	if err != nil || !reflect.DeepEqual(got01, r) {
		t.Errorf("ToolResult 0.1.0 = %+v, %v", got01, err)
	}
	req := HTTPRequest{Method: "GET", URL: "u", Headers: [][2]string{{"a", "b"}}, Body: []byte{}}
	gotReq, err := ToHTTPRequest(req.value())
	if err != nil || !reflect.DeepEqual(gotReq, req) {
		t.Errorf("HTTPRequest = %+v, %v", gotReq, err)
	}
	resp := HTTPResponse{Status: 200, Headers: [][2]string{}, Body: []byte("ok")}
	gotResp, err := toHTTPResponse(resp.Value())
	if err != nil || !reflect.DeepEqual(gotResp, resp) {
		t.Errorf("HTTPResponse = %+v, %v", gotResp, err)
	}
	if _, err := ToToolResult([]any{uint32(9)}); err == nil {
		t.Error("ToToolResult accepted a malformed value")
	}
	if StatusError.String() != "error" || Status(7).String() != "status(7)" {
		t.Error("Status.String")
	}
}
