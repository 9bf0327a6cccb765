package murmur

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// murmur:message/send@0.1.0 (docs/reference/guest-abi.md "murmur:message/send"),
// offered to script capsules and tools: a message to a peer capsule. Every refusal is the
// result's err string, never a trap.

// messageInterface is the interface components import, without its version.
const messageInterface = "murmur:message/send"

// errNoPeers is the err string of a call whose host sends no peer messages.
const errNoPeers = "E-PEER-007: this host sends no peer messages"

// PeerSender sends a guest's message to a peer and returns the peer task's result; its
// error is the string the guest reads.
type PeerSender func(ctx context.Context, peerURL string, m abi.PeerMessage) (abi.PeerTaskResult, error)

var messageFuncs = []wasm.HostFunc{hostFunc(abi.ImportSend, abi.MessageSend, importMessageSend)}

func importMessageSend(ctx context.Context, h *Imports, a []any) ([]any, error) {
	if h.Peers == nil {
		return amErr(errNoPeers), nil
	}
	res, err := h.Peers(ctx, a[0].(string), abi.PeerMessageOf(a[1]))
	if err != nil {
		return amErr(err.Error()), nil
	}
	for _, s := range []string{res.TaskID, res.ContextID, res.State} {
		if !utf8.ValidString(s) {
			return amErr(fmt.Sprintf("send: the peer's answer cannot be passed to the guest: invalid UTF-8 in %q", s)), nil
		}
	}
	return []any{abi.Result{Value: res.Value()}}, nil
}
