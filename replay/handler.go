package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/capsulegate/capsulegate/internal/clip"
)

// MaxBody is the default cap on a request body.
const MaxBody = 16 << 20

// clipLen bounds the searched text quoted in a miss.
const clipLen = 200

// maxListed bounds how many conversations a miss lists.
const maxListed = 20

// Handler serves a Library over the providers' HTTP APIs.
type Handler struct {
	lib *Library

	// OnRequest, if set, sees every POST to a provider path with the body read, before
	// the body is parsed.
	OnRequest func(r *http.Request, body []byte)

	// BeforeEvent, if set, is called before event i of the n of a streamed answer is
	// written, after its delay: tests see, or hold, the stream at a known point.
	BeforeEvent func(r *http.Request, i, n int)

	maxBody int64 // caps request bodies in tests; 0 means MaxBody
	chain   chain // the Responses answers served, for previous_response_id
}

// Handler returns a Handler serving l.
func (l *Library) Handler() *Handler { return &Handler{lib: l} }

// ProviderForPath returns the provider whose API path ends path, or false.
func ProviderForPath(path string) (string, bool) {
	switch {
	case strings.HasSuffix(path, "/v1/messages"):
		return Anthropic, true
	case strings.HasSuffix(path, "/v1/chat/completions"):
		return OpenAI, true
	case strings.HasSuffix(path, "/v1/responses"):
		return Responses, true
	}
	return "", false
}

// ServeHTTP answers one request from the library.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	provider, ok := ProviderForPath(r.URL.Path)
	if !ok {
		writeError(w, OpenAI, http.StatusNotFound, "not_found_error",
			fmt.Sprintf("replay serves POST …/v1/messages, POST …/v1/chat/completions and POST …/v1/responses, not %q", r.URL.Path))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, provider, http.StatusMethodNotAllowed, "invalid_request_error", fmt.Sprintf("method %s not allowed; use POST", r.Method))
		return
	}
	limit := h.maxBody
	if limit <= 0 {
		limit = MaxBody
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, provider, http.StatusRequestEntityTooLarge, "request_too_large",
				fmt.Sprintf("request body is larger than %d bytes", limit))
			return
		}
		writeError(w, provider, http.StatusBadRequest, "invalid_request_error", "cannot read the request body: "+err.Error())
		return
	}
	if h.OnRequest != nil {
		h.OnRequest(r, body)
	}
	q, err := parseRequest(provider, body, &h.chain)
	if err != nil {
		writeError(w, provider, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	first, assistants, stream := q.first, q.turn, q.stream
	turn, msg := h.lib.find(provider, first, assistants)
	if turn == nil {
		writeError(w, provider, http.StatusNotFound, "not_found_error", msg)
		return
	}
	evs, _ := parseStream(turn) // checked when the cassette was loaded
	answered := func() {
		if provider == Responses && q.store {
			// Before the answer is written: the client's next request may continue it.
			h.chain.remember(responseID(turn, evs), q)
		}
	}
	switch {
	case evs == nil && !stream:
		answered()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(turn)))
		w.WriteHeader(http.StatusOK)
		w.Write(turn)
		return
	case evs == nil:
		evs, err = synthesize(provider, turn)
		if err != nil {
			writeError(w, provider, http.StatusInternalServerError, "api_error", "cannot stream the recorded turn: "+err.Error())
			return
		}
	case !stream:
		writeError(w, provider, http.StatusBadRequest, "invalid_request_error",
			fmt.Sprintf("turn %d for %q is a recorded stream: send \"stream\": true", assistants, short(first)))
		return
	}
	answered()
	h.writeStream(w, r, evs)
}

// request is the part of both providers' request bodies replay reads.
type request struct {
	Stream   bool `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// query is what replay reads of a request.
type query struct {
	first  string // the text of the first user message (Responses: the task)
	turn   int    // the number of assistant messages (Responses: assistant turns)
	stream bool   // the client asks for a stream
	store  bool   // Responses: the answer may be continued by previous_response_id
}

// parseRequest reads a request of provider's API. ch, for the Responses API, resolves a
// previous_response_id.
func parseRequest(provider string, body []byte, ch *chain) (query, error) {
	if provider == Responses {
		return parseResponsesRequest(body, ch)
	}
	first, assistants, stream, err := parseMessages(body)
	return query{first: first, turn: assistants, stream: stream}, err
}

// parseMessages reads a Messages or Chat Completions request: the text of the first user
// message, the number of assistant messages and whether the client asks for a stream.
func parseMessages(body []byte) (first string, assistants int, stream bool, err error) {
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return "", 0, false, fmt.Errorf("the request body is not valid JSON: %v", err)
	}
	found := false
	for i, m := range req.Messages {
		switch m.Role {
		case "assistant":
			assistants++
		case "user":
			if found {
				continue
			}
			found = true
			if first, err = contentText(m.Content); err != nil {
				return "", 0, false, fmt.Errorf("messages[%d].content: %v", i, err)
			}
		}
	}
	if !found {
		return "", 0, false, errors.New(`the request has no message with role "user"`)
	}
	return first, assistants, req.Stream, nil
}

// contentText reads a content string, or joins the text of an array of text blocks.
func contentText(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", errors.New("want a string or an array of content blocks")
	}
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// find returns the turn answering a request, or nil and a message naming the text
// searched, the turn and what exists.
func (l *Library) find(provider, first string, turn int) (json.RawMessage, string) {
	convs := l.byPro[provider]
	for _, c := range convs {
		if !strings.Contains(first, c.Match) {
			continue
		}
		if turn < len(c.Turns) {
			return c.Turns[turn], ""
		}
		unit := "messages"
		if provider == Responses {
			unit = "turns" // runs of output items, not messages
		}
		return nil, fmt.Sprintf("cassette miss: conversation %q in %s has %d turn(s), the request asks for turn %d (%d assistant %s) for %q",
			c.Match, c.file, len(c.Turns), turn, turn, unit, short(first))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cassette miss: no %s conversation matches %q (turn %d)", provider, short(first), turn)
	if len(convs) == 0 {
		fmt.Fprintf(&b, "; no %s cassette is loaded from %s", provider, l.dir)
		return nil, b.String()
	}
	b.WriteString("; conversations:")
	for i, c := range convs {
		if i == maxListed {
			fmt.Fprintf(&b, " … and %d more", len(convs)-maxListed)
			break
		}
		fmt.Fprintf(&b, " %s %q (%d turns);", c.file, short(c.Match), len(c.Turns))
	}
	return nil, strings.TrimSuffix(b.String(), ";")
}

func short(s string) string { return clip.String(s, clipLen) }

// writeError writes an error in the provider's shape.
func writeError(w http.ResponseWriter, provider string, status int, typ, msg string) {
	var v any
	if provider == Anthropic {
		v = map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}}
	} else {
		e := map[string]any{"message": msg, "type": "invalid_request_error"}
		if provider == Responses {
			e["param"], e["code"] = nil, nil // the Responses API always sends both
		}
		if status == http.StatusNotFound {
			e["code"] = "cassette_miss"
		}
		v = map[string]any{"error": e}
	}
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(b)
}
