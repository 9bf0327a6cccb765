package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"path"
	"strings"

	"github.com/capsulegate/capsulegate/internal/jsontext"
)

// Part is one part of a task's message beyond its text: what an A2A client sent, in order
// (docs/reference/guest-abi.md "Message parts").
type Part struct {
	Kind      string // "text", "file" or "data"
	Text      string
	Name      string // a file's name as the client gave it, unsanitised
	MediaType string
	Bytes     []byte          // a file's content
	URL       string          // where a file was fetched from; "" when sent inline
	Data      json.RawMessage // a data part's JSON value
}

// inboxFile is where the message's description is, beside its files.
const inboxFile = "in/message.json"

// inboxMessage is in/message.json.
type inboxMessage struct {
	MessageID string      `json:"message_id,omitempty"`
	TaskID    string      `json:"task_id"`
	ContextID string      `json:"context_id"`
	Parts     []inboxPart `json:"parts"`
}

// inboxPart is one part as in/message.json lists it: a file by its path in the workdir.
type inboxPart struct {
	Kind      string          `json:"kind"`
	Text      *string         `json:"text,omitempty"`
	File      string          `json:"file,omitempty"` // workdir-relative path
	Name      string          `json:"name,omitempty"`
	MediaType string          `json:"media_type,omitempty"`
	Size      *int            `json:"size,omitempty"`
	URL       string          `json:"url,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
}

// writeInbox puts the task's message in the workdir's in/, held in memory as task.md is:
// in/message.json lists every part in order (a text message: its text as one part), and
// each file part's bytes are in/<index>-<name>. The previous task's files are dropped
// first, so in/ holds this task's message only. in/ itself is made when a file comes, so
// that a guest can list it; a text message costs no file system call.
func (s *session) writeInbox(req TaskRequest) error {
	for _, name := range s.inbox {
		s.held.Drop(name)
	}
	s.inbox = s.inbox[:0]
	if req.Parts == nil {
		// A text message, every task's case: written by hand, as json.Marshal would.
		s.held.Put(inboxFile, textInbox(req))
		return nil
	}
	m := inboxMessage{MessageID: req.MessageID, TaskID: req.TaskID, ContextID: req.ContextID}
	for i, p := range req.Parts {
		ip := inboxPart{Kind: p.Kind, MediaType: p.MediaType}
		switch p.Kind {
		case "text":
			ip.Text = &p.Text
		case "data":
			ip.Data = p.Data
		case "file":
			if len(s.inbox) == 0 {
				if err := s.makeInbox(); err != nil {
					return err
				}
			}
			ip.File = inboxPath(i, p)
			ip.Name, ip.URL = p.Name, p.URL
			n := len(p.Bytes)
			ip.Size = &n
			s.held.Put(ip.File, p.Bytes)
			s.inbox = append(s.inbox, ip.File)
		default:
			return fmt.Errorf("message part %d is of kind %q: only text, file and data parts reach a capsule", i, p.Kind)
		}
		m.Parts = append(m.Parts, ip)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("describing the message: %w", err)
	}
	s.held.Put(inboxFile, b)
	return nil
}

// textInbox is in/message.json of a text message.
func textInbox(req TaskRequest) []byte {
	b := make([]byte, 0, 96+len(req.Text))
	b = append(b, '{')
	if req.MessageID != "" {
		b = append(b, `"message_id":`...)
		b = jsontext.AppendString(b, req.MessageID)
		b = append(b, ',')
	}
	b = append(b, `"task_id":`...)
	b = jsontext.AppendString(b, req.TaskID)
	b = append(b, `,"context_id":`...)
	b = jsontext.AppendString(b, req.ContextID)
	b = append(b, `,"parts":[{"kind":"text","text":`...)
	b = jsontext.AppendString(b, req.Text)
	return append(b, "}]}"...)
}

// makeInbox makes the workdir and its in/ folder, so that a guest listing in/ finds the
// files held there.
func (s *session) makeInbox() error {
	if err := s.prep.make(); err != nil {
		return err
	}
	root, err := s.work.Root()
	if err != nil {
		return err
	}
	if err := root.Mkdir("in", 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("making the workdir's in/: %w", err)
	}
	return nil
}

// inboxPath is where file part i of a message is held: in/<index>-<name>.
func inboxPath(i int, p Part) string {
	return fmt.Sprintf("in/%d-%s", i, inboxName(p.Name, p.MediaType))
}

// inboxName is a file part's name as the workdir holds it: the last element of what the
// client gave, letters, digits, '.', '-' and '_' only (anything else becomes '_'), no
// leading dot, at most 100 bytes; "file" with an extension for its media type when nothing
// is left.
func inboxName(given, mediaType string) string {
	base := given
	if i := strings.LastIndexAny(base, `/\`); i >= 0 {
		base = base[i+1:]
	}
	base = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, base)
	base = strings.TrimLeft(base, ".")
	if len(base) > 100 {
		ext := path.Ext(base)
		if len(ext) > 20 {
			ext = ""
		}
		base = base[:100-len(ext)] + ext
	}
	if strings.Trim(base, "_") == "" {
		base = "file"
		if exts, _ := mime.ExtensionsByType(mediaType); len(exts) > 0 {
			base += exts[0]
		}
	}
	return base
}

// inboxNote is what an agent's model is told of the message's parts beyond its text: where
// its files are; "" for a text message.
func inboxNote(parts []Part) string {
	var files []string
	data := 0
	for i, p := range parts {
		switch p.Kind {
		case "file":
			files = append(files, fmt.Sprintf("%s (%s, %d bytes)", inboxPath(i, p), p.MediaType, len(p.Bytes)))
		case "data":
			data++
		}
	}
	if len(files) == 0 && data == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\n[The message came with ")
	if len(files) > 0 {
		fmt.Fprintf(&b, "%d file(s), in the workdir: %s", len(files), strings.Join(files, ", "))
	}
	if data > 0 {
		if len(files) > 0 {
			b.WriteString("; and ")
		}
		fmt.Fprintf(&b, "%d structured data part(s)", data)
	}
	b.WriteString(". in/message.json lists every part in order.]")
	return b.String()
}
