package a2a

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
)

// bearerTransport adds a bearer token to every request, as a client's HTTP stack would.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// sdkClient connects the official A2A Go SDK (v0.3, JSON-RPC) to the capsule the way a
// client would: resolve the card at the base URL, then build a client from it.
func sdkClient(t *testing.T, base string, hc *http.Client) (*sdk.AgentCard, *a2aclient.Client) {
	t.Helper()
	ctx := context.Background()
	card, err := agentcard.NewResolver(hc).Resolve(ctx, base)
	if err != nil {
		t.Fatalf("resolving the card: %v", err)
	}
	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatalf("client from card: %v", err)
	}
	t.Cleanup(func() { _ = client.Destroy() })
	return card, client
}

func userMessage(text string) *sdk.MessageSendParams {
	return &sdk.MessageSendParams{Message: sdk.NewMessage(sdk.MessageRoleUser, sdk.TextPart{Text: text})}
}

func partsText(parts sdk.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		if tp, ok := p.(sdk.TextPart); ok {
			b.WriteString(tp.Text)
		}
	}
	return b.String()
}

func TestGoSDKClient(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}, Bearer: "tok", CardVersion: CardV03})
	hc := &http.Client{Transport: bearerTransport{token: "tok", next: srv.Client().Transport}}
	card, client := sdkClient(t, endpoint(srv), hc)
	ctx := context.Background()

	if card.URL != endpoint(srv) || card.PreferredTransport != sdk.TransportProtocolJSONRPC || !card.Capabilities.Streaming || card.ProtocolVersion != "0.3.0" {
		t.Errorf("card %+v", card)
	}
	if s, ok := card.SecuritySchemes["bearer"].(sdk.HTTPAuthSecurityScheme); !ok || s.Scheme != "bearer" {
		t.Errorf("security schemes %+v", card.SecuritySchemes)
	}

	res, err := client.SendMessage(ctx, userMessage("hi"))
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*sdk.Task)
	if !ok || task.Status.State != sdk.TaskStateCompleted || len(task.Artifacts) != 1 || partsText(task.Artifacts[0].Parts) != "echo: hi" {
		t.Fatalf("SendMessage returned %#v", res)
	}

	var kinds []string
	var chunks, answer string
	var final *sdk.TaskStatusUpdateEvent
	for ev, err := range client.SendStreamingMessage(ctx, userMessage("stream me")) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		switch e := ev.(type) {
		case *sdk.Task:
			kinds = append(kinds, "task")
		case *sdk.TaskStatusUpdateEvent:
			kinds = append(kinds, "status:"+string(e.Status.State))
			if e.Status.Message != nil {
				chunks += partsText(e.Status.Message.Parts)
			}
			if e.Final {
				final = e
			}
		case *sdk.TaskArtifactUpdateEvent:
			kinds = append(kinds, fmt.Sprintf("artifact:%v,%v", e.Append, e.LastChunk))
			answer += partsText(e.Artifact.Parts)
		default:
			t.Fatalf("unexpected event %T", ev)
		}
	}
	if strings.Join(kinds, " ") != "task status:working artifact:false,false artifact:true,false artifact:true,false artifact:true,true status:completed" {
		t.Errorf("stream events %v", kinds)
	}
	if chunks != "" || answer != "echo: stream me" || final == nil || final.Status.State != sdk.TaskStateCompleted {
		t.Errorf("status messages %q, answer chunks %q, final %+v", chunks, answer, final)
	}

	got, err := client.GetTask(ctx, &sdk.TaskQueryParams{ID: task.ID})
	if err != nil || got.Status.State != sdk.TaskStateCompleted || got.ID != task.ID {
		t.Fatalf("GetTask: %+v, %v", got, err)
	}
	if _, err := client.CancelTask(ctx, &sdk.TaskIDParams{ID: task.ID}); !errors.Is(err, sdk.ErrTaskNotCancelable) {
		t.Errorf("CancelTask of a finished task: %v", err)
	}
	if _, err := client.GetTask(ctx, &sdk.TaskQueryParams{ID: "tsk_nope"}); !errors.Is(err, sdk.ErrTaskNotFound) {
		t.Errorf("GetTask of an unknown task: %v", err)
	}
	// Without the token the SDK sees the 401.
	_, anon := sdkClient(t, endpoint(srv), srv.Client())
	if _, err := anon.SendMessage(ctx, userMessage("hi")); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("SendMessage without a token: %v", err)
	}
}

func TestGoSDKInputRequired(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &inputExec{errs: make(chan error, 1)}, CardVersion: CardV03})
	_, client := sdkClient(t, endpoint(srv), srv.Client())
	ctx := context.Background()
	res, err := client.SendMessage(ctx, userMessage("hi"))
	if err != nil {
		t.Fatal(err)
	}
	asked := res.(*sdk.Task)
	if asked.Status.State != sdk.TaskStateInputRequired || partsText(asked.Status.Message.Parts) != "what is your name?" {
		t.Fatalf("first send: %+v", asked.Status)
	}
	answer := userMessage("Zoe")
	answer.Message.TaskID = asked.ID
	var last sdk.Event
	for ev, err := range client.SendStreamingMessage(ctx, answer) {
		if err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	if fin, ok := last.(*sdk.TaskStatusUpdateEvent); !ok || !fin.Final || fin.Status.State != sdk.TaskStateCompleted {
		t.Fatalf("answer stream ended with %#v", last)
	}
	done, err := client.GetTask(ctx, &sdk.TaskQueryParams{ID: asked.ID})
	if err != nil || partsText(done.Artifacts[0].Parts) != "hello, Zoe" {
		t.Fatalf("task after the answer: %+v, %v", done, err)
	}
}
