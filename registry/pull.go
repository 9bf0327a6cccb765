package registry

import (
	"context"
	"fmt"
	"github.com/capsulegate/capsulegate/internal/digest"
)

// PullVerified fetches ref for a runtime pull (Murmur's artifact manager), which no lock
// pins. The bytes are hashed here and checked against pinned — the digest the operator's
// trust policy pins for name@version — when it is given, else against the digest the
// registry states for them in its own records: an OCI manifest's layer digest, a
// folder's .sha256, the sha256 of a Nexus listing; never a response header alone, so a
// Nexus registry whose listing names no digest serves no runtime pull that the policy
// does not pin. It returns the blob with its archive opened with every rule and checked
// to be name@version; it writes nothing.
func PullVerified(ctx context.Context, reg Registry, ref Ref, pinned string) (*Blob, *Archive, error) {
	if err := checkRef(ref); err != nil {
		return nil, nil, err
	}
	blob, err := reg.Fetch(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	// A Verifying registry hashed the bytes as it checked them against its own record.
	sum := blob.SHA256
	if _, ok := reg.(Verifying); !ok || sum == "" {
		sum = digest.Hex(blob.Data)
	}
	where := fmt.Sprint(reg)
	switch {
	case pinned != "":
		if sum != pinned {
			return nil, nil, refuse(CodePullDigest,
				fmt.Sprintf("artifact %s: the trust policy pins sha256 %s, but registry %s serves bytes hashing to %s", ref, pinned, where, sum),
				"if the registry's copy is the one wanted, pin its digest in the trust policy; otherwise it was altered")
		}
	default:
		stated, from, err := statedDigest(ctx, unwrap(reg), ref, blob)
		if err != nil {
			return nil, nil, err
		}
		if stated != sum {
			return nil, nil, refuse(CodePullDigest,
				fmt.Sprintf("artifact %s: %s of registry %s states sha256 %s, but its bytes hash to %s", ref, from, where, stated, sum),
				"the registry's copy is damaged or altered: republish it, or pin the wanted digest in the trust policy")
		}
	}
	arc := blob.Archive
	if arc == nil {
		if arc, err = openedArchives.open(blob.Data, sum); err != nil {
			return nil, nil, fmt.Errorf("artifact %s: %w", ref, err)
		}
	}
	if m := arc.Manifest(); m.Name != ref.Name || m.Version != ref.Version {
		return nil, nil, refuse(CodeIdentity, fmt.Sprintf("the registry's file for %s holds %s@%s", ref, m.Name, m.Version),
			"republish the right archive under that name and version")
	}
	blob.SHA256 = sum
	return blob, arc, nil
}

// statedDigest is the digest reg states for ref in its own records, and what stated it.
func statedDigest(ctx context.Context, reg Registry, ref Ref, blob *Blob) (string, string, error) {
	switch r := reg.(type) {
	case *OCI:
		return blob.SHA256, "the manifest", nil // Fetch read it there and checked the layer against it
	case *Local:
		return blob.SHA256, "the .sha256 file", nil // Fetch read it there and checked the bytes against it
	case *Nexus:
		if blob.Platform != "" {
			// The listing states the platform-independent file's sha256 only.
			break
		}
		all, err := r.List(ctx)
		if err != nil {
			return "", "", err
		}
		for _, l := range all {
			if l.Name == ref.Name && l.Version == ref.Version && l.SHA256 != "" {
				return l.SHA256, "the listing", nil
			}
		}
		return "", "", refuse(CodePullUnstated,
			fmt.Sprintf("artifact %s: registry %s names no sha256 for it in its listing, and its download header alone is not trusted", ref, r),
			"pin the artifact's digest in the gateway's trust policy (runtime_pulls { pin … }), or serve the registry with capsule_registry, whose listing names it")
	}
	return "", "", refuse(CodePullUnstated, fmt.Sprintf("artifact %s: registry %v states no digest a runtime pull can be checked against", ref, reg),
		"pin the artifact's digest in the gateway's trust policy")
}

// unwrap returns the registry under a cache.
func unwrap(r Registry) Registry {
	if c, ok := r.(*cached); ok {
		return c.Registry
	}
	return r
}
