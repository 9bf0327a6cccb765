//go:build wasip1

package message

import (
	"fmt"
	"runtime"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/internal/cabi"
)

// send's parameters are flat (the URL, then the record's fields: message-id, context-id
// as discriminant, pointer and length, text); its result<task-result, string> spills
// into the return area passed last: the discriminant at 0, the payload from 4.
//
//go:wasmimport murmur:message/send@0.1.0 send
func sendImport(urlPtr, urlLen, idPtr, idLen, ctxDisc, ctxPtr, ctxLen, textPtr, textLen, ret uint32)

// resultSize is task-result's canonical ABI size (wasm32): three strings.
const resultSize = 24

// Send sends m to the peer whose A2A endpoint is peerURL and returns its task's result.
// A refusal is a *guest.HostError.
func Send(peerURL string, m Message) (TaskResult, error) {
	var f cabi.Frame
	up, un := f.String(peerURL)
	ip, in := f.String(m.MessageID)
	cd, cp, cn := f.OptString(m.ContextID)
	tp, tn := f.String(m.Text)
	ret, area := cabi.Aligned(4+resultSize, 4)
	sendImport(up, un, ip, in, cd, cp, cn, tp, tn, ret)
	runtime.KeepAlive(&f)
	switch area[0] {
	case 0:
	case 1:
		msg, err := cabi.TakeString(cabi.U32(area, 4), cabi.U32(area, 8))
		if err != nil {
			return TaskResult{}, fmt.Errorf("guest: send: %w", err)
		}
		return TaskResult{}, &guest.HostError{Op: "send", Msg: msg}
	default:
		return TaskResult{}, fmt.Errorf("guest: send: result discriminant %d", area[0])
	}
	b := area[4:]
	var r TaskResult
	var err error
	if r.TaskID, err = cabi.TakeString(cabi.U32(b, 0), cabi.U32(b, 4)); err == nil {
		if r.ContextID, err = cabi.TakeString(cabi.U32(b, 8), cabi.U32(b, 12)); err == nil {
			r.State, err = cabi.TakeString(cabi.U32(b, 16), cabi.U32(b, 20))
		}
	}
	if err != nil {
		return TaskResult{}, fmt.Errorf("guest: send: %w", err)
	}
	return r, nil
}
