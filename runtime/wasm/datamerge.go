package wasm

import (
	"encoding/binary"
	"errors"
)

// dataImage is a module's initial data as one block at a fixed offset.
type dataImage struct {
	off   uint32
	block []byte
}

// wasmSection is one section of a module: content bounds and header start.
type wasmSection struct {
	id         byte
	start, end int
	hdr        int
}

// mergeDataSegments rewrites a module's active data segments with constant offsets into
// one segment, so instantiation copies one block instead of evaluating each segment (Go's
// linker emits tens of thousands; wazero allocates per segment on every instantiation).
// The result initialises memory exactly as the original: segments are applied in order,
// later bytes win, gaps are zero as fresh memory is. Anything it does not understand —
// passive segments, non-constant offsets, a malformed section — leaves the module as it
// is (ok false); the compiler then validates the original as usual.
func mergeDataSegments(wasm []byte) (out []byte, ok bool) {
	sections, di, img, ok := moduleData(wasm)
	if !ok {
		return wasm, false
	}
	// One active segment: flags 0, i32.const off, end, the bytes.
	content := []byte{0x01, 0x00, 0x41}
	content = appendSleb32(content, int32(img.off))
	content = append(content, 0x0b)
	content = binary.AppendUvarint(content, uint64(len(img.block)))
	content = append(content, img.block...)
	return rebuildData(wasm, sections, di, content, 1), true
}

// stripDataSegments returns the module without data segments and its initial data as one
// image, for a memory allocator that maps the image copy-on-write instead of copying it
// into every instance.
func stripDataSegments(wasm []byte) (stripped []byte, img *dataImage, ok bool) {
	sections, di, img, ok := moduleData(wasm)
	if !ok {
		return wasm, nil, false
	}
	return rebuildData(wasm, sections, di, []byte{0x00}, 0), img, true
}

// moduleData splits a module into sections and merges its data segments into an image.
func moduleData(wasm []byte) (sections []wasmSection, di int, img *dataImage, ok bool) {
	if len(wasm) < 8 {
		return nil, 0, nil, false
	}
	di = -1
	for p := 8; p < len(wasm); {
		id := wasm[p]
		size, n := binary.Uvarint(wasm[p+1:])
		if n <= 0 || size > uint64(len(wasm)) {
			return nil, 0, nil, false
		}
		start := p + 1 + n
		end := start + int(size)
		if end > len(wasm) {
			return nil, 0, nil, false
		}
		if id == 11 {
			di = len(sections)
		}
		sections = append(sections, wasmSection{id, start, end, p})
		p = end
	}
	if di < 0 {
		return nil, 0, nil, false
	}
	segs, err := parseDataSegments(wasm[sections[di].start:sections[di].end])
	if err != nil || len(segs) < 2 {
		return nil, 0, nil, false
	}
	lo, hi := segs[0].off, segs[0].off
	for _, s := range segs {
		end := uint64(s.off) + uint64(len(s.data))
		if end > 1<<32 {
			return nil, 0, nil, false
		}
		lo = min(lo, s.off)
		hi = max(hi, uint32(end))
	}
	if hi-lo > 256<<20 {
		return nil, 0, nil, false // sparse data far apart: one block would waste memory
	}
	block := make([]byte, hi-lo)
	for _, s := range segs {
		copy(block[s.off-lo:], s.data)
	}
	return sections, di, &dataImage{off: lo, block: block}, true
}

// rebuildData returns wasm with the data section's content replaced and the data count
// section, if any, set to count.
func rebuildData(wasm []byte, sections []wasmSection, di int, content []byte, count byte) []byte {
	out := make([]byte, 0, len(wasm))
	out = append(out, wasm[:8]...)
	for i, s := range sections {
		switch {
		case i == di:
			out = append(out, 11)
			out = binary.AppendUvarint(out, uint64(len(content)))
			out = append(out, content...)
		case s.id == 12:
			out = append(out, 12, 1, count)
		default:
			out = append(out, wasm[s.hdr:s.end]...)
		}
	}
	return out
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
