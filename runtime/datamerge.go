package runtime

import (
	"encoding/binary"
	"errors"
)

// mergeDataSegments rewrites a module's active data segments with constant offsets into
// one segment, so instantiation copies one block instead of evaluating each segment (Go's
// linker emits tens of thousands; wazero allocates per segment on every instantiation).
// The result initialises memory exactly as the original: segments are applied in order,
// later bytes win, gaps are zero as fresh memory is. Anything it does not understand —
// passive segments, non-constant offsets, a malformed section — leaves the module as it
// is (ok false); the compiler then validates the original as usual.
func mergeDataSegments(wasm []byte) (out []byte, ok bool) {
	if len(wasm) < 8 {
		return wasm, false
	}
	type section struct {
		id         byte
		start, end int // content bounds
		hdr        int // start of the section header
	}
	var sections []section
	for p := 8; p < len(wasm); {
		id := wasm[p]
		size, n := binary.Uvarint(wasm[p+1:])
		if n <= 0 || size > uint64(len(wasm)) {
			return wasm, false
		}
		start := p + 1 + n
		end := start + int(size)
		if end > len(wasm) {
			return wasm, false
		}
		sections = append(sections, section{id, start, end, p})
		p = end
	}
	di := -1
	for i, s := range sections {
		if s.id == 11 {
			di = i
		}
	}
	if di < 0 {
		return wasm, false
	}
	segs, err := parseDataSegments(wasm[sections[di].start:sections[di].end])
	if err != nil || len(segs) < 2 {
		return wasm, false
	}
	lo, hi := segs[0].off, segs[0].off
	for _, s := range segs {
		end := uint64(s.off) + uint64(len(s.data))
		if end > 1<<32 {
			return wasm, false
		}
		lo = min(lo, s.off)
		hi = max(hi, uint32(end))
	}
	if hi-lo > 256<<20 {
		return wasm, false // sparse data far apart: one block would waste memory
	}
	block := make([]byte, hi-lo)
	for _, s := range segs {
		copy(block[s.off-lo:], s.data)
	}
	// One active segment: flags 0, i32.const lo, end, the bytes.
	content := []byte{0x01, 0x00, 0x41}
	content = appendSleb32(content, int32(lo))
	content = append(content, 0x0b)
	content = binary.AppendUvarint(content, uint64(len(block)))
	content = append(content, block...)

	out = make([]byte, 0, len(wasm))
	out = append(out, wasm[:8]...)
	for i, s := range sections {
		switch {
		case i == di:
			out = append(out, 11)
			out = binary.AppendUvarint(out, uint64(len(content)))
			out = append(out, content...)
		case s.id == 12: // data count must match the new number of segments
			out = append(out, 12, 1, 1)
		default:
			out = append(out, wasm[s.hdr:s.end]...)
		}
	}
	return out, true
}

var errUnsupportedData = errors.New("unsupported data segment")

// dataSegment is one active data segment with a constant offset.
type dataSegment struct {
	off  uint32
	data []byte
}

// parseDataSegments reads a data section's segments, refusing anything but active
// segments of memory 0 with an i32.const offset.
func parseDataSegments(b []byte) ([]dataSegment, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, errUnsupportedData
	}
	b = b[n:]
	segs := make([]dataSegment, 0, min(count, 1<<20))
	for i := uint64(0); i < count; i++ {
		flags, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errUnsupportedData
		}
		b = b[n:]
		switch flags {
		case 0:
		case 2:
			mem, n := binary.Uvarint(b)
			if n <= 0 || mem != 0 {
				return nil, errUnsupportedData
			}
			b = b[n:]
		default:
			return nil, errUnsupportedData // passive
		}
		if len(b) < 1 || b[0] != 0x41 {
			return nil, errUnsupportedData
		}
		off, n := readSleb32(b[1:])
		if n <= 0 || len(b) < 1+n+1 || b[1+n] != 0x0b {
			return nil, errUnsupportedData
		}
		b = b[2+n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, errUnsupportedData
		}
		segs = append(segs, dataSegment{off: uint32(off), data: b[n : n+int(size)]})
		b = b[n+int(size):]
	}
	if len(b) != 0 {
		return nil, errUnsupportedData
	}
	return segs, nil
}

func readSleb32(b []byte) (int32, int) {
	var result int64
	var shift uint
	for i := 0; i < len(b) && i < 5; i++ {
		c := b[i]
		result |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				result |= -1 << shift
			}
			return int32(result), i + 1
		}
	}
	return 0, -1
}

func appendSleb32(b []byte, v int32) []byte {
	x := int64(v)
	for {
		c := byte(x & 0x7f)
		x >>= 7
		if (x == 0 && c&0x40 == 0) || (x == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
