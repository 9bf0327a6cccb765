package a2a

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/a2aproject/a2a-go/a2a"
)

// artifactsExec completes with a text answer, a file and a data artifact, or, when the
// message says "reply", answers with a Message.
func artifactsExec(_ context.Context, job *Job) Outcome {
	out := Outcome{State: "completed", Text: "done", Artifacts: []Artifact{
		{Name: "report.pdf", Parts: []Part{{Kind: KindFile, Name: "report.pdf", MediaType: "application/pdf", Bytes: []byte("%PDF-1")}}},
		{Name: "result", Description: "counts", Parts: []Part{{Kind: KindData, Data: json.RawMessage(`{"words":2}`)}}},
	}}
	out.Message = job.Text == "reply"
	return out
}

// TestOutboundArtifacts reads a task's artifacts — text, file, data — in every version
// and binding, and a Message answer where a blocking send allows one.
func TestOutboundArtifacts(t *testing.T) {
	_, srv := newServer(t, Config{Executor: execFunc(artifactsExec)})
	for _, tc := range []struct {
		name, version, method string
		msg                   map[string]any
		want                  string // a fragment of the result
	}{
		{"0.3 task", "0.3", "message/send", msg03("go"),
			`"artifacts":[{"artifactId":"answer","name":"answer","parts":[{"kind":"text","text":"done"}]},` +
				`{"artifactId":"artifact-1","name":"report.pdf","parts":[{"kind":"file","file":{"bytes":"JVBERi0x","name":"report.pdf","mimeType":"application/pdf"}}]},` +
				`{"artifactId":"artifact-2","name":"result","description":"counts","parts":[{"kind":"data","data":{"words":2}}]}]`},
		{"1.0 task", "1.0", "SendMessage", msg10("go"),
			`"artifacts":[{"artifactId":"answer","name":"answer","parts":[{"text":"done"}]},` +
				`{"artifactId":"artifact-1","name":"report.pdf","parts":[{"raw":"JVBERi0x","filename":"report.pdf","mediaType":"application/pdf"}]},` +
				`{"artifactId":"artifact-2","name":"result","description":"counts","parts":[{"data":{"words":2}}]}]`},
		{"0.3 message", "0.3", "message/send", msg03("reply"),
			`"role":"agent","parts":[{"kind":"text","text":"done"},{"kind":"file","file":{"bytes":"JVBERi0x","name":"report.pdf","mimeType":"application/pdf"}},{"kind":"data","data":{"words":2}}]}`},
		{"1.0 message", "1.0", "SendMessage", msg10("reply"),
			`{"message":{"messageId":`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := string(ok(t, call(t, srv, tc.version, tc.method, map[string]any{"message": tc.msg})))
			if !strings.Contains(res, tc.want) {
				t.Fatalf("result %s\ndoes not hold %s", res, tc.want)
			}
			if strings.Contains(tc.name, "message") {
				var m struct {
					Kind   string `json:"kind"`
					TaskID string `json:"taskId"`
					Parts  []json.RawMessage
				}
				if tc.version == "1.0" {
					var w struct{ Message json.RawMessage }
					_ = json.Unmarshal([]byte(res), &w)
					res = string(w.Message)
				}
				if err := json.Unmarshal([]byte(res), &m); err != nil || len(m.Parts) != 3 || m.TaskID != "" || tc.version == "0.3" && m.Kind != "message" {
					t.Fatalf("message answer %s: %v", res, err)
				}
			}
		})
	}
}

// TestOutboundMessageREST reads a Message answer over HTTP+JSON in both versions: 1.0's
// SendMessageResponse {message}, 0.3's proto {msg}.
func TestOutboundMessageREST(t *testing.T) {
	_, srv := newServer(t, Config{Executor: execFunc(artifactsExec)})
	for _, tc := range []struct{ name, path, version, body, want string }{
		{"1.0", "/message:send", "1.0", `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"reply"}]}}`,
			`{"message":{"messageId":`},
		{"0.3", "/v1/message:send", "0.3", `{"message":{"messageId":"m1","role":"ROLE_USER","content":[{"text":"reply"}]}}`,
			`{"msg":{"messageId":`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := postTo(t, srv, srv.URL+prefix+tc.path, map[string]string{"A2A-Version": tc.version, "Content-Type": "application/json"}, []byte(tc.body))
			if resp.StatusCode != 200 || !strings.HasPrefix(string(body), tc.want) || !strings.Contains(string(body), `"JVBERi0x"`) {
				t.Fatalf("HTTP %d %s\nwant it to begin %s and hold the file", resp.StatusCode, body, tc.want)
			}
		})
	}
}

