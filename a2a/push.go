package a2a

import (
	"encoding/json"
	"time"

	"github.com/capsulegate/capsulegate/netpolicy"
)

// PushPolicy is where a capsule's push notifications may go and how their delivery is
// retried (docs/reference/a2a.md "Push notifications").
type PushPolicy struct {
	// Allow is the operator's push.allow rules: a webhook URL must match one, and a name
	// resolving to a private, loopback or metadata address is refused unless the rule
	// names that address (netpolicy's address rule).
	Allow netpolicy.Rules
	// Resolver looks up webhook hosts; nil is the system's.
	Resolver netpolicy.Resolver
	// Backoff is the first wait before a failed delivery is retried (default 1 s),
	// doubling up to MaxBackoff (default 5 min); after Attempts tries (default 8) the
	// event is dropped and counted.
	Backoff, MaxBackoff time.Duration
	Attempts            int
	// Timeout bounds one POST to a webhook (default 10 s).
	Timeout time.Duration
}

// doPush serves the push-notification config methods.
func (h *Handler) doPush(a *answer, m method, name string, params json.RawMessage) {
	a.fail(errPushNotSupported(name+": this agent offers no push notifications (its card says capabilities.pushNotifications false); poll the task or stream it"), false)
}
