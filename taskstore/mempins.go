package taskstore

import (
	"context"
	"slices"
	"strings"
	"sync"
)

// MemPins keeps runtime pins in memory: the Pins of a gateway without a durable store
// (or one whose store does not implement Pins) and of `caddy capsule run`. Its pins last
// as long as the process, and no other replica sees them. The zero value is empty and
// ready; it is safe for concurrent use and must not be copied after first use.
type MemPins struct {
	mu   sync.Mutex
	pins map[string]map[string]RuntimePin // capsule → name → pin
}

// RuntimePins returns the capsule's runtime pins in name order.
func (m *MemPins) RuntimePins(ctx context.Context, capsule string) ([]RuntimePin, error) {
	if err := CheckID("capsule", capsule); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	out := make([]RuntimePin, 0, len(m.pins[capsule]))
	for _, p := range m.pins[capsule] {
		out = append(out, p)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b RuntimePin) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// PutRuntimePin creates or replaces the pin (p.Capsule, p.Name) once CheckRuntimePin
// passes it.
func (m *MemPins) PutRuntimePin(ctx context.Context, p RuntimePin) error {
	if err := CheckRuntimePin(p); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p.Pulled = p.Pulled.Round(0) // no monotonic reading: as a store reads it back
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pins == nil {
		m.pins = map[string]map[string]RuntimePin{}
	}
	if m.pins[p.Capsule] == nil {
		m.pins[p.Capsule] = map[string]RuntimePin{}
	}
	m.pins[p.Capsule][p.Name] = p
	return nil
}

// DeleteRuntimePin removes the pin (capsule, name) and reports whether there was one.
func (m *MemPins) DeleteRuntimePin(ctx context.Context, capsule, name string) (bool, error) {
	if err := CheckID("capsule", capsule); err != nil {
		return false, err
	}
	if err := CheckPinName(name); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, had := m.pins[capsule][name]
	if had {
		delete(m.pins[capsule], name)
		if len(m.pins[capsule]) == 0 {
			delete(m.pins, capsule)
		}
	}
	return had, nil
}

var _ Pins = (*MemPins)(nil)
