package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runJS runs script from testdata/jsclient with node and returns its stdout, installing
// the A2A JS SDK first when node_modules is absent; it skips the test without node.
func runJS(t *testing.T, script string, args ...string) []byte {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed; skipping the A2A JS SDK client test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := filepath.Join("testdata", "jsclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@a2a-js", "sdk", "package.json")); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Fatal("node is installed but npm is not; install npm to run the JS client test")
		}
		cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install: %v\n%s", err, out)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstdout: %s\nstderr: %s", script, err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes()
}

// TestJSClient drives the handler with the official A2A JS SDK (testdata/jsclient).
func TestJSClient(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}, CardVersion: CardV03})
	stdout := runJS(t, "client.mjs", srv.URL+prefix+"/.well-known/agent-card.json")
	var out struct {
		Card struct {
			Name string `json:"name"`
			URL  string `json:"url"`
		} `json:"card"`
		Send   tObj   `json:"send"`
		Stream []tObj `json:"stream"`
	}
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("client output: %v: %s", err, stdout)
	}
	if out.Card.Name != "hello" || out.Card.URL != endpoint(srv) {
		t.Errorf("card %+v", out.Card)
	}
	checkJSSendStream(t, out.Send, out.Stream)
	if n := len(out.Stream); n > 2 && (out.Stream[n-2].Artifact == nil || !out.Stream[n-2].Append || !out.Stream[n-2].LastChunk) {
		t.Errorf("last artifact chunk %+v", out.Stream[n-2])
	}
}

// holdExec echoes like echoExec, except that a message "hold" runs until canceled and a
// message "reply" is answered with a Message holding text and data.
type holdExec struct{ echoExec }

func (e *holdExec) Execute(ctx context.Context, job *Job) Outcome {
	switch job.Text {
	case "hold":
		<-ctx.Done()
		return Outcome{State: "failed", Text: ctx.Err().Error()}
	case "reply":
		return Outcome{State: "completed", Text: "a message", Message: true,
			Artifacts: []Artifact{{Parts: []Part{{Kind: KindData, Data: json.RawMessage(`{"n":1}`)}}}}}
	}
	return e.echoExec.Execute(ctx, job)
}

// TestJSClientREST drives the HTTP+JSON routes with the A2A JS SDK 0.3's REST transport
// alone (testdata/jsclient/rest.mjs): it must find the binding in the card and read the
// 0.3 proto-JSON answers, errors included.
func TestJSClientREST(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &holdExec{}, CardVersion: CardV03})
	stdout := runJS(t, "rest.mjs", srv.URL+prefix+"/.well-known/agent-card.json")
	var out struct {
		Card struct {
			Name string `json:"name"`
		} `json:"card"`
		Send   tObj   `json:"send"`
		Stream []tObj `json:"stream"`
		Get    tObj   `json:"get"`
		Cancel tObj   `json:"cancel"`
		Reply  struct {
			Kind, Role string
			Parts      []map[string]any
		} `json:"reply"`
		Missing *struct {
			Name    string `json:"name"`
			Message string `json:"message"`
		} `json:"missing"`
	}
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("client output: %v: %s", err, stdout)
	}
	if out.Card.Name != "hello" {
		t.Errorf("card %+v", out.Card)
	}
	// The SDK turns the proto-JSON back into its 0.3 JSON-RPC types: kinds, parts.
	checkJSSendStream(t, out.Send, out.Stream)
	if g := out.Get; g.Kind != "task" || g.ID == "" || len(g.History) != 1 || text(g.History[0].Parts) != "hold" || g.History[0].Role != "user" {
		t.Errorf("get %+v", g)
	}
	if c := out.Cancel; c.ID != out.Get.ID || c.Status.State != "canceled" {
		t.Errorf("cancel %+v", c)
	}
	// HTTP+JSON 0.3's {msg}, read by the SDK as a Message.
	if r := out.Reply; r.Kind != "message" || r.Role != "agent" || len(r.Parts) != 2 || r.Parts[0]["text"] != "a message" || r.Parts[1]["kind"] != "data" {
		t.Errorf("a Message answer: %+v", r)
	}
	if m := out.Missing; m == nil || m.Name != "TaskNotFoundError" {
		t.Errorf("a missing task: %+v", m)
	}
}

// checkJSSendStream checks what the JS SDK scripts report of a blocking send of "hello
// from js" and a stream of "stream from js" to the echo executor, whichever transport.
func checkJSSendStream(t *testing.T, send tObj, stream []tObj) {
	t.Helper()
	if send.Kind != "task" || send.Status.State != "completed" || len(send.Artifacts) != 1 || text(send.Artifacts[0].Parts) != "echo: hello from js" {
		t.Errorf("send result %+v", send)
	}
	var kinds []string
	var chunks string
	for _, e := range stream {
		kinds = append(kinds, e.Kind+":"+e.Status.State)
		if e.Kind == "artifact-update" && e.Artifact != nil {
			chunks += text(e.Artifact.Parts)
		}
	}
	if strings.Join(kinds, " ") != "task:submitted status-update:working artifact-update: artifact-update: artifact-update: artifact-update: status-update:completed" {
		t.Errorf("stream events %v", kinds)
	}
	if chunks != "echo: stream from js" {
		t.Errorf("chunks %q", chunks)
	}
	if n := len(stream); n == 0 || stream[n-1].Final == nil || !*stream[n-1].Final {
		t.Errorf("the stream does not end with a final status")
	}
}
