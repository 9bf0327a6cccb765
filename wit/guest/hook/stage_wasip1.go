//go:build wasip1

package hook

import (
	"errors"

	"github.com/capsulegate/capsulegate/wit/guest/internal/cabi"
)

//go:wasmexport murmur:hook/lifecycle@0.9.0#on-stage
func onStage(allowP, allowN uint32) uint32 {
	cabi.ReleaseAll()
	return answer(handlers.Stage, func() (StageEvent, error) {
		var e StageEvent
		if allowN > 1<<24 {
			return e, errors.New("shell-allow list too long")
		}
		b, err := cabi.Take(allowP, allowN*8)
		if err != nil {
			return e, err
		}
		e.ShellAllow = make([]string, allowN)
		for i := range e.ShellAllow {
			if e.ShellAllow[i], err = cabi.TakeString(cabi.U32(b, uint32(i)*8), cabi.U32(b, uint32(i)*8+4)); err != nil {
				return e, err
			}
		}
		return e, nil
	})
}

//go:wasmexport cabi_post_murmur:hook/lifecycle@0.9.0#on-stage
func postStage(ret uint32) { cabi.Release(ret) }

// lowerManifests writes ok(write-manifests(list<tool-manifest>)) in the result layout:
// the list's (ptr, len) is the hook-output payload at retOutString, its elements two
// strings (16 bytes, aligned 4) each, the same layout as a list of string pairs.
func lowerManifests(ms []ToolManifest) uint32 {
	f := new(cabi.Frame)
	ret, b := f.Alloc(retSize, 4)
	b[retOutDisc] = discWriteManifests
	pairs := make([][2]string, len(ms))
	for i, m := range ms {
		pairs[i] = [2]string{m.BinaryName, m.Content}
	}
	p, n := f.Pairs(pairs)
	cabi.PutU32(b, retOutString, p)
	cabi.PutU32(b, retOutString+4, n)
	cabi.Hold(ret, f)
	return ret
}
