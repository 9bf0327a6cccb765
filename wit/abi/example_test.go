package abi_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// memory and alloc stand in for a guest's linear memory and cabi_realloc.
type memory []byte

func (m memory) Size() uint32 { return uint32(len(m)) }
func (m memory) Read(off, n uint32) ([]byte, bool) {
	if uint64(off)+uint64(n) > uint64(len(m)) {
		return nil, false
	}
	return m[off : off+n], true
}
func (m memory) Write(off uint32, v []byte) bool {
	if uint64(off)+uint64(len(v)) > uint64(len(m)) {
		return false
	}
	copy(m[off:], v)
	return true
}

func Example() {
	ctx := context.Background()
	mem := make(memory, 1024)
	next := uint32(16)
	alloc := func(_ context.Context, _, _, align, size uint32) (uint32, error) {
		p := (next + align - 1) / align * align
		next = p + size
		return p, nil
	}

	// The host calls murmur:tool/run@0.1.0#run: lower the input...
	data := `{"pattern":"TODO"}`
	params, _ := abi.ToolRun01.LowerParams(ctx, mem, alloc, []any{abi.ToolInput{Data: &data}.Value()})
	fmt.Println(len(params), "core params")

	// ...and lift what the guest returned: here a pointer past the end of memory.
	_, err := abi.ToolRun01.LiftResults(mem, []uint64{4096})
	fmt.Println(errors.Is(err, abi.ErrABI), err)
	// Output:
	// 6 core params
	// true abi: results at ptr 0x1000: 52 bytes run past memory size 1024
}
