package component

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/capsulegate/capsulegate/errs"
)

// bail carries a refusal out of the recursive descent; Parse recovers it and nothing
// else, so a genuine bug still panics (and fuzzing finds it).
type bail struct{ err *errs.Error }

// reader reads one region of the input, with offsets relative to the whole input so
// errors point at the right byte.
type reader struct {
	b    []byte // the whole input
	p    int    // next byte
	end  int    // end of the region
	path *path  // where we are, for error messages
}

// path is a chain of "section 7 (type)", "item 3", "component 0" segments.
type path struct {
	parent *path
	seg    string
}

// String joins the segments outermost first.
func (p *path) String() string {
	var segs []string
	for q := p; q != nil; q = q.parent {
		if q.seg != "" {
			segs = append(segs, q.seg)
		}
	}
	for i, j := 0, len(segs)-1; i < j; i, j = i+1, j-1 {
		segs[i], segs[j] = segs[j], segs[i]
	}
	return strings.Join(segs, "/")
}

func (p *path) child(format string, args ...any) *path {
	return &path{parent: p, seg: fmt.Sprintf(format, args...)}
}

// failAt aborts parsing with a coded error at offset off.
func failAt(pth *path, off int, code, format string, args ...any) {
	e := errs.New(code, part, fmt.Sprintf(format, args...), fixFor(code))
	e = e.At(fmt.Sprintf("offset %d (0x%x)", off, off), pth.String())
	panic(bail{e})
}

func fixFor(code string) string {
	switch code {
	case CodeHeader:
		return "pass a WebAssembly component (layer 1, version 0x0d), e.g. built for wasm32-wasip2 or by wit-component"
	case CodeMalformed, CodeUnknown, CodeIndex, CodeType:
		return "the binary is corrupt or was built by an incompatible tool; rebuild it with a current wit-component or wasm-tools"
	case CodeUnsupported:
		return "build the component without async, threads or GC features (wasm32-wasip2 with WASI 0.2 and synchronous exports)"
	case CodeValue:
		return "components with value definitions, value imports or exports (start functions) are not run; export functions instead"
	case CodeLimit:
		return "the component is nested or typed more deeply than any real toolchain output; check where it came from"
	case CodePlan:
		return "the component imports or instantiates something the runtime cannot provide; rebuild against the WASI 0.2 world"
	}
	return ""
}

func (r *reader) fail(code, format string, args ...any) {
	failAt(r.path, r.p, code, format, args...)
}

func (r *reader) done() bool { return r.p >= r.end }

func (r *reader) remaining() int { return r.end - r.p }

func (r *reader) byte() byte {
	if r.p >= r.end {
		r.fail(CodeMalformed, "unexpected end of data")
	}
	c := r.b[r.p]
	r.p++
	return c
}

func (r *reader) peek() byte {
	if r.p >= r.end {
		r.fail(CodeMalformed, "unexpected end of data")
	}
	return r.b[r.p]
}

// u32 reads an unsigned LEB128 of at most 5 bytes fitting 32 bits.
func (r *reader) u32() uint32 {
	start := r.p
	var v uint64
	for i := 0; ; i++ {
		if i == 5 {
			failAt(r.path, start, CodeMalformed, "LEB128 number longer than 5 bytes")
		}
		c := r.byte()
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			break
		}
	}
	if v > 0xffffffff {
		failAt(r.path, start, CodeMalformed, "LEB128 number does not fit 32 bits")
	}
	return uint32(v)
}

// u64 reads an unsigned LEB128 of at most 10 bytes (memory64 limits).
func (r *reader) u64() uint64 {
	start := r.p
	var v uint64
	for i := 0; ; i++ {
		if i == 10 {
			failAt(r.path, start, CodeMalformed, "LEB128 number longer than 10 bytes")
		}
		c := r.byte()
		if i == 9 && c > 1 {
			failAt(r.path, start, CodeMalformed, "LEB128 number does not fit 64 bits")
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v
		}
	}
}

// count reads a vector length; every element takes at least one byte, so a count
// larger than what is left is malformed, and preallocating count elements is bounded
// by the input.
func (r *reader) count(what string) int {
	start := r.p
	n := r.u32()
	if int64(n) > int64(r.remaining()) {
		failAt(r.path, start, CodeMalformed, "%s count %d exceeds the %d bytes left", what, n, r.remaining())
	}
	return int(n)
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || n > r.remaining() {
		r.fail(CodeMalformed, "%d bytes wanted, %d left", n, r.remaining())
	}
	s := r.b[r.p : r.p+n : r.p+n]
	r.p += n
	return s
}

func (r *reader) name() string {
	start := r.p
	n := r.u32()
	if int64(n) > int64(r.remaining()) {
		failAt(r.path, start, CodeMalformed, "name of %d bytes exceeds the %d bytes left", n, r.remaining())
	}
	s := r.bytes(int(n))
	if !utf8.Valid(s) {
		failAt(r.path, start, CodeMalformed, "name is not valid UTF-8")
	}
	return string(s)
}

// sub returns a reader over the next n bytes and skips them in r.
func (r *reader) sub(n int, pth *path) *reader {
	if n < 0 || n > r.remaining() {
		r.fail(CodeMalformed, "section of %d bytes exceeds the %d bytes left", n, r.remaining())
	}
	s := &reader{b: r.b, p: r.p, end: r.p + n, path: pth}
	r.p += n
	return s
}

func (r *reader) expectEnd(what string) {
	if r.p != r.end {
		r.fail(CodeMalformed, "%d unread bytes at the end of %s", r.end-r.p, what)
	}
}
