package runtime

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/capsulegate/capsulegate/internal/jsontext"
	"github.com/capsulegate/capsulegate/internal/mediatype"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/wit/guest/parts"
)

// Artifact is one output of a task for its A2A client beyond its text answer: a file of
// out/ the manifest exports, or what the task's answer file (out/a2a.json) lists
// (docs/reference/guest-abi.md "Artifacts").
type Artifact struct {
	Name, Description string
	Parts             []Part
}

// ReplyMessage is TaskOutcome.Reply for a task whose client is answered with a Message.
const ReplyMessage = "message"

// answerFile is the file a guest writes to shape its task's answer.
const answerFile = "out/a2a.json"

// MaxOutputBytes bounds one output file, and the answer file.
const MaxOutputBytes = 32 << 20

// The answer file's shape is wit/guest/parts' (Answer, Artifact, AnswerPart): guests
// write it with that package, and the host reads it with the same types.

// clearOutputs holds the task's output files absent before it runs — the answer file and
// every file the manifest exports — so that only what this task writes becomes its
// artifacts. A guest writing one writes it in memory (guestfs.Held).
func (s *session) clearOutputs() {
	s.held.Drop(answerFile)
	for _, o := range s.staged.Manifest.A2A.Outputs {
		s.held.Drop("out/" + o.File)
	}
}

// collectOutputs reads what a completed task left for its client: the manifest's output
// files that are there, in the manifest's order, then out/a2a.json's artifacts. A file
// that cannot be given as its entry says (over MaxOutputBytes, not JSON for data, not
// UTF-8 for text) or an answer file that does not parse fails the task, naming it.
func (s *session) collectOutputs() (arts []Artifact, reply string, err error) {
	for i, o := range s.staged.Manifest.A2A.Outputs {
		name := "out/" + o.File
		data, err := s.held.Read(name, MaxOutputBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("a2a.outputs[%d]: reading %s: %w (at most %d bytes)", i, name, err, MaxOutputBytes)
		}
		p, err := outputPart(name, data, o.As, o.MediaType, path.Base(o.File))
		if err != nil {
			return nil, "", fmt.Errorf("a2a.outputs[%d]: %w", i, err)
		}
		arts = append(arts, Artifact{Name: cmp.Or(o.Name, path.Base(o.File)), Description: o.Description, Parts: []Part{p}})
	}
	raw, err := s.held.Read(answerFile, MaxOutputBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return arts, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading %s: %w (at most %d bytes)", answerFile, err, MaxOutputBytes)
	}
	var spec parts.Answer
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return nil, "", fmt.Errorf("%s is not an answer file: %w (docs/reference/guest-abi.md \"Artifacts\")", answerFile, err)
	}
	switch spec.Reply {
	case "", "task":
	case ReplyMessage:
		reply = ReplyMessage
	default:
		return nil, "", fmt.Errorf("%s: reply %q is not \"task\" or \"message\"", answerFile, spec.Reply)
	}
	for i, a := range spec.Artifacts {
		art := Artifact{Name: a.Name, Description: a.Description}
		if len(a.Parts) == 0 {
			return nil, "", fmt.Errorf("%s: artifacts[%d] has no parts; give it at least one", answerFile, i)
		}
		for j, ap := range a.Parts {
			p, err := s.answerPart(ap)
			if err != nil {
				return nil, "", fmt.Errorf("%s: artifacts[%d].parts[%d]: %w", answerFile, i, j, err)
			}
			art.Parts = append(art.Parts, p)
		}
		arts = append(arts, art)
	}
	return arts, reply, nil
}

// answerPart reads one part of the answer file.
func (s *session) answerPart(ap parts.AnswerPart) (Part, error) {
	set := 0
	for _, b := range []bool{ap.Text != nil, ap.File != "", ap.URL != "", len(ap.Data) > 0} {
		if b {
			set++
		}
	}
	if set != 1 {
		return Part{}, errors.New("holds none or several of text, file, url and data; give exactly one")
	}
	switch {
	case ap.Text != nil:
		return Part{Kind: "text", Text: *ap.Text, MediaType: ap.MediaType}, nil
	case len(ap.Data) > 0:
		return Part{Kind: "data", MediaType: "application/json", Data: jsontext.Compact(ap.Data)}, nil
	case ap.URL != "":
		if !strings.HasPrefix(ap.URL, "https://") && !strings.HasPrefix(ap.URL, "http://") {
			return Part{}, fmt.Errorf("url %q is not an http or https URL", ap.URL)
		}
		return Part{Kind: "file", URL: ap.URL, Name: ap.Filename, MediaType: mediatype.OfFile(ap.MediaType, ap.Filename)}, nil
	}
	if !manifest.OutputName(ap.File) {
		return Part{}, fmt.Errorf("file %q is not a clean name below out/ (such as report.pdf)", ap.File)
	}
	name := "out/" + ap.File
	data, err := s.held.Read(name, MaxOutputBytes)
	if err != nil {
		return Part{}, fmt.Errorf("reading %s: %w (at most %d bytes)", name, err, MaxOutputBytes)
	}
	return outputPart(name, data, manifest.OutputFile, ap.MediaType, cmp.Or(ap.Filename, path.Base(ap.File)))
}

// outputPart makes the part of output file name: as a file (its bytes), data (its JSON) or
// text (its UTF-8).
func outputPart(name string, data []byte, as, mediaType, filename string) (Part, error) {
	switch as {
	case manifest.OutputData:
		if !json.Valid(data) {
			return Part{}, fmt.Errorf("%s is to be given as data, and is not JSON", name)
		}
		return Part{Kind: "data", MediaType: "application/json", Data: jsontext.Compact(data)}, nil
	case manifest.OutputText:
		if !utf8.Valid(data) {
			return Part{}, fmt.Errorf("%s is to be given as text, and is not UTF-8", name)
		}
		return Part{Kind: "text", Text: string(data), MediaType: mediaType}, nil
	}
	return Part{Kind: "file", Name: filename, MediaType: mediatype.OfFile(mediaType, filename), Bytes: data}, nil
}
