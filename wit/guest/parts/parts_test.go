package parts

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMessageAndAnswer reads a message as the runtime writes in/message.json and writes an
// answer file in the shape the runtime reads (runtime/outputs.go).
func TestMessageAndAnswer(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "in"), 0o755)
	os.MkdirAll(filepath.Join(root, "out"), 0o755)
	os.WriteFile(filepath.Join(root, "in", "message.json"), []byte(`{"message_id":"m1","task_id":"tsk_1","context_id":"ctx_1","parts":[`+
		`{"kind":"text","text":"hi"},{"kind":"file","file":"in/1-a.pdf","name":"a.pdf","media_type":"application/pdf","size":4},{"kind":"data","media_type":"application/json","data":{"n":1}}]}`), 0o644)
	m, err := readMessage(root)
	if err != nil || m.MessageID != "m1" || len(m.Parts) != 3 || m.Parts[1].File != "in/1-a.pdf" || m.Parts[1].Size != 4 || string(m.Parts[2].Data) != `{"n":1}` {
		t.Fatalf("message %+v, %v", m, err)
	}
	d, err := Data(map[string]int{"count": 42})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeAnswer(root, Answer{Reply: "message", Artifacts: []Artifact{{Name: "r", Parts: []AnswerPart{Text("t"), File("r.pdf", "application/pdf", ""), URL("https://x.example/f", "", "f"), d}}}}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(root, "out", "a2a.json"))
	want := `{"reply":"message","artifacts":[{"name":"r","parts":[{"text":"t"},{"file":"r.pdf","media_type":"application/pdf"},{"url":"https://x.example/f","filename":"f"},{"data":{"count":42}}]}]}`
	if string(got) != want {
		t.Errorf("answer file\n got %s\nwant %s", got, want)
	}
}
