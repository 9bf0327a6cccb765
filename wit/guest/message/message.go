// Package message is the Go guest SDK of murmur:message/send@0.1.0
// (wit/murmur-message-0.1.0.wit): send an A2A message to another capsule — a peer — and
// learn how its task ended. Script capsules and tools may import it. The runtime checks the
// peer's URL against the capsule's capabilities.network.allow and its peer limits; the
// peer's answer (its text, files and data) is written to the workdir under
// peers/<task-id>/ (docs/reference/guest-abi.md "murmur:message/send").
//
// Every refusal by the host is an error of type *guest.HostError whose Msg is the host's
// string verbatim, starting with its code (E-PEER-…). Outside a wasip1 guest Send returns
// guest.ErrNotGuest.
package message

// Message is the record message: what the guest sends.
type Message struct {
	// MessageID is the A2A message id; empty lets the runtime choose one.
	MessageID string `json:"message-id"`
	// ContextID is the peer's context to continue; nil starts a new one.
	ContextID *string `json:"context-id"`
	Text      string  `json:"text"`
}

// TaskResult is the record task-result: the peer's task and how it ended.
type TaskResult struct {
	TaskID    string `json:"task-id"`
	ContextID string `json:"context-id"`
	State     string `json:"state"`
}
