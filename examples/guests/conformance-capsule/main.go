//go:build wasip1

// Command conformance-capsule is the example conformance capsule: a script capsule that
// answers as the A2A TCK's scenarios ask, chosen by the prefix of the message id
// (in/message.json, read with wit/guest/parts), and echoes the files and data it is sent
// back as artifacts. It shows every way a capsule gives parts: its text answer
// (out/result.txt), files it writes, files by URL, data, a Message answer (out/a2a.json),
// and, through its conformance-io tool, chunks and input-required.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/capsule"
	"github.com/capsulegate/capsulegate/wit/guest/parts"
)

func init() {
	capsule.Handle(run)
}

// run answers the task's message, asking for input as long as the message says to wait.
func run() error {
	for {
		m, err := parts.ReadMessage()
		if err != nil {
			return err
		}
		id := m.MessageID
		switch {
		case strings.HasPrefix(id, "tck-artifact-file-url"):
			return give("", parts.Answer{Artifacts: []parts.Artifact{{Name: "file-url", Parts: []parts.AnswerPart{
				parts.URL("https://example.com/output.txt", "text/plain", "output.txt")}}}})
		case strings.HasPrefix(id, "tck-artifact-file"):
			if err := os.WriteFile("/out/output.txt", []byte("tck"), 0o644); err != nil {
				return err
			}
			return give("", parts.Answer{Artifacts: []parts.Artifact{{Name: "file", Parts: []parts.AnswerPart{
				parts.File("output.txt", "text/plain", "output.txt")}}}})
		case strings.HasPrefix(id, "tck-artifact-text"):
			return give("Generated text content", parts.Answer{})
		case strings.HasPrefix(id, "tck-artifact-data"):
			return give("", parts.Answer{Artifacts: []parts.Artifact{{Name: "data", Parts: []parts.AnswerPart{
				{Data: json.RawMessage(`{"key":"value","count":42}`)}}}}})
		case strings.HasPrefix(id, "tck-message-response"):
			return give("Direct message response", parts.Answer{Reply: "message"})
		case strings.HasPrefix(id, "tck-complete-task"):
			return give("Hello from TCK", parts.Answer{})
		case strings.HasPrefix(id, "tck-stream-artifact-chunked"):
			if err := io(`{"chunks":["chunk-1 ","chunk-2"]}`); err != nil {
				return err
			}
			return give("chunk-1 chunk-2", parts.Answer{})
		case strings.HasPrefix(id, "tck-stream-"):
			if err := io(`{"chunks":["Stream hello from TCK"]}`); err != nil {
				return err
			}
			return give("Stream hello from TCK", parts.Answer{})
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
			return give("Unhandled messageId prefix: "+id, parts.Answer{})
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

// give writes the text answer and, when it holds anything, the answer file.
func give(text string, a parts.Answer) error {
	if a.Reply != "" || len(a.Artifacts) > 0 {
		if err := parts.WriteAnswer(a); err != nil {
			return err
		}
	}
	return os.WriteFile("/out/result.txt", []byte(text), 0o644)
}

// echoText is the message's text parts, joined.
func echoText(m parts.Message) string {
	var texts []string
	for _, p := range m.Parts {
		if p.Kind == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// echoParts gives every file and data part of the message back, one artifact each: a file
// by its copy below out/ (the answer file names files there).
func echoParts(m parts.Message) parts.Answer {
	var a parts.Answer
	for i, p := range m.Parts {
		switch p.Kind {
		case "file":
			b, err := parts.ReadFile(p)
			if err != nil {
				continue
			}
			name := fmt.Sprintf("echo-%d", i)
			if os.WriteFile("/out/"+name, b, 0o644) != nil {
				continue
			}
			a.Artifacts = append(a.Artifacts, parts.Artifact{Name: p.Name, Parts: []parts.AnswerPart{parts.File(name, p.MediaType, p.Name)}})
		case "data":
			a.Artifacts = append(a.Artifacts, parts.Artifact{Name: "data", Parts: []parts.AnswerPart{{Data: p.Data}}})
		}
	}
	return a
}

func main() {}
