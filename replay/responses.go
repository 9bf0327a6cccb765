package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// This file is the OpenAI Responses API (POST …/v1/responses), the API the Codex CLI
// speaks: reading its requests, and streaming a whole response as the API would have.

// codexContext are the openings of the text parts the Codex CLI adds to a conversation
// as user messages before the task — the environment, the user's standing instructions,
// AGENTS.md. They are the same for every task on a machine, so matching on them would
// send every Codex request to one conversation.
var codexContext = []string{"<environment_context>", "<user_instructions>", "# AGENTS.md instructions for "}

// responsesRequest is the part of a Responses API request body replay reads.
type responsesRequest struct {
	Stream             bool            `json:"stream"`
	Input              json.RawMessage `json:"input"`
	PreviousResponseID string          `json:"previous_response_id"`
	Store              *bool           `json:"store"` // the API's default is true
}

// responsesItem is the part of one input item replay reads.
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// parseResponsesRequest reads a Responses API request (docs/reference/cassettes.md
// "Responses API requests"): the task's text, the number of assistant turns the input
// holds, whether the client asks for a stream and may continue the answer. A request
// continuing an earlier response by previous_response_id continues its conversation:
// ch, which remembers the responses answered, gives its task and turn.
func parseResponsesRequest(body []byte, ch *chain) (query, error) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return query{}, fmt.Errorf("the request body is not valid JSON: %w", err)
	}
	q := query{stream: req.Stream, store: req.Store == nil || *req.Store}
	var prev query
	if req.PreviousResponseID != "" {
		var ok bool
		if ch != nil {
			prev, ok = ch.lookup(req.PreviousResponseID)
		}
		if !ok {
			return query{}, fmt.Errorf("previous_response_id %q is not a response this replay answered (since it started, with store not false)", short(req.PreviousResponseID))
		}
	}
	first, turns, found, err := readInput(req.Input)
	switch {
	case err != nil:
		return query{}, err
	case req.PreviousResponseID != "":
		// The input holds what came after that response: its turn is the next one, plus
		// any answer the input itself carries.
		q.first, q.turn = prev.first, prev.turn+1+turns
	case !found:
		return query{}, errors.New(`the input has no message with role "user" other than Codex's context (<environment_context>, <user_instructions>, # AGENTS.md instructions)`)
	default:
		q.first, q.turn = first, turns
	}
	return q, nil
}

// readInput returns the task an input holds, if found, and its number of assistant
// turns.
func readInput(raw json.RawMessage) (first string, turns int, found bool, err error) {
	in := bytes.TrimSpace(raw)
	if len(in) == 0 || string(in) == "null" {
		return "", 0, false, errors.New("the request has no input")
	}
	if in[0] == '"' {
		if err := json.Unmarshal(in, &first); err != nil {
			return "", 0, false, fmt.Errorf("input: %w", err)
		}
		return first, 0, true, nil
	}
	var items []responsesItem
	if err := json.Unmarshal(in, &items); err != nil {
		return "", 0, false, errors.New("input: want a string or a list of items")
	}
	inTurn := false
	for i, it := range items {
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message" // the short form {"role", "content"}
		}
		if isModelItem(typ, it.Role) {
			// One answer of the model may be several items (reasoning, text, calls): a
			// run of them is one turn.
			if !inTurn {
				turns++
			}
			inTurn = true
			continue
		}
		inTurn = false
		if found || typ != "message" || it.Role != "user" {
			continue
		}
		text, task, err := taskText(it.Content)
		if err != nil {
			return "", 0, false, fmt.Errorf("input[%d].content: %w", i, err)
		}
		if task {
			first, found = text, true
		}
	}
	return first, turns, found, nil
}

// maxChain bounds how many answered responses a chain remembers; the oldest are
// forgotten first.
const maxChain = 10_000

// chain remembers, by response id, the task and turn each Responses answer was for, so
// that a request continuing it by previous_response_id is matched to the next turn of
// the same conversation. The zero value is ready; it is safe for concurrent use.
type chain struct {
	mu    sync.Mutex
	byID  map[string]query
	order []string // ids in the order remembered
}

