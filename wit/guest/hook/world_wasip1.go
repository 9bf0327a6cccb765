//go:build wasip1

package hook

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/capsulegate/capsulegate/wit/guest/internal/cabi"
)

// The hook world's imports; the linker drops the ones a hook never calls, so a module
// imports exactly what it uses.

//go:wasmimport murmur:runtime/inference@0.4.0 run-inference
func runInferenceImport(msgsPtr, msgsLen, sysDisc, sysPtr, sysLen, modelDisc, modelPtr, modelLen, ret uint32)

//go:wasmimport murmur:runtime/tokens@0.4.0 count
func countImport(ptr, n uint32) uint64

//go:wasmimport murmur:task-io/read@0.1.0 input-len
func inputLenImport(form, ret uint32)

//go:wasmimport murmur:task-io/read@0.1.0 read-input
func readInputImport(form uint32, offset, max uint64, ret uint32)

//go:wasmimport murmur:task-io/read@0.1.0 output-len
func outputLenImport(ret uint32)

//go:wasmimport murmur:task-io/read@0.1.0 read-output
func readOutputImport(offset, max uint64, ret uint32)

//go:wasmimport murmur:conversation/read@0.2.0 read-messages
func readMessagesImport(cursorDisc, cursorPtr, cursorLen, limit, ret uint32)

// Infer runs one completion through the capsule's own inference driver.
func Infer(req InferenceRequest) (InferenceResponse, error) {
	var f cabi.Frame
	mp, mn := lowerMessages(&f, req.Messages)
	sd, sp, sn := f.OptString(req.SystemPrompt)
	md, mdp, mdn := f.OptString(req.Model)
	ret, area := cabi.Aligned(40, 8)
	runInferenceImport(mp, mn, sd, sp, sn, md, mdp, mdn, ret)
	runtime.KeepAlive(&f)
	switch area[0] {
	case 0:
		var r InferenceResponse
		var err error
		if r.Text, err = cabi.TakeString(cabi.U32(area, 8), cabi.U32(area, 12)); err != nil {
			return r, err
		}
		if r.ModelUsed, err = cabi.TakeString(cabi.U32(area, 16), cabi.U32(area, 20)); err != nil {
			return r, err
		}
		r.InputTokens, r.OutputTokens = u64(area, 24), u64(area, 32)
		return r, nil
	case 1:
		s, err := cabi.TakeString(cabi.U32(area, 8), cabi.U32(area, 12))
		if err != nil {
			return InferenceResponse{}, err
		}
		return InferenceResponse{}, errors.New(s)
	}
	return InferenceResponse{}, fmt.Errorf("hook: run-inference: result discriminant %d", area[0])
}

// CountTokens is the host's token count of text, the one its budgets use.
func CountTokens(text string) uint64 {
	var f cabi.Frame
	p, n := f.String(text)
	c := countImport(p, n)
	runtime.KeepAlive(&f)
	return c
}

// lenResult lifts result<u64, io-error>.
func lenResult(area []byte) (uint64, error) {
	if area[0] != 0 {
		return 0, IOError(area[8])
	}
	return u64(area, 8), nil
}

// strResult lifts result<string, io-error>.
func strResult(area []byte) (string, error) {
	if area[0] != 0 {
		return "", IOError(area[4])
	}
	return cabi.TakeString(cabi.U32(area, 4), cabi.U32(area, 8))
}

// InputLen is the byte length of the task input in form; an *IOError says why there is
// none (not granted, no task in scope).
func InputLen(form InputForm) (uint64, error) {
	ret, area := cabi.Aligned(16, 8)
	inputLenImport(uint32(form), ret)
	return lenResult(area)
}

// ReadInput reads the longest prefix of the input from offset that fits max bytes and
// ends on a character boundary.
func ReadInput(form InputForm, offset, max uint64) (string, error) {
	ret, area := cabi.Aligned(12, 4)
	readInputImport(uint32(form), offset, max, ret)
	return strResult(area)
}

// OutputLen is the byte length of the task's result text.
func OutputLen() (uint64, error) {
	ret, area := cabi.Aligned(16, 8)
	outputLenImport(ret)
	return lenResult(area)
}

// ReadOutput reads the result text as ReadInput reads the input.
func ReadOutput(offset, max uint64) (string, error) {
	ret, area := cabi.Aligned(12, 4)
	readOutputImport(offset, max, ret)
	return strResult(area)
}

// ReadMessages reads one page of the conversation, newest first: cursor nil starts at the
// newest message, then pass back the page's NextCursor. The host's err strings are
// "not-granted", "invalid-cursor" and "unavailable: …".
func ReadMessages(cursor *string, limit uint32) (MessagePage, error) {
	var f cabi.Frame
	cd, cp, cn := f.OptString(cursor)
	ret, area := cabi.Aligned(28, 4)
	readMessagesImport(cd, cp, cn, limit, ret)
	runtime.KeepAlive(&f)
	if area[0] != 0 {
		s, err := cabi.TakeString(cabi.U32(area, 4), cabi.U32(area, 8))
		if err != nil {
			return MessagePage{}, err
		}
		return MessagePage{}, errors.New(s)
	}
	page := MessagePage{Total: cabi.U32(area, 24)}
	var err error
	if page.NextCursor, err = cabi.TakeOptStringAt(area, 12); err != nil {
		return page, err
	}
	page.Messages, err = takeMessages(cabi.U32(area, 4), cabi.U32(area, 8))
	return page, err
}
