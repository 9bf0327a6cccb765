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

// TestJSClient drives the handler with the official A2A JS SDK (testdata/jsclient),
// installing it first when node_modules is absent.
func TestJSClient(t *testing.T) {
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

	_, srv := newServer(t, Config{Executor: &echoExec{}})
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, "client.mjs", srv.URL+prefix+"/.well-known/agent-card.json")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node client.mjs: %v\nstdout: %s\nstderr: %s", err, stdout.Bytes(), stderr.Bytes())
	}
	var out struct {
		Card struct {
			Name string `json:"name"`
			URL  string `json:"url"`
		} `json:"card"`
		Send   tObj   `json:"send"`
		Stream []tObj `json:"stream"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("client output: %v: %s", err, stdout.Bytes())
	}
	if out.Card.Name != "hello" || out.Card.URL != endpoint(srv) {
		t.Errorf("card %+v", out.Card)
	}
	if s := out.Send; s.Kind != "task" || s.Status.State != "completed" || len(s.Artifacts) != 1 || text(s.Artifacts[0].Parts) != "echo: hello from js" {
		t.Errorf("send result %+v", s)
	}
	var kinds []string
	var chunks string
	for _, e := range out.Stream {
		kinds = append(kinds, e.Kind+":"+e.Status.State)
		if e.Kind == "status-update" && e.Status.Message != nil {
			chunks += text(e.Status.Message.Parts)
		}
	}
	if strings.Join(kinds, " ") != "task:submitted status-update:working status-update:working status-update:working status-update:working artifact-update: status-update:completed" {
		t.Errorf("stream events %v", kinds)
	}
	if chunks != "echo: stream from js" {
		t.Errorf("chunks %q", chunks)
	}
	if n := len(out.Stream); n == 0 || out.Stream[n-1].Final == nil || !*out.Stream[n-1].Final {
		t.Errorf("the stream does not end with a final status")
	}
	if n := len(out.Stream); n > 2 && (out.Stream[n-2].Artifact == nil || text(out.Stream[n-2].Artifact.Parts) != "echo: stream from js") {
		t.Errorf("artifact event %+v", out.Stream[n-2])
	}
}
