//go:build wasip1

// Command conformance-capsule is the example conformance capsule: a script capsule that
// answers as the A2A TCK's scenarios ask, chosen by the prefix of the message id
// (in/message.json), and echoes the files and data it is sent back as artifacts. It shows
// every way a capsule gives parts: its text answer (out/result.txt), files it writes,
// files by URL, data, a Message answer (out/a2a.json), and, through its conformance-io
// tool, chunks and input-required.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/capsule"
)

// message is the part of in/message.json this capsule reads.
type message struct {
	MessageID string `json:"message_id"`
	Parts     []struct {
		Kind      string          `json:"kind"`
		Text      string          `json:"text"`
		File      string          `json:"file"`
		Name      string          `json:"name"`
		MediaType string          `json:"media_type"`
		Data      json.RawMessage `json:"data"`
	} `json:"parts"`
}

// answer is out/a2a.json.
type answer struct {
	Reply     string     `json:"reply,omitempty"`
	Artifacts []artifact `json:"artifacts,omitempty"`
}

type artifact struct {
	Name  string `json:"name"`
	Parts []part `json:"parts"`
}

type part struct {
	Text      *string         `json:"text,omitempty"`
	File      string          `json:"file,omitempty"`
	URL       string          `json:"url,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	MediaType string          `json:"media_type,omitempty"`
	Filename  string          `json:"filename,omitempty"`
}

func init() {
	capsule.Handle(run)
}

// run answers the task's message, asking for input as long as the message says to wait.
func run() error {
	for {
		m, err := readMessage()
		if err != nil {
			return err
		}
		id := m.MessageID
		switch {
		case strings.HasPrefix(id, "tck-artifact-file-url"):
			return give("", answer{Artifacts: []artifact{{Name: "file-url", Parts: []part{
				{URL: "https://example.com/output.txt", Filename: "output.txt", MediaType: "text/plain"}}}}})
		case strings.HasPrefix(id, "tck-artifact-file"):
			if err := os.WriteFile("/out/output.txt", []byte("tck"), 0o644); err != nil {
				return err
			}
			return give("", answer{Artifacts: []artifact{{Name: "file", Parts: []part{
				{File: "output.txt", Filename: "output.txt", MediaType: "text/plain"}}}}})
		case strings.HasPrefix(id, "tck-artifact-text"):
			return give("Generated text content", answer{})
		case strings.HasPrefix(id, "tck-artifact-data"):
			return give("", answer{Artifacts: []artifact{{Name: "data", Parts: []part{
				{Data: json.RawMessage(`{"key":"value","count":42}`)}}}}})
		case strings.HasPrefix(id, "tck-message-response"):
			return give("Direct message response", answer{Reply: "message"})
		case strings.HasPrefix(id, "tck-complete-task"):
			return give("Hello from TCK", answer{})
		case strings.HasPrefix(id, "tck-stream-artifact-chunked"):
			if err := io(`{"chunks":["chunk-1 ","chunk-2"]}`); err != nil {
				return err
			}
			return give("chunk-1 chunk-2", answer{})
		case strings.HasPrefix(id, "tck-stream-"):
			if err := io(`{"chunks":["Stream hello from TCK"]}`); err != nil {
				return err
			}
			return give("Stream hello from TCK", answer{})
		case strings.HasPrefix(id, "tck-reject-task"):
			return errors.New("rejected")
		case strings.HasPrefix(id, "echo-parts"):
			return give(echoText(m), echoParts(m))
		case strings.HasPrefix(id, "tck-input-required"), !strings.HasPrefix(id, "tck-"):
			// Waits: the task turns input-required, and the answer's message replaces
			// this one in in/message.json.
			if err := io(`{"ask":"waiting for input: send a message whose id starts with tck-complete-task to finish"}`); err != nil {
				return err
			}
		default:
			return give("Unhandled messageId prefix: "+id, answer{})
		}
	}
}

// io calls the conformance-io tool with input data, which asks for input or streams.
func io(data string) error {
	res, err := guest.Invoke("conformance-io", guest.ToolInput{Data: guest.Some(data)})
	if err != nil {
		return fmt.Errorf("invoking conformance-io: %w", err)
	}
	if res.Status != guest.StatusPassed {
		return fmt.Errorf("conformance-io did not pass: %s", guest.Value(res.Summary))
	}
	return nil
}

// readMessage reads the task's message, or the latest answer to input-required.
func readMessage() (message, error) {
	var m message
	b, err := os.ReadFile("/in/message.json")
	if err != nil {
		return m, fmt.Errorf("reading the message: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("reading the message: %w", err)
	}
	return m, nil
}

// give writes the text answer and, when it holds anything, the answer file.
func give(text string, a answer) error {
	if a.Reply != "" || len(a.Artifacts) > 0 {
		b, err := json.Marshal(a)
		if err != nil {
			return err
		}
		if err := os.WriteFile("/out/a2a.json", b, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile("/out/result.txt", []byte(text), 0o644)
}

// echoText is the message's text parts, joined.
func echoText(m message) string {
	var texts []string
	for _, p := range m.Parts {
		if p.Kind == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// echoParts gives every file and data part of the message back, one artifact each: a file
// by its path in the workdir (in/ is below the guest's root, and out/a2a.json names files
// below out/, so each is copied there first).
func echoParts(m message) answer {
	var a answer
	for i, p := range m.Parts {
		switch p.Kind {
		case "file":
			b, err := os.ReadFile("/" + p.File)
			if err != nil {
				continue
			}
			name := fmt.Sprintf("echo-%d", i)
			if os.WriteFile("/out/"+name, b, 0o644) != nil {
				continue
			}
			a.Artifacts = append(a.Artifacts, artifact{Name: p.Name, Parts: []part{{File: name, Filename: p.Name, MediaType: p.MediaType}}})
		case "data":
			a.Artifacts = append(a.Artifacts, artifact{Name: "data", Parts: []part{{Data: p.Data}}})
		}
	}
	return a
}

func main() {}
