// Package runtime runs capsules: it stages them (resolve, verify, compile on the wasm
// engine), hosts them for the gateway and runs their sessions and tasks — the agent
// loop, tool dispatch, shellTools and the event stream with its sinks. The guests
// themselves run on package runtime/wasm, which this package uses only through its
// exported API (docs/architecture.md).
package runtime

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capsulegate/capsulegate/internal/filesum"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
)

// Runtime stages capsules and runs their sessions on one wasm engine. One per process;
// Close releases the engine.
type Runtime struct {
	engine  *wasm.Engine
	metrics *Metrics
	// modules remembers each compiled and checked module by what identifies its bytes
	// (moduleKey), so staging the same artifact or script for another capsule skips
	// inflating, reading and hashing it again: a gateway hosting thousands of copies of
	// one capsule stages each in a fraction of the time.
	modules sync.Map // string -> *wasm.Module
	scripts scriptMemo
	// sums are the sha256 of script modules by file identity (filesum), in memory
	// unless KeepSums named a file for them.
	sums *filesum.Cache
}

// New starts the wasm engine with opts and returns a Runtime on it.
func New(ctx context.Context, opts ...wasm.EngineOption) (*Runtime, error) {
	e, err := wasm.NewEngine(ctx, append([]wasm.EngineOption{murmur.Install()}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &Runtime{engine: e, metrics: newMetrics(), sums: filesum.New()}, nil
}

// KeepSums keeps the sums of the script modules staged in the file at path too, so the
// next process staging the same unchanged files does not read them (a gateway keeps it
// in its cache folder, beside the compiled modules). Call it before staging.
func (r *Runtime) KeepSums(path string) error {
	c, err := filesum.Open(path)
	if err != nil {
		return err
	}
	r.sums = c
	return nil
}

// Engine returns the wasm engine the runtime's guests run on.
func (r *Runtime) Engine() *wasm.Engine { return r.engine }

// Register adds every collector, the engine's and the sessions', to reg. The gateway
// calls it again with the registry of each new Caddy config, so counters survive a
// reload.
func (r *Runtime) Register(reg prometheus.Registerer) error {
	if err := r.engine.Metrics().Register(reg); err != nil {
		return err
	}
	return r.metrics.register(reg)
}

// Close releases the engine.
func (r *Runtime) Close(ctx context.Context) error {
	err := r.engine.Close(ctx)
	if serr := r.sums.Close(); err == nil {
		err = serr
	}
	return err
}