// remember notes that response id answered q; a later answer with the same id wins.
func (c *chain) remember(id string, q query) {
	if id == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[string]query{}
	}
	if _, ok := c.byID[id]; !ok {
		c.order = append(c.order, id)
	}
	c.byID[id] = query{first: q.first, turn: q.turn}
	if len(c.order) > maxChain {
		delete(c.byID, c.order[0])
		c.order = c.order[1:]
	}
}

func (c *chain) lookup(id string) (query, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q, ok := c.byID[id]
	return q, ok
}

// responseID returns the id of a Responses answer: the body's, or for a stream the first
// its events carry.
func responseID(body json.RawMessage, evs []StreamEvent) string {
	if evs == nil {
		var r struct {
			ID string `json:"id"`
		}
		json.Unmarshal(body, &r)
		return r.ID
	}
	for _, ev := range evs {
		if id := eventResponseID(ev.Data); id != "" {
			return id
		}
	}
	return ""
}

// eventResponseID returns the response.id of a Responses stream event, if it has one.
func eventResponseID(data json.RawMessage) string {
	var ev struct {
		Response struct {
			ID string `json:"id"`
		} `json:"response"`
	}
	json.Unmarshal(data, &ev)
	return ev.Response.ID
}

// isModelItem reports whether an input item is one the model produced: an assistant
// message, reasoning, or a call (function_call, custom_tool_call, local_shell_call,
// web_search_call, …). Everything else — user, developer and system messages, call
// outputs — is the client's.
func isModelItem(typ, role string) bool {
	switch {
	case typ == "message":
		return role == "assistant"
	case typ == "reasoning":
		return true
	}
	return strings.HasSuffix(typ, "_call")
}

// taskText returns the text of a user message's content — a string, or the text of its
// input_text (or output_text, text) parts joined by "\n" — without Codex's context
// parts. task is false when the message holds nothing but Codex's context.
func taskText(raw json.RawMessage) (text string, task bool, err error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, !isCodexContext(s), nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", false, errors.New("want a string or a list of content parts")
	}
	var texts []string
	kept := 0
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			if isCodexContext(p.Text) {
				continue
			}
			texts = append(texts, p.Text)
		}
		kept++
	}
	return strings.Join(texts, "\n"), kept > 0, nil
}

