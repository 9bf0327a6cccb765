//go:build wasip1

package guest

import (
	"fmt"
	"io"
	"runtime"

	"github.com/capsulegate/capsulegate/wit/guest/internal/cabi"
)

// Each import is a plain function; the linker drops the ones a guest never calls, so a
// module imports exactly the host functions it uses.

//go:wasmimport murmur:tool-registry/invoke@0.1.0 invoke
func invokeImport(namePtr, nameLen, dataDisc, dataPtr, dataLen, logDisc, logPtr, logLen, ret uint32)

//go:wasmimport capsulegate:http/outgoing@0.1.0 send
func sendImport(methodPtr, methodLen, urlPtr, urlLen, hdrPtr, hdrLen, bodyPtr, bodyLen, ret uint32)

//go:wasmimport capsulegate:http/outgoing@0.2.0 open
func openImport(methodPtr, methodLen, urlPtr, urlLen, hdrPtr, hdrLen, bodyPtr, bodyLen, ret uint32)

//go:wasmimport capsulegate:http/outgoing@0.2.0 read-body
func readBodyImport(body, max, ret uint32)

//go:wasmimport capsulegate:http/outgoing@0.2.0 close-body
func closeBodyImport(body uint32)

//go:wasmimport murmur:stream/events@0.1.0 emit-chunk
func emitChunkImport(ptr, n uint32)

//go:wasmimport murmur:stream/events@0.1.0 emit-thinking-chunk
func emitThinkingChunkImport(ptr, n uint32)

//go:wasmimport murmur:stream/events@0.1.0 tool-call-started
func toolCallStartedImport(idPtr, idLen, namePtr, nameLen uint32)

//go:wasmimport murmur:stream/events@0.1.0 tool-call-input-bytes
func toolCallInputBytesImport(idPtr, idLen uint32, n uint64)

//go:wasmimport murmur:task/task@0.1.0 request-input
func requestInputImport(ptr, n, ret uint32)

// Invoke calls the tool name through murmur:tool-registry/invoke. A refusal by the host
// is a *HostError.
func Invoke(name string, in ToolInput) (ToolResult, error) {
	var f cabi.Frame
	np, nn := f.String(name)
	dd, dp, dn := f.OptString(in.Data)
	ld, lp, ln := f.OptString(in.LogPath)
	ret, area := cabi.Aligned(4+cabi.ResultSize, 4)
	invokeImport(np, nn, dd, dp, dn, ld, lp, ln, ret)
	runtime.KeepAlive(&f)
	switch area[0] {
	case 0:
		return liftToolResult(area[4:])
	case 1:
		return ToolResult{}, liftErr("invoke", area)
	}
	return ToolResult{}, fmt.Errorf("guest: invoke: result discriminant %d", area[0])
}

func liftToolResult(b []byte) (ToolResult, error) {
	r := ToolResult{Status: Status(b[cabi.ResultStatus]), Truncated: b[cabi.ResultTrunc] != 0}
	if r.Status > StatusError {
		return ToolResult{}, fmt.Errorf("guest: invoke: status discriminant %d", r.Status)
	}
	var err error
	for _, o := range []struct {
		dst *(*string)
		off uint32
	}{{&r.Summary, cabi.ResultSummary}, {&r.Data, cabi.ResultData}, {&r.DataPath, cabi.ResultDataPath}} {
		if *o.dst, err = cabi.TakeOptStringAt(b, o.off); err != nil {
			return ToolResult{}, fmt.Errorf("guest: invoke: %w", err)
		}
	}
	kv, err := cabi.TakePairs(cabi.U32(b, cabi.ResultMetadata), cabi.U32(b, cabi.ResultMetadata+4))
	if err != nil {
		return ToolResult{}, fmt.Errorf("guest: invoke: %w", err)
	}
	r.Metadata = toPairs(kv)
	return r, nil
}

func liftErr(op string, area []byte) error {
	msg, err := cabi.TakeString(cabi.U32(area, 4), cabi.U32(area, 8))
	if err != nil {
		return fmt.Errorf("guest: %s: %w", op, err)
	}
	return &HostError{Op: op, Msg: msg}
}

// HTTPSend sends req through capsulegate:http/outgoing; the host applies the capsule's
// network rules and does not follow redirects. A refusal is a *HostError.
func HTTPSend(req HTTPRequest) (HTTPResponse, error) {
	var f cabi.Frame
	mp, mn := f.String(req.Method)
	up, un := f.String(req.URL)
	hp, hn := f.Pairs(fromPairs(req.Headers))
	bp, bn := f.Bytes(req.Body)
	ret, area := cabi.Aligned(24, 4)
	sendImport(mp, mn, up, un, hp, hn, bp, bn, ret)
	runtime.KeepAlive(&f)
	switch area[0] {
	case 0:
		resp := HTTPResponse{Status: uint16(area[4]) | uint16(area[5])<<8}
		kv, err := cabi.TakePairs(cabi.U32(area, 8), cabi.U32(area, 12))
		if err != nil {
			return HTTPResponse{}, fmt.Errorf("guest: send: %w", err)
		}
		resp.Headers = toPairs(kv)
		if resp.Body, err = cabi.Take(cabi.U32(area, 16), cabi.U32(area, 20)); err != nil {
			return HTTPResponse{}, fmt.Errorf("guest: send: %w", err)
		}
		return resp, nil
	case 1:
		return HTTPResponse{}, liftErr("send", area)
	}
	return HTTPResponse{}, fmt.Errorf("guest: send: result discriminant %d", area[0])
}

