//go:build wasip1

// Command hostile-abi is a tool guest that breaks the canonical ABI on purpose. It does
// not use the guest SDK: murmur:tool/run@0.1.0#run and cabi_realloc are written by hand
// so that they can return what no honest guest would. $HOSTILE_ABI picks the abuse:
//
//	ret-oob        run returns a return-area pointer past the end of memory
//	str-len-4g     summary is a string of length 0xFFFFFFFF (4 GiB)
//	str-ptr-oob    summary points past the end of memory
//	utf8           summary holds invalid UTF-8
//	enum           status discriminant 7 (the enum has 3 cases)
//	option         summary's option discriminant 5
//	list-len       metadata is a list of 0x10000000 pairs
//	realloc-zero   cabi_realloc returns 0
//	realloc-oob    cabi_realloc returns 0xFFFFFFF0
//
// and, calling the host import capsulegate:http/outgoing#send:
//
//	import-ret-oob     its return-area pointer is past the end of memory
//	import-str-len-4g  the url is a string of length 0xFFFFFFFF
//	import-utf8        the method is invalid UTF-8
//
//	(anything else) a well-formed result: status passed, summary "ok", data = input data
package main

import (
	"encoding/binary"
	"os"
	"unsafe"
)

// Layout of tool-result (canonical ABI, 32-bit memory).
const (
	offStatus   = 0
	offSummary  = 4
	offData     = 16
	offMetadata = 44
	resultSize  = 52
)

var (
	area    [resultSize / 4]uint32 // 4-aligned return area
	okText  = []byte("ok")
	badUTF8 = []byte{'o', 'k', 0xff, 0xfe, 0xc0, 0x80}
	blocks  = map[uint32][]byte{} // what cabi_realloc handed out, kept alive
)

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

//go:wasmimport capsulegate:http/outgoing@0.1.0 send
func send(methodPtr, methodLen, urlPtr, urlLen, hdrPtr, hdrLen, bodyPtr, bodyLen, ret uint32)

var (
	getText = []byte("GET")
	urlText = []byte("http://example.com/")
	sendRet [6]uint32 // result<response, string> return area
)

func mode() string { return os.Getenv("HOSTILE_ABI") }

//go:wasmexport cabi_realloc
func cabiRealloc(oldPtr, oldSize, align, newSize uint32) uint32 {
	switch mode() {
	case "realloc-zero":
		return 0
	case "realloc-oob":
		return 0xFFFFFFF0
	}
	if align == 0 {
		align = 1
	}
	b := make([]byte, newSize+align)
	off := (align - addr(b)%align) % align
	b = b[off : off+newSize]
	if newSize == 0 {
		return align
	}
	if old, ok := blocks[oldPtr]; ok {
		copy(b, old[:min(oldSize, uint32(len(old)))])
		delete(blocks, oldPtr)
	}
	blocks[addr(b)] = b
	return addr(b)
}

func putOptString(b []byte, off uint32, disc byte, ptr, n uint32) {
	b[off] = disc
	binary.LittleEndian.PutUint32(b[off+4:], ptr)
	binary.LittleEndian.PutUint32(b[off+8:], n)
}

//go:wasmexport murmur:tool/run@0.1.0#run
func run(dataDisc, dataPtr, dataLen, logDisc, logPtr, logLen uint32) uint32 {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&area)), resultSize)
	clear(b)
	putOptString(b, offSummary, 1, addr(okText), uint32(len(okText)))
	ret := uint32(uintptr(unsafe.Pointer(&sendRet)))
	switch mode() {
	case "import-ret-oob":
		send(addr(getText), uint32(len(getText)), addr(urlText), uint32(len(urlText)), 0, 0, 0, 0, 0xFFFFFFF0)
	case "import-str-len-4g":
		send(addr(getText), uint32(len(getText)), addr(urlText), 0xFFFFFFFF, 0, 0, 0, 0, ret)
	case "import-utf8":
		send(addr(badUTF8), uint32(len(badUTF8)), addr(urlText), uint32(len(urlText)), 0, 0, 0, 0, ret)
	case "ret-oob":
		return 0xFFFFFFFC // aligned, and ptr+52 overflows 32 bits
	case "str-len-4g":
		putOptString(b, offSummary, 1, addr(okText), 0xFFFFFFFF)
	case "str-ptr-oob":
		putOptString(b, offSummary, 1, 0xFFFFFF00, 16)
	case "utf8":
		putOptString(b, offSummary, 1, addr(badUTF8), uint32(len(badUTF8)))
	case "enum":
		b[offStatus] = 7
	case "option":
		b[offSummary] = 5
	case "list-len":
		binary.LittleEndian.PutUint32(b[offMetadata:], addr(okText))
		binary.LittleEndian.PutUint32(b[offMetadata+4:], 0x10000000)
	default:
		if dataDisc == 1 {
			if in, ok := blocks[dataPtr]; ok && uint32(len(in)) >= dataLen {
				putOptString(b, offData, 1, dataPtr, dataLen) // still pinned in blocks
			}
		}
	}
	return uint32(uintptr(unsafe.Pointer(&area)))
}

func main() {}
