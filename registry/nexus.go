package registry

import "context"

// Nexus is a client of Murmur's Nexus registry (owned by the Nexus work in progress).
type Nexus struct{ src Source }

// NewNexus returns the Nexus registry src names.
func NewNexus(src Source, opts OpenOptions) *Nexus { return &Nexus{src: src} }

func (n *Nexus) Fetch(ctx context.Context, ref Ref) (*Blob, error) { return nil, nil }