// HTTPOpen sends req through capsulegate:http/outgoing@0.2.0 under the same rules as
// HTTPSend, and returns once the response head has arrived; its body is read as it
// arrives. A refusal is a *HostError.
func HTTPOpen(req HTTPRequest) (HTTPStream, error) {
	var f cabi.Frame
	mp, mn := f.String(req.Method)
	up, un := f.String(req.URL)
	hp, hn := f.Pairs(fromPairs(req.Headers))
	bp, bn := f.Bytes(req.Body)
	// result<response-head, string>: the head's body handle at 4, status at 8, headers at 12.
	ret, area := cabi.Aligned(20, 4)
	openImport(mp, mn, up, un, hp, hn, bp, bn, ret)
	runtime.KeepAlive(&f)
	switch area[0] {
	case 0:
		resp := HTTPStream{Status: uint16(area[8]) | uint16(area[9])<<8, Body: &HTTPBody{handle: cabi.U32(area, 4)}}
		kv, err := cabi.TakePairs(cabi.U32(area, 12), cabi.U32(area, 16))
		if err != nil {
			resp.Body.Close()
			return HTTPStream{}, fmt.Errorf("guest: open: %w", err)
		}
		resp.Headers = toPairs(kv)
		return resp, nil
	case 1:
		return HTTPStream{}, liftErr("open", area)
	}
	return HTTPStream{}, fmt.Errorf("guest: open: result discriminant %d", area[0])
}

// Read reads the bytes that have arrived, waiting for at least one; it returns io.EOF
// once the body has ended. A failure (the response body cap, a broken connection) is a
// *HostError.
func (b *HTTPBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, errBodyClosed
	}
	if b.eof {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	ret, area := cabi.Aligned(12, 4)
	readBodyImport(b.handle, uint32(min(len(p), 1<<20)), ret)
	switch area[0] {
	case 0:
		data, err := cabi.Take(cabi.U32(area, 4), cabi.U32(area, 8))
		if err != nil {
			return 0, fmt.Errorf("guest: read-body: %w", err)
		}
		if len(data) == 0 {
			b.eof = true
			return 0, io.EOF
		}
		return copy(p, data), nil
	case 1:
		return 0, liftErr("read-body", area)
	}
	return 0, fmt.Errorf("guest: read-body: result discriminant %d", area[0])
}

// Close releases the body; reading it afterwards fails. Closing twice does nothing.
func (b *HTTPBody) Close() error {
	if !b.closed {
		b.closed = true
		closeBodyImport(b.handle)
	}
	return nil
}

// EmitChunk streams a piece of the answer through murmur:stream/events.
func EmitChunk(chunk string) {
	var f cabi.Frame
	emitChunkImport(f.String(chunk))
	runtime.KeepAlive(&f)
}

// EmitThinkingChunk streams a piece of reasoning through murmur:stream/events.
func EmitThinkingChunk(chunk string) {
	var f cabi.Frame
	emitThinkingChunkImport(f.String(chunk))
	runtime.KeepAlive(&f)
}

// ToolCallStarted reports that the model started the tool call id to tool name.
func ToolCallStarted(id, name string) {
	var f cabi.Frame
	ip, in := f.String(id)
	np, nn := f.String(name)
	toolCallStartedImport(ip, in, np, nn)
	runtime.KeepAlive(&f)
}

// ToolCallInputBytes reports how many input bytes of call id have streamed so far.
func ToolCallInputBytes(id string, n uint64) {
	var f cabi.Frame
	ip, in := f.String(id)
	toolCallInputBytesImport(ip, in, n)
	runtime.KeepAlive(&f)
}

// RequestInput asks the task's user for input through murmur:task/task and returns the
// answer. The WIT function cannot fail; a malformed answer from the host panics.
func RequestInput(prompt string) string {
	var f cabi.Frame
	pp, pn := f.String(prompt)
	ret, area := cabi.Aligned(8, 4)
	requestInputImport(pp, pn, ret)
	runtime.KeepAlive(&f)
	s, err := cabi.TakeString(cabi.U32(area, 0), cabi.U32(area, 4))
	if err != nil {
		panic(fmt.Errorf("guest: request-input: %w", err))
	}
	return s
}
