package wasm

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/capsulegate/capsulegate/internal/wasmbin"
)

// dataImage is a module's initial data as one block at a fixed offset.
type dataImage struct {
	off   uint32
	block []byte
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
	content = wasmbin.AppendSigned(content, int64(int32(img.off)))
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
func moduleData(wasm []byte) (sections []wasmbin.Section, di int, img *dataImage, ok bool) {
	sections, ok = wasmbin.Sections(wasm)
	if !ok {
		return nil, 0, nil, false
	}
	di = slices.IndexFunc(sections, func(s wasmbin.Section) bool { return s.ID == wasmbin.SectionData })
	if di < 0 {
		return nil, 0, nil, false
	}
	segs, err := parseDataSegments(wasm[sections[di].Start:sections[di].End])
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
func rebuildData(wasm []byte, sections []wasmbin.Section, di int, content []byte, count byte) []byte {
	replace := map[int][]byte{di: content}
	for i, s := range sections {
		if s.ID == wasmbin.SectionDataCount {
			replace[i] = []byte{count}
		}
	}
	return wasmbin.Rebuild(wasm, sections, replace)
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
	r := wasmbin.NewReader(b)
	count := r.U()
	segs := make([]dataSegment, 0, min(count, 1<<20))
	for i := uint64(0); i < count && !r.Bad(); i++ {
		switch flags := r.U(); flags {
		case 0:
		case 2:
			if r.U() != 0 {
				return nil, errUnsupportedData
			}
		default:
			return nil, errUnsupportedData // passive
		}
		if r.Byte() != 0x41 {
			return nil, errUnsupportedData
		}
		off := r.S32()
		if r.Byte() != 0x0b {
			return nil, errUnsupportedData
		}
		data := r.Bytes(r.U())
		segs = append(segs, dataSegment{off: uint32(off), data: data})
	}
	if r.Bad() || len(r.Rest()) != 0 {
		return nil, errUnsupportedData
	}
	return segs, nil
}
