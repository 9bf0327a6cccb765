// Package parts reads a task's A2A message and writes its answer file, for Go guests of
// any role: the message's parts are files of the workdir (in/message.json, in/<i>-<name>)
// and the answer's artifacts are listed in out/a2a.json (docs/reference/guest-abi.md
// "Message parts" and "Artifacts"). Plain file I/O: a guest whose filesystem.scope hides
// the workdir's root has neither file.
package parts

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Root is the workdir as the guest sees it.
const Root = "/"

// Message is the task's message: the one that started it, or the client's latest answer
// to input-required.
type Message struct {
	MessageID string `json:"message_id"`
	TaskID    string `json:"task_id"`
	ContextID string `json:"context_id"`
	Parts     []Part `json:"parts"`
}

// Part is one part of a Message, in the order the client sent them.
type Part struct {
	Kind      string          `json:"kind"` // "text", "file" or "data"
	Text      string          `json:"text,omitempty"`
	File      string          `json:"file,omitempty"` // a file's path in the workdir
	Name      string          `json:"name,omitempty"` // its name as the client gave it
	MediaType string          `json:"media_type,omitempty"`
	Size      int             `json:"size,omitempty"`
	URL       string          `json:"url,omitempty"` // where the gateway fetched it from
	Data      json.RawMessage `json:"data,omitempty"`
}

// ReadMessage reads the task's message (in/message.json).
func ReadMessage() (Message, error) { return readMessage(Root) }

func readMessage(root string) (Message, error) {
	var m Message
	b, err := os.ReadFile(filepath.Join(root, "in", "message.json"))
	if err != nil {
		return m, fmt.Errorf("parts: reading the message: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("parts: reading the message: %w", err)
	}
	return m, nil
}

// ReadFile reads the bytes of a file part.
func ReadFile(p Part) ([]byte, error) { return os.ReadFile(filepath.Join(Root, p.File)) }

// Answer is the task's answer file: what its client gets besides the text answer. The
// runtime reads the file with these same types (runtime/outputs.go).
type Answer struct {
	// Reply "message" answers a blocking send with a Message instead of the task.
	Reply     string     `json:"reply,omitempty"`
	Artifacts []Artifact `json:"artifacts,omitempty"`
}

// Artifact is one artifact of the answer.
type Artifact struct {
	Name        string       `json:"name,omitempty"`
	Description string       `json:"description,omitempty"`
	Parts       []AnswerPart `json:"parts"`
}

// AnswerPart is one part of an Artifact: build it with Text, File, URL or Data.
type AnswerPart struct {
	Text      *string         `json:"text,omitempty"`
	File      string          `json:"file,omitempty"` // a name below out/
	URL       string          `json:"url,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	MediaType string          `json:"media_type,omitempty"`
	Filename  string          `json:"filename,omitempty"`
}

// Text is a text part.
func Text(s string) AnswerPart { return AnswerPart{Text: &s} }

// File is the file out/<name> as a file part; mediaType and filename may be empty.
func File(name, mediaType, filename string) AnswerPart {
	return AnswerPart{File: name, MediaType: mediaType, Filename: filename}
}

// URL is a file by reference.
func URL(url, mediaType, filename string) AnswerPart {
	return AnswerPart{URL: url, MediaType: mediaType, Filename: filename}
}

// Data is v, encoded as JSON, as a data part.
func Data(v any) (AnswerPart, error) {
	b, err := json.Marshal(v)
	return AnswerPart{Data: b}, err
}

// WriteAnswer writes the answer file (out/a2a.json).
func WriteAnswer(a Answer) error { return writeAnswer(Root, a) }

func writeAnswer(root string, a Answer) error {
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("parts: writing the answer: %w", err)
	}
	return os.WriteFile(filepath.Join(root, "out", "a2a.json"), b, 0o644)
}
