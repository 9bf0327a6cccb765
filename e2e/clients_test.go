package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/capsulegate/capsulegate/runtime"
)

// officialClients drives a wordcount capsule whose agent URL (ending in "/") is agent
// with the official A2A SDKs: Go (a2a-go v0.3) and JavaScript (@a2a-js/sdk 0.3, run with
// node), send and stream each. Both follow the card, so its URL must be right.
func officialClients(t *testing.T, hc *http.Client, agent string) {
	t.Run("a2a-go SDK", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// A 0.3 client asks for its card (the default is A2A 1.0's, docs/reference/a2a.md).
		card, err := agentcard.NewResolver(hc).Resolve(ctx, agent, agentcard.WithRequestHeader("A2A-Version", "0.3"))
		if err != nil {
			t.Fatalf("resolving the card: %v", err)
		}
		if card.URL != agent {
			t.Errorf("card URL %s, want %s", card.URL, agent)
		}
		client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
		if err != nil {
			t.Fatal(err)
		}
		defer client.Destroy()
		res, err := client.SendMessage(ctx, &sdk.MessageSendParams{Message: sdk.NewMessage(sdk.MessageRoleUser, sdk.TextPart{Text: "one two three"})})
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		task, ok := res.(*sdk.Task)
		if !ok || task.Status.State != sdk.TaskStateCompleted || len(task.Artifacts) != 1 || !strings.Contains(sdkText(task.Artifacts[0].Parts), "3 words") {
			t.Fatalf("SendMessage = %#v", res)
		}
		// The receipt reaches the SDK's task as plain metadata, under the extension's URI.
		checkReceipt(t, "SendMessage's task", task.Metadata[runtime.ReceiptURI])
		var ans answerStream
		var final sdk.TaskState
		var finalMeta map[string]any
		for ev, err := range client.SendStreamingMessage(ctx, &sdk.MessageSendParams{Message: sdk.NewMessage(sdk.MessageRoleUser, sdk.TextPart{Text: "a b c d"})}) {
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			switch e := ev.(type) {
			case *sdk.TaskStatusUpdateEvent:
				if e.Final {
					final, finalMeta = e.Status.State, e.Metadata
				}
			case *sdk.TaskArtifactUpdateEvent:
				ans.add(sdkText(e.Artifact.Parts), e.Append, e.LastChunk)
			}
		}
		if !strings.Contains(ans.streamed(), "Counting the words") || !strings.Contains(ans.answer, "4 words") || final != sdk.TaskStateCompleted {
			t.Fatalf("stream: chunks %q, answer %q, final %q", ans.chunks, ans.answer, final)
		}
		checkReceipt(t, "the stream's final status update", finalMeta[runtime.ReceiptURI])
	})

	t.Run("@a2a-js/sdk with node", func(t *testing.T) {
		node, dir := jsSDK(t, "../a2a/testdata/jsclient")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, node, "client.mjs", agent+".well-known/agent-card.json?A2A-Version=0.3")
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("node client.mjs: %v\n%s\n%s", err, stdout.Bytes(), stderr.Bytes())
		}
		var out struct {
			Card struct{ Name, URL string }
			Send struct {
				Status    struct{ State string }
				Artifacts []struct{ Parts []struct{ Text string } }
				Metadata  map[string]any
			}
			Stream []struct {
				Kind   string
				Final  bool
				Status struct{ State string }
			}
		}
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Fatalf("%v: %s", err, stdout.Bytes())
		}
		if out.Card.Name != "wordcount" || out.Card.URL != agent {
			t.Errorf("card %+v", out.Card)
		}
		if out.Send.Status.State != "completed" || len(out.Send.Artifacts) != 1 || len(out.Send.Artifacts[0].Parts) == 0 ||
			!strings.Contains(out.Send.Artifacts[0].Parts[0].Text, "3 words") { // "hello from js"
			t.Errorf("send %+v", out.Send)
		}
		checkReceipt(t, "the JS SDK's task", out.Send.Metadata[runtime.ReceiptURI])
		n := len(out.Stream)
		if n < 3 || !out.Stream[n-1].Final || out.Stream[n-1].Status.State != "completed" || out.Stream[n-2].Kind != "artifact-update" {
			t.Errorf("stream %+v", out.Stream)
		}
	})
}

// checkReceipt checks that v is a script capsule's task receipt as a client decodes
// JSON: every figure present, time spent, no model tokens.
func checkReceipt(t *testing.T, where string, v any) {
	t.Helper()
	rc, ok := v.(map[string]any)
	if !ok {
		t.Errorf("%s: no receipt in the metadata: %#v", where, v)
		return
	}
	for _, k := range []string{"wallSeconds", "guestSeconds", "peakGuestMemoryBytes", "tokens", "toolCalls", "networkBytesSent", "networkBytesReceived", "networkDenials", "traps"} {
		if _, ok := rc[k]; !ok {
			t.Errorf("%s: receipt lacks %s: %v", where, k, rc)
		}
	}
	if w, _ := rc["wallSeconds"].(float64); w <= 0 {
		t.Errorf("%s: receipt %v", where, rc)
	}
	if g, _ := rc["guestSeconds"].(float64); g <= 0 {
		t.Errorf("%s: receipt %v", where, rc)
	}
	if toks, ok := rc["tokens"].([]any); !ok || len(toks) != 0 {
		t.Errorf("%s: a script capsule's receipt has tokens %v", where, rc["tokens"])
	}
}

func sdkText(parts sdk.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		if tp, ok := p.(sdk.TextPart); ok {
			b.WriteString(tp.Text)
		}
	}
	return b.String()
}
