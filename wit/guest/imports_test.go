//go:build !wasip1

package guest_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
)

// readPairs lifts a list<tuple<string, string>> by hand.
func readPairs(t *testing.T, m api.Module, p, n uint32) [][2]string {
	t.Helper()
	list, ok := m.Memory().Read(p, n*pairSize)
	if !ok {
		t.Fatalf("list (%#x, %d) out of range", p, n)
	}
	var out [][2]string
	for i := uint32(0); i < n; i++ {
		e := list[i*pairSize:]
		out = append(out, [2]string{readString(t, m, le(e), le(e[4:])), readString(t, m, le(e[8:]), le(e[12:]))})
	}
	return out
}

// lowerPairs writes a list<tuple<string, string>> into guest allocations.
func lowerPairs(ctx context.Context, m api.Module, kv [][2]string) (uint32, uint32) {
	list := guestAlloc(ctx, m, uint32(len(kv))*pairSize, 4)
	var b []byte
	for _, e := range kv {
		kp, kn := lowerString(ctx, m, e[0])
		vp, vn := lowerString(ctx, m, e[1])
		for _, v := range []uint32{kp, kn, vp, vn} {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
	}
	m.Memory().Write(list, b)
	return list, uint32(len(kv))
}

func TestToolImports(t *testing.T) {
	t.Parallel()
	wasm := guestbuild.Wasm(t, testguests+"imports")
	ctx, r := newRuntime(t)
	want := []string{
		"capsulegate:http/outgoing@0.1.0#send",
		"murmur:stream/events@0.1.0#emit-chunk",
		"murmur:stream/events@0.1.0#emit-thinking-chunk",
		"murmur:stream/events@0.1.0#tool-call-input-bytes",
		"murmur:stream/events@0.1.0#tool-call-started",
		"murmur:task/task@0.1.0#request-input",
	}
	if got := imports(t, ctx, r, wasm); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("imports = %q, want %q", got, want)
	}

	var events []string
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	str := func(name string) api.GoModuleFunc {
		return func(ctx context.Context, m api.Module, s []uint64) {
			events = append(events, name+"("+readString(t, m, uint32(s[0]), uint32(s[1]))+")")
		}
	}
	b := r.NewHostModuleBuilder("murmur:stream/events@0.1.0")
	b.NewFunctionBuilder().WithGoModuleFunction(str("chunk"), []api.ValueType{i32, i32}, nil).Export("emit-chunk")
	b.NewFunctionBuilder().WithGoModuleFunction(str("thinking"), []api.ValueType{i32, i32}, nil).Export("emit-thinking-chunk")
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, s []uint64) {
		events = append(events, fmt.Sprintf("started(%s,%s)", readString(t, m, uint32(s[0]), uint32(s[1])), readString(t, m, uint32(s[2]), uint32(s[3]))))
	}), []api.ValueType{i32, i32, i32, i32}, nil).Export("tool-call-started")
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, s []uint64) {
		events = append(events, fmt.Sprintf("bytes(%s,%d)", readString(t, m, uint32(s[0]), uint32(s[1])), s[2]))
	}), []api.ValueType{i32, i32, i64}, nil).Export("tool-call-input-bytes")
	if _, err := b.Instantiate(ctx); err != nil {
		t.Fatal(err)
	}

	_, err := r.NewHostModuleBuilder("murmur:task/task@0.1.0").NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, s []uint64) {
			events = append(events, "ask("+readString(t, m, uint32(s[0]), uint32(s[1]))+")")
			p, n := lowerString(ctx, m, "alice")
			m.Memory().WriteUint32Le(uint32(s[2]), p)
			m.Memory().WriteUint32Le(uint32(s[2])+4, n)
		}), []api.ValueType{i32, i32, i32}, nil).Export("request-input").Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// send: result<response, string>; response at 4 is status u16, headers at 8, body at 16.
	_, err = r.NewHostModuleBuilder("capsulegate:http/outgoing@0.1.0").NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, s []uint64) {
			a := make([]uint32, 9)
			for i := range a {
				a[i] = uint32(s[i])
			}
			url := readString(t, m, a[2], a[3])
			events = append(events, fmt.Sprintf("send(%s %s %q %q)", readString(t, m, a[0], a[1]), url,
				readPairs(t, m, a[4], a[5]), readString(t, m, a[6], a[7])))
			area := make([]byte, 24)
			if strings.Contains(url, "denied") {
				area[0] = 1
				p, n := lowerString(ctx, m, "network policy: denied:443 not in capabilities.network.allow")
				binary.LittleEndian.PutUint32(area[4:], p)
				binary.LittleEndian.PutUint32(area[8:], n)
			} else {
				binary.LittleEndian.PutUint16(area[4:], 201)
				hp, hn := lowerPairs(ctx, m, [][2]string{{"Content-Type", "text/plain"}})
				binary.LittleEndian.PutUint32(area[8:], hp)
				binary.LittleEndian.PutUint32(area[12:], hn)
				bp, bn := lowerString(ctx, m, "pong")
				binary.LittleEndian.PutUint32(area[16:], bp)
				binary.LittleEndian.PutUint32(area[20:], bn)
			}
			m.Memory().Write(a[8], area)
		}), []api.ValueType{i32, i32, i32, i32, i32, i32, i32, i32, i32}, nil).Export("send").Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}

	m := instantiate(t, ctx, r, wasm, wazero.NewModuleConfig())
	url := "https://example.com/x"
	res := callTool(t, ctx, m, &url)
	wantEvents := []string{"chunk(chunk)", "thinking(thinking)", "started(id1,echo)", "bytes(id1,1099511627776)", "ask(name?)",
		`send(POST https://example.com/x [["X-A" "1"] ["X-B" ""]] "ping")`}
	if !slices.Equal(events, wantEvents) {
		t.Errorf("host saw\n%q\nwant\n%q", events, wantEvents)
	}
	wantMD := [][2]string{{"status", "201"}, {"body", "pong"}, {"Content-Type", "text/plain"}}
	if res.status != 0 || res.data == nil || *res.data != "alice" || !slices.Equal(res.metadata, wantMD) {
		t.Errorf("result = %+v, metadata %q", res, res.metadata)
	}

	denied := "https://denied/"
	res = callTool(t, ctx, m, &denied)
	if res.status != 1 || res.summary == nil || *res.summary != "network policy: denied:443 not in capabilities.network.allow" {
		t.Errorf("denied send: %+v", res)
	}
}
