package registry

import "context"

// OCI is a registry in an OCI distribution registry (owned by the OCI work in progress).
type OCI struct{ src Source }

// NewOCI returns the OCI registry src names.
func NewOCI(src Source, opts OpenOptions) (*OCI, error) { return &OCI{src: src}, nil }

func (o *OCI) Fetch(ctx context.Context, ref Ref) (*Blob, error) { return nil, nil }
