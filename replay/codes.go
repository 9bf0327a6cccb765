package replay

// Codes of the refusals this package makes (docs/errors.md lists them all).
const (
	CodeDir           = "E-RPL-001" // the cassette folder is missing, unreadable, or holds no cassette
	CodeCassette      = "E-RPL-002" // a cassette is unreadable, too large, or not valid strict JSON
	CodeProvider      = "E-RPL-003" // a cassette's provider is missing or not one of Anthropic, OpenAI, Responses
	CodeConversations = "E-RPL-004" // a cassette has no conversations
	CodeConversation  = "E-RPL-005" // a conversation has an empty match, no turns, a turn that is not an object, or a bad streamed turn
	CodeListen        = "E-RPL-006" // the replay server cannot listen on its address
	CodeUpstream      = "E-RPL-007" // the recorder's upstream is not an absolute http or https URL
)