// TestOutboundWithGoSDK03 reads a task's file and data artifacts, and a Message answer,
// with the A2A Go SDK 0.3 (JSON-RPC, its one HTTP binding).
func TestOutboundWithGoSDK03(t *testing.T) {
	_, srv := newServer(t, Config{Executor: execFunc(artifactsExec), CardVersion: CardV03})
	_, client := sdkClient(t, endpoint(srv), srv.Client())
	ctx := context.Background()
	res, err := client.SendMessage(ctx, userMessage("go"))
	task, ok := res.(*sdk.Task)
	if err != nil || !ok || len(task.Artifacts) != 3 {
		t.Fatalf("SendMessage: %#v, %v", res, err)
	}
	file, okFile := task.Artifacts[1].Parts[0].(sdk.FilePart)
	data, okData := task.Artifacts[2].Parts[0].(sdk.DataPart)
	if !okFile || !okData {
		t.Fatalf("artifact parts %#v, %#v", task.Artifacts[1].Parts, task.Artifacts[2].Parts)
	}
	if b, ok := file.File.(sdk.FileBytes); !ok || b.Bytes != "JVBERi0x" || b.Name != "report.pdf" || b.MimeType != "application/pdf" || data.Data["words"] != float64(2) {
		t.Errorf("file %#v, data %#v", file.File, data.Data)
	}
	res, err = client.SendMessage(ctx, userMessage("reply"))
	if m, ok := res.(*sdk.Message); err != nil || !ok || m.Role != sdk.MessageRoleAgent || len(m.Parts) != 3 || partsText(m.Parts[:1]) != "done" {
		t.Errorf("a Message answer read as %#v, %v", res, err)
	}
}

// TestOutboundMessageOddArtifacts answers with a Message whose artifacts hold no parts, or
// one text part while the text answer is empty: the first is the (empty) text answer, the
// second that text part.
func TestOutboundMessageOddArtifacts(t *testing.T) {
	_, srv := newServer(t, Config{Executor: execFunc(func(_ context.Context, job *Job) Outcome {
		out := Outcome{State: "completed", Message: true, Artifacts: []Artifact{{Name: "empty"}}}
		if job.Text == "text" {
			out.Artifacts = []Artifact{{Name: "t", Parts: []Part{{Kind: KindText, Text: "from an artifact"}}}}
		}
		return out
	})})
	for text, want := range map[string]string{"empty": `"parts":[{"text":""}]`, "text": `"parts":[{"text":"from an artifact"}]`} {
		res := string(ok(t, call(t, srv, "1.0", "SendMessage", map[string]any{"message": msg10(text)})))
		if !strings.HasPrefix(res, `{"message":`) || !strings.Contains(res, want) {
			t.Errorf("%s: result %s\nwant a message holding %s", text, res, want)
		}
	}
}

// TestOutboundMessageNonBlocking: a non-blocking send to a capsule that answers with a
// Message shows the task even when the answer came before the send's own: what the
// client gets does not depend on that race.
func TestOutboundMessageNonBlocking(t *testing.T) {
	msg := message{Role: "agent", Parts: []Part{{Kind: KindText, Text: "at once"}}}
	snap := &snapshot{ID: "t1", ContextID: "c1", Reply: true, Status: status{State: stateCompleted, Msg: &msg}}
	for _, d := range []dialect{v03, v10} {
		for _, blocking := range []bool{true, false} {
			b, err := json.Marshal(d.sendResult(snap, nil, blocking))
			if err != nil {
				t.Fatal(err)
			}
			isMessage := strings.HasPrefix(string(b), `{"kind":"message"`) || strings.HasPrefix(string(b), `{"message":`)
			if isMessage != blocking {
				t.Errorf("dialect %v, blocking %v: %s", d, blocking, b)
			}
		}
	}
}
