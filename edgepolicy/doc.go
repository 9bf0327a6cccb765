// Package edgepolicy decides, per request at the gateway's edge, who may call what on a
// capsule route and where that caller's tasks may reach. An operator writes two CEL
// expressions per route; Compile type-checks them once at config load, and Allow and
// Egress evaluate them per request.
//
// # Variables
//
// Both expressions see the same variables, taken from Input:
//
//	principal      string            who called ("" when anonymous)
//	authenticated  bool              whether the caller authenticated at all
//	scheme         string            how: "bearer", "jwt", "mtls", "front", or ""
//	claims         map(string, dyn)  the JWT's claims or the certificate's fields
//	method         string            the A2A 1.0 method name, e.g. "SendMessage", "GetTask"
//	binding        string            "jsonrpc", "http+json" or "grpc"
//	version        string            the A2A protocol version, "0.3" or "1.0"
//	capsule        string            the capsule's name
//	skill          string            the skill the message asks for ("" when none)
//	metadata       map(string, dyn)  the message's metadata
//	task_id        string            the task the request names ("" when none)
//
// The standard CEL library and the string extensions (startsWith, split, lowerAscii, …)
// are available.
//
// # Allow and egress
//
// The allow expression is a bool: true admits the request. The egress expression is a
// list of capabilities.network.allow entries (docs/reference/manifest.md "Network
// rules"); it narrows what the caller's tasks may reach to those entries, and an empty
// list lets them reach nothing. An empty expression means no check: every request is
// allowed, or no narrowing happens.
//
// # Deny on error
//
// A policy is a security decision made on values the caller controls: claims and
// metadata may lack a key, hold the wrong type, or be shaped to make evaluation
// expensive. Any evaluation failure therefore refuses: Allow returns false with a
// CodeEval error, and Egress returns a CodeEval error on which the caller refuses the
// task rather than running it unnarrowed. Evaluation is bounded by a cost limit, so no
// expression can spin on a request's data.
//
// Errors carry the codes of codes.go (docs/errors.md lists them). A Policy is safe for
// concurrent use.
package edgepolicy
