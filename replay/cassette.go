package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/capsulegate/capsulegate/errs"
)

// Providers a cassette may name.
const (
	Anthropic = "anthropic-messages"
	OpenAI    = "openai-chat"
	Responses = "openai-responses" // the OpenAI Responses API, which the Codex CLI speaks
)

// maxCassette bounds one cassette file.
const maxCassette = 64 << 20

// Conversation is one scripted exchange: the turns answered, in order, to requests whose
// first user message contains Match.
type Conversation struct {
	Match string            `json:"match"`
	Turns []json.RawMessage `json:"turns"`

	file string // the cassette's file name, for messages
}

// Cassette is one cassette file.
type Cassette struct {
	Provider      string         `json:"provider"`
	Conversations []Conversation `json:"conversations"`
}

// Library is every cassette of a folder. It is immutable once loaded and safe for
// concurrent use.
type Library struct {
	dir   string
	files []string                  // cassette file names, in load order
	byPro map[string][]Conversation // provider → conversations, in file then list order
}

// Load reads every *.json cassette in dir. One bad cassette refuses the whole folder with
// a coded error naming the file.
func Load(dir string) (*Library, error) {
	if dir == "" {
		return nil, errs.New(CodeDir, "replay", "no cassette folder given", "name the folder holding the *.json cassettes")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, errs.Wrap(err, CodeDir, "replay", fmt.Sprintf("cannot read cassette folder %q", dir), "check the path and its permissions")
	}
	lib := &Library{dir: dir, byPro: map[string][]Conversation{}}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		c, err := loadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		for i := range c.Conversations {
			c.Conversations[i].file = e.Name()
		}
		lib.files = append(lib.files, e.Name())
		lib.byPro[c.Provider] = append(lib.byPro[c.Provider], c.Conversations...)
	}
	if len(lib.files) == 0 {
		return nil, errs.New(CodeDir, "replay", fmt.Sprintf("cassette folder %q holds no *.json cassette", dir), "add a cassette file")
	}
	return lib, nil
}

func loadFile(path string) (*Cassette, error) {
	bad := func(code, msg, fix string, cause error) error {
		e := errs.Wrap(cause, code, "replay", msg, fix)
		e.Pos = path
		return e
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, bad(CodeCassette, "cannot read the cassette", "check the file's permissions", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCassette+1))
	if err != nil {
		return nil, bad(CodeCassette, "cannot read the cassette", "check the file's permissions", err)
	}
	if len(data) > maxCassette {
		return nil, bad(CodeCassette, fmt.Sprintf("the cassette is larger than %d MiB", maxCassette>>20), "split it into several cassettes", nil)
	}
	var c Cassette
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, bad(CodeCassette, "not a valid cassette", `write {"provider": …, "conversations": [{"match": …, "turns": […]}]}`, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, bad(CodeCassette, "not a valid cassette", "keep exactly one JSON object in the file", errors.New("data after the cassette object"))
	}
	switch c.Provider {
	case Anthropic, OpenAI, Responses:
	case "":
		return nil, bad(CodeProvider, "the cassette names no provider", `add "provider": "anthropic-messages", "openai-chat" or "openai-responses"`, nil)
	default:
		return nil, bad(CodeProvider, fmt.Sprintf("unknown provider %q", c.Provider), `use "anthropic-messages", "openai-chat" or "openai-responses"`, nil)
	}
	if len(c.Conversations) == 0 {
		return nil, bad(CodeConversations, "the cassette has no conversations", "add at least one conversation, or remove the file", nil)
	}
	for i, conv := range c.Conversations {
		at := func(e error) error {
			ee := e.(*errs.Error)
			ee.Path = fmt.Sprintf("conversations[%d]", i)
			return ee
		}
		if conv.Match == "" {
			return nil, at(bad(CodeConversation, "match is empty (it would match every request)", "write text the first user message contains", nil))
		}
		if len(conv.Turns) == 0 {
			return nil, at(bad(CodeConversation, "the conversation has no turns", "add the provider response bodies, one per turn", nil))
		}
		for j, t := range conv.Turns {
			if b := bytes.TrimSpace(t); len(b) == 0 || b[0] != '{' {
				return nil, at(bad(CodeConversation, fmt.Sprintf("turns[%d] is not a JSON object", j), "write the provider's response body as an object", nil))
			}
			if _, err := parseStream(t); err != nil {
				return nil, at(bad(CodeConversation, fmt.Sprintf("turns[%d] is not a valid streamed turn: %v", j, err),
					`write {"stream": [{"delay_ms": 40, "event": "…", "data": {…}}, …]}`, nil))
			}
		}
	}
	return &c, nil
}

// Conversations returns the number of conversations loaded, over every provider.
func (l *Library) Conversations() int {
	n := 0
	for _, cs := range l.byPro {
		n += len(cs)
	}
	return n
}

// StreamEvent is one server-sent event of a streamed turn: written after DelayMS
// milliseconds (counted from the previous event, or from the response head), with its
// event name (none for OpenAI's chunks) and its data — a JSON value written compactly,
// or a string written as it is (OpenAI's final "[DONE]").
type StreamEvent struct {
	DelayMS int             `json:"delay_ms,omitempty"`
	Event   string          `json:"event,omitempty"`
	Data    json.RawMessage `json:"data"`
}

// maxDelay bounds one event's delay, so a typo cannot hang a test for hours.
const maxDelay = 60_000

// parseStream returns the events of a streamed turn — an object whose only key is
// "stream" — or nil for an ordinary response body.
func parseStream(turn json.RawMessage) ([]StreamEvent, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(turn, &probe); err != nil {
		return nil, err
	}
	if _, ok := probe["stream"]; !ok {
		return nil, nil
	}
	if len(probe) != 1 {
		return nil, errors.New(`a streamed turn has only the key "stream"`)
	}
	var evs []StreamEvent
	dec := json.NewDecoder(bytes.NewReader(probe["stream"]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&evs); err != nil {
		return nil, err
	}
	if len(evs) == 0 {
		return nil, errors.New("the stream has no events")
	}
	for i, ev := range evs {
		if ev.DelayMS < 0 || ev.DelayMS > maxDelay {
			return nil, fmt.Errorf("stream[%d].delay_ms is %d: want 0 to %d", i, ev.DelayMS, maxDelay)
		}
		if len(bytes.TrimSpace(ev.Data)) == 0 {
			return nil, fmt.Errorf("stream[%d] has no data", i)
		}
		if strings.ContainsAny(ev.Event, "\r\n") {
			return nil, fmt.Errorf("stream[%d].event holds a line break", i)
		}
		var str string
		if json.Unmarshal(ev.Data, &str) == nil && strings.ContainsAny(str, "\r\n") {
			return nil, fmt.Errorf("stream[%d].data is a string with a line break", i)
		}
	}
	return evs, nil
}
