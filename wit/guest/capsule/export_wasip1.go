//go:build wasip1

package capsule

import _ "github.com/capsulegate/capsulegate/wit/guest/internal/cabi" // cabi_realloc

//go:wasmexport murmur:capsule/run@0.1.0#run
func run() {
	if handler == nil {
		panic("capsule: no handler installed (call capsule.Handle from init)")
	}
	if err := handler(); err != nil {
		panic("capsule: " + err.Error())
	}
}
