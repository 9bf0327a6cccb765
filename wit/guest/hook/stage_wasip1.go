//go:build wasip1

package hook

import (
	"github.com/capsulegate/capsulegate/wit/guest/internal/cabi"
)

//go:wasmexport murmur:hook/lifecycle@0.9.0#on-stage
func onStage(allowP, allowN uint32) uint32 {
	cabi.ReleaseAll()
	return answer(handlers.Stage, func() (e StageEvent, err error) {
		e.ShellAllow, err = cabi.TakeStrings(allowP, allowN)
		return e, err
	})
}

//go:wasmexport cabi_post_murmur:hook/lifecycle@0.9.0#on-stage
func postStage(ret uint32) { cabi.Release(ret) }