func isCodexContext(s string) bool {
	s = strings.TrimLeft(s, " \t\r\n")
	for _, p := range codexContext {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// deltaWords is how many words one synthesized text delta carries: several deltas show
// a client's streaming path, as a model's would.
const deltaWords = 4

// textDeltas splits text into pieces of deltaWords words (each keeping its trailing
// space); concatenated, they are text.
func textDeltas(text string) []string {
	words := strings.SplitAfter(text, " ")
	var out []string
	for i := 0; i < len(words); i += deltaWords {
		if piece := strings.Join(words[i:min(i+deltaWords, len(words))], ""); piece != "" {
			out = append(out, piece)
		}
	}
	return out
}

// synthesizeResponses turns a whole Responses API response into the events the API
// streams for it: response.created and response.in_progress (the response with status
// in_progress and no output yet), per output item response.output_item.added, its
// content's events and response.output_item.done, then response.completed (or
// .incomplete, .failed, following the status) carrying the whole response as it is.
// Every event has its type and a sequence_number counting from 0.
func synthesizeResponses(body json.RawMessage) ([]StreamEvent, error) {
	var resp map[string]json.RawMessage
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, err
	}
	var output []map[string]json.RawMessage
	if o, ok := resp["output"]; ok && string(o) != "null" {
		if err := json.Unmarshal(o, &output); err != nil {
			return nil, fmt.Errorf("output: %w", err)
		}
	}
	var events []StreamEvent
	seq := 0
	add := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		data, _ := json.Marshal(fields)
		events = append(events, StreamEvent{Event: typ, Data: data})
	}
	pending := clone(resp)
	pending["status"], pending["output"] = jsonString("in_progress"), json.RawMessage(`[]`)
	if _, ok := pending["usage"]; ok {
		pending["usage"] = json.RawMessage(`null`) // counted when the response completes
	}
	add("response.created", map[string]any{"response": pending})
	add("response.in_progress", map[string]any{"response": pending})
	respID := stringField(resp, "id")
	if respID == "" {
		respID = "resp"
	}
	for i, item := range output {
		typ := stringField(item, "type")
		done := item
		id := stringField(item, "id")
		if id == "" {
			// Deltas name their item: one without an id gets one, in this stream only.
			id = fmt.Sprintf("%s_item_%d", respID, i)
			done = clone(item)
			done["id"] = jsonString(id)
		}
		added := clone(done)
		if _, ok := added["status"]; ok {
			added["status"] = jsonString("in_progress")
		}
		switch typ {
		case "message":
			added["status"], added["content"] = jsonString("in_progress"), json.RawMessage(`[]`)
		case "function_call":
			added["status"], added["arguments"] = jsonString("in_progress"), jsonString("")
		case "custom_tool_call":
			added["input"] = jsonString("")
		case "reasoning":
			added["summary"] = json.RawMessage(`[]`)
		}
		add("response.output_item.added", map[string]any{"output_index": i, "item": added})
		at := func(more map[string]any) map[string]any {
			more["item_id"], more["output_index"] = id, i
			return more
		}
		switch typ {
		case "message":
			var parts []map[string]json.RawMessage
			if err := unmarshalField(item, "content", &parts); err != nil {
				return nil, fmt.Errorf("output[%d].content: %w", i, err)
			}
			for j, part := range parts {
				ptype := stringField(part, "type")
				var head any = part
				switch ptype {
				case "output_text":
					head = map[string]any{"type": ptype, "text": "", "annotations": []any{}}
				case "refusal":
					head = map[string]any{"type": ptype, "refusal": ""}
				}
				add("response.content_part.added", at(map[string]any{"content_index": j, "part": head}))
				switch ptype {
				case "output_text":
					text := stringField(part, "text")
					for _, d := range textDeltas(text) {
						add("response.output_text.delta", at(map[string]any{"content_index": j, "delta": d, "logprobs": []any{}}))
					}
					add("response.output_text.done", at(map[string]any{"content_index": j, "text": text, "logprobs": []any{}}))
				case "refusal":
					text := stringField(part, "refusal")
					add("response.refusal.delta", at(map[string]any{"content_index": j, "delta": text}))
					add("response.refusal.done", at(map[string]any{"content_index": j, "refusal": text}))
				}
				add("response.content_part.done", at(map[string]any{"content_index": j, "part": part}))
			}
		case "function_call":
			args := stringField(item, "arguments")
			add("response.function_call_arguments.delta", at(map[string]any{"delta": args}))
			add("response.function_call_arguments.done", at(map[string]any{"name": stringField(item, "name"), "arguments": args}))
		case "custom_tool_call":
			input := stringField(item, "input")
			add("response.custom_tool_call_input.delta", at(map[string]any{"delta": input}))
			add("response.custom_tool_call_input.done", at(map[string]any{"input": input}))
		case "reasoning":
			var summary []map[string]json.RawMessage
			if err := unmarshalField(item, "summary", &summary); err != nil {
				return nil, fmt.Errorf("output[%d].summary: %w", i, err)
			}
			for k, part := range summary {
				text := stringField(part, "text")
				add("response.reasoning_summary_part.added", at(map[string]any{"summary_index": k, "part": map[string]any{"type": "summary_text", "text": ""}}))
				add("response.reasoning_summary_text.delta", at(map[string]any{"summary_index": k, "delta": text}))
				add("response.reasoning_summary_text.done", at(map[string]any{"summary_index": k, "text": text}))
				add("response.reasoning_summary_part.done", at(map[string]any{"summary_index": k, "part": part}))
			}
		}
		add("response.output_item.done", map[string]any{"output_index": i, "item": done})
	}
	final := "response.completed"
	switch stringField(resp, "status") {
	case "incomplete":
		final = "response.incomplete"
	case "failed":
		final = "response.failed"
	}
	add(final, map[string]any{"response": body})
	return events, nil
}

func clone(m map[string]json.RawMessage) map[string]json.RawMessage {
	c := make(map[string]json.RawMessage, len(m)+1)
	for k, v := range m {
		c[k] = v
	}
	return c
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// stringField returns m[key] when it is a JSON string, else "".
func stringField(m map[string]json.RawMessage, key string) string {
	var s string
	json.Unmarshal(m[key], &s)
	return s
}

// unmarshalField decodes m[key] into v; a missing or null key leaves v as it is.
func unmarshalField(m map[string]json.RawMessage, key string, v any) error {
	raw, ok := m[key]
	if !ok || string(raw) == "null" {
		return nil
	}
	return json.Unmarshal(raw, v)
}
