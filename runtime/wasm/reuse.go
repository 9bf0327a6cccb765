package wasm

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/api"
)

// Warm instances (WithInstanceReuse). Instantiating a Go guest costs wazero a function
// reference per table element, thousands of them, on every call. With reuse on, an
// instance that ended its call cleanly is reset to its init snapshot — its memory
// remapped copy-on-write from the snapshot image, its globals restored — and serves the
// next call of the same grants. Memory and globals are then exactly a fresh instance's;
// what wazero keeps outside them carries over: a file the guest opened and did not close
// stays open for the next call of the same session. That is why reuse is an explicit
// choice, never the default.

// maxWarmPerKey bounds the warm instances kept per grants; maxWarmKeys the grants kept
// per module (older ones are closed).
const (
	maxWarmPerKey = 4
	maxWarmKeys   = 8
)

// warmInstance is an instance between calls.
type warmInstance struct {
	m     api.Module
	alloc *limitedAllocator
	calls *callCtx
	intr  *interrupter // nil on the fallback runtime
}

// callCtx carries the context of the call an instance is serving, for host functions
// fixed at instantiation (the guest's sleep).
type callCtx struct {
	p atomic.Pointer[context.Context]
	// intr is the instance's interrupter, for host functions that see the context end
	// before the AfterFunc that sets the flag has run.
	intr atomic.Pointer[interrupter]
}

// interrupt sets the instance's interrupt flag now.
func (c *callCtx) interrupt() { c.intr.Load().fire() }

func (c *callCtx) set(ctx context.Context) { c.p.Store(&ctx) }

func (c *callCtx) get() context.Context {
	if p := c.p.Load(); p != nil {
		return *p
	}
	return context.Background()
}

// warmPool holds the warm instances of one compiled module, by grants.
type warmPool struct {
	mu    sync.Mutex
	byKey map[[32]byte][]*warmInstance
	order [][32]byte
}

// warmKey identifies grants an instance can serve again: the snapshot's key and the very
// filesystem and output writers it was created with.
func warmKey(snap [32]byte, g Grants) [32]byte {
	return sha256.Sum256(fmt.Appendf(nil, "%x %p %p %p", snap, g.FS, g.Stdout, g.Stderr))
}

func (p *warmPool) get(key [32]byte) *warmInstance {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.byKey[key]
	if len(list) == 0 {
		return nil
	}
	w := list[len(list)-1]
	p.byKey[key] = list[:len(list)-1]
	return w
}

// put keeps w for the next call with key, or closes it when the pool is full.
func (p *warmPool) put(ctx context.Context, key [32]byte, w *warmInstance) {
	p.mu.Lock()
	if p.byKey == nil {
		p.byKey = map[[32]byte][]*warmInstance{}
	}
	var evicted []*warmInstance
	if _, ok := p.byKey[key]; !ok {
		if len(p.order) == maxWarmKeys {
			old := p.order[0]
			evicted = p.byKey[old]
			delete(p.byKey, old)
			p.order = p.order[1:]
		}
		p.order = append(p.order, key)
	}
	if len(p.byKey[key]) < maxWarmPerKey {
		p.byKey[key] = append(p.byKey[key], w)
		w = nil
	}
	p.mu.Unlock()
	for _, e := range evicted {
		e.m.Close(ctx)
	}
	if w != nil {
		w.m.Close(ctx)
	}
}

// reset brings w back to snap: false when it cannot (its memory grew past the snapshot,
// it is not memory-mapped, or the remap failed), and then it must be closed.
func (w *warmInstance) reset(snap *snapshot) bool {
	mm := w.alloc.mapped
	mem := w.m.Memory()
	if mm == nil || mem == nil || mem.Size() != snap.pages*pageSize || w.m.IsClosed() {
		return false
	}
	if snap.image.mapOnto(mm.buf) != nil {
		return false
	}
	return snap.restore(w.m) == nil
}
