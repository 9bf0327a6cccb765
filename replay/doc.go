// Package replay is a deterministic stand-in for a model provider
// (docs/reference/cassettes.md): it speaks the Anthropic Messages API
// (POST …/v1/messages), the OpenAI Chat Completions API (POST …/v1/chat/completions) and
// the OpenAI Responses API (POST …/v1/responses, the Codex CLI's) and answers from
// cassettes instead of a model.
//
// A cassette is a JSON file in the cassette folder:
//
//	{"provider": "anthropic-messages",
//	 "conversations": [
//	   {"match": "text the first user message contains",
//	    "turns": [{<provider response body>}, {<provider response body>}]}]}
//
// provider is "anthropic-messages", "openai-chat" or "openai-responses". Load reads every
// *.json file of the folder, in name order, and refuses the whole folder if one is bad:
// unknown keys or provider, invalid JSON, no conversations, an empty match, no turns, or a
// turn that is not a JSON object.
//
// Matching: the request path decides the provider (a path ending in /v1/messages is
// Anthropic, one ending in /v1/chat/completions is OpenAI Chat, one ending in
// /v1/responses is Responses; any prefix is allowed), and only that provider's cassettes
// are searched. The first user message is the first entry of messages with role "user";
// its text is the content string, or the text of its {"type":"text"} blocks joined by
// "\n". The conversation is the first, in file order then list order, whose match is a
// substring of that text; the turn is the number of messages with role "assistant" in the
// request. For the Responses API the text is the task — the input string, or the first
// user message of input that is not the Codex CLI's context (<environment_context>,
// <user_instructions>, # AGENTS.md instructions) — and the turn the number of runs of
// items the model produced (assistant messages, reasoning, *_call items). The turn's
// body is sent verbatim with status 200, or streamed as the provider would have. A miss is
// a 404 in the provider's error shape naming the text searched, the turn and the
// conversations that exist — never a made-up reply.
package replay
