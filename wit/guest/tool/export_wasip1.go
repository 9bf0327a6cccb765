//go:build wasip1

package tool

import (
	"fmt"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/internal/cabi"
)

//go:wasmexport murmur:tool/run@0.1.0#run
func run(dataDisc, dataPtr, dataLen, logDisc, logPtr, logLen uint32) uint32 {
	cabi.ReleaseAll()
	var in Input
	data, err1 := cabi.TakeOptString(dataDisc, dataPtr, dataLen)
	logPath, err2 := cabi.TakeOptString(logDisc, logPtr, logLen)
	in.Data, in.LogPath = data, logPath
	var res Result
	switch {
	case err1 != nil || err2 != nil:
		res = failure(fmt.Sprintf("tool: bad input: %v", firstErr(err1, err2)))
	case handler == nil:
		res = failure("tool: no handler installed (call tool.Handle from init)")
	default:
		res = call(in)
	}
	return lower(res)
}

//go:wasmexport cabi_post_murmur:tool/run@0.1.0#run
func postRun(ret uint32) { cabi.Release(ret) }

func call(in Input) (res Result) {
	defer func() {
		if r := recover(); r != nil {
			res = failure(fmt.Sprintf("tool: panic: %v", r))
		}
	}()
	return handler(in)
}

func failure(msg string) Result { return Result{Status: Error, Summary: guest.Some(msg)} }

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// lower writes r in the tool-result layout and returns the address of the return area,
// which stays alive until the host calls cabi_post.
func lower(r Result) uint32 {
	if r.Status > Error {
		r = failure(fmt.Sprintf("tool: handler returned invalid %v", r.Status))
	}
	f := new(cabi.Frame)
	ret, b := f.Alloc(cabi.ResultSize, 4)
	b[cabi.ResultStatus] = byte(r.Status)
	f.PutOptString(b, cabi.ResultSummary, r.Summary)
	f.PutOptString(b, cabi.ResultData, r.Data)
	f.PutOptString(b, cabi.ResultDataPath, r.DataPath)
	if r.Truncated {
		b[cabi.ResultTrunc] = 1
	}
	kv := make([][2]string, len(r.Metadata))
	for i, p := range r.Metadata {
		kv[i] = [2]string{p.Key, p.Value}
	}
	mp, mn := f.Pairs(kv)
	cabi.PutU32(b, cabi.ResultMetadata, mp)
	cabi.PutU32(b, cabi.ResultMetadata+4, mn)
	cabi.Hold(ret, f)
	return ret
}
