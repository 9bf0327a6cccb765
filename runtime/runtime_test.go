package runtime

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// newRuntime starts a Runtime with its metrics on a registry of its own, closed when the
// test ends.
func newRuntime(t testing.TB, opts ...wasm.EngineOption) (*Runtime, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	r, err := New(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r, reg
}
