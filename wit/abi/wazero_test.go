package abi

import (
	"context"
	"reflect"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

var _ Memory = api.Memory(nil)

func leb(n int) []byte {
	var b []byte
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func section(id byte, content ...byte) []byte {
	return append(append([]byte{id}, leb(len(content))...), content...)
}

func name(s string) []byte { return append(leb(len(s)), s...) }

// bumpModule is a guest exporting one page of memory and a bump-allocating
// cabi_realloc that starts at 1024.
func bumpModule() []byte {
	w := []byte("\x00asm\x01\x00\x00\x00")
	w = append(w, section(1, 0x01, 0x60, 0x04, 0x7f, 0x7f, 0x7f, 0x7f, 0x01, 0x7f)...) // (i32 i32 i32 i32) -> i32
	w = append(w, section(3, 0x01, 0x00)...)                                           // one func of type 0
	w = append(w, section(5, 0x01, 0x00, 0x01)...)                                     // memory, min 1 page
	w = append(w, section(6, 0x01, 0x7f, 0x01, 0x41, 0x80, 0x08, 0x0b)...)             // mut i32 global = 1024
	exports := []byte{0x02}
	exports = append(append(exports, name("memory")...), 0x02, 0x00)
	exports = append(append(exports, name("cabi_realloc")...), 0x00, 0x00)
	w = append(w, section(7, exports...)...)
	body := []byte{
		0x01, 0x01, 0x7f, // one i32 local (4)
		0x23, 0x00, 0x20, 0x02, 0x6a, 0x41, 0x01, 0x6b, // heap + align - 1
		0x41, 0x00, 0x20, 0x02, 0x6b, 0x71, // & -align
		0x22, 0x04, // local 4 = ptr
		0x20, 0x03, 0x6a, 0x24, 0x00, // heap = ptr + size
		0x20, 0x04, 0x0b, // return ptr
	}
	code := append([]byte{0x01}, append(leb(len(body)), body...)...)
	return append(w, section(10, code...)...)
}

func TestWazeroMemory(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	mod, err := r.Instantiate(ctx, bumpModule())
	if err != nil {
		t.Fatal(err)
	}
	var m Memory = mod.Memory()
	fn := mod.ExportedFunction("cabi_realloc")
	realloc := func(ctx context.Context, oldPtr, oldSize, align, newSize uint32) (uint32, error) {
		res, err := fn.Call(ctx, uint64(oldPtr), uint64(oldSize), uint64(align), uint64(newSize))
		if err != nil {
			return 0, err
		}
		return api.DecodeU32(res[0]), nil
	}

	in := ToolInput{Data: ptr(`{"q":1}`), LogPath: ptr("/log/x")}
	flat, err := ToolRun01.LowerParams(ctx, m, realloc, []any{in.Value()})
	if err != nil {
		t.Fatal(err)
	}
	if flat[1] < 1024 {
		t.Errorf("string not allocated by the guest: ptr %d", flat[1])
	}
	got, err := ToolRun01.LiftParams(m, append(flat, 0))
	if err != nil {
		t.Fatal(err)
	}
	if back, err := ToToolInput(got[0]); err != nil || !reflect.DeepEqual(back, in) {
		t.Errorf("round trip = %+v, %v", back, err)
	}

	res := sampleResult()
	ret, err := realloc(ctx, 0, 0, ToolResultType02.align, ToolResultType02.size)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ToolRun02.LowerResults(ctx, m, realloc, []any{res.Value(true)}, ret); err != nil {
		t.Fatal(err)
	}
	vals, err := ToolRun02.LiftResults(m, []uint64{uint64(ret)})
	if err != nil {
		t.Fatal(err)
	}
	if back, err := ToToolResult(vals[0]); err != nil || !reflect.DeepEqual(back, res) {
		t.Errorf("result = %+v, %v", back, err)
	}

	// A pointer past the real memory's end is refused.
	_, err = load(m, String, m.Size()-4, limits{})
	mustABI(t, err)
}
