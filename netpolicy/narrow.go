package netpolicy

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/capsulegate/capsulegate/errs"
)

// CodeNarrowed refuses a connection the capsule's rules allow but the narrowing of the
// task's reach (its caller's policy) does not.
const CodeNarrowed = "E-NET-027"

type narrowKey struct{}

// Narrow returns ctx carrying rules every connection made under it must pass as well
// as the dialer's own: a task's reach narrowed by who asked for it, never widened.
func Narrow(ctx context.Context, rules Rules) context.Context {
	return context.WithValue(ctx, narrowKey{}, &rules)
}

// Unnarrowed returns ctx without the narrowing it carries: for a connection the
// narrowing is not about (the driver's provider endpoint, which network.allow does not
// grant either).
func Unnarrowed(ctx context.Context) context.Context {
	return context.WithValue(ctx, narrowKey{}, (*Rules)(nil))
}

// NarrowingOf returns the narrowing ctx carries, if any.
func NarrowingOf(ctx context.Context) (Rules, bool) {
	r, ok := ctx.Value(narrowKey{}).(*Rules)
	if !ok || r == nil {
		return nil, false
	}
	return *r, true
}

// CheckNarrowed judges host:port (and addrs, when given) against the narrowing rules,
// as Check does, with its own code: what the capsule may reach but this task may not.
func CheckNarrowed(narrow Rules, scheme, host string, port int, addrs []netip.Addr) error {
	if _, err := narrow.Check(scheme, host, port, addrs); err != nil {
		return errs.Wrap(err, CodeNarrowed, Part,
			fmt.Sprintf("network policy: %s:%d is outside what the route's policy lets this task's caller reach", short(host), port),
			"the capsule may reach it, but not for this caller: ask the operator to widen the route's policy egress, or call as a principal it allows")
	}
	return nil
}
