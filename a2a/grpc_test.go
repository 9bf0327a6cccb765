package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
)

// grpcServer serves cfg's handler at the root over HTTP/1.1 and unencrypted HTTP/2
// (h2c), as Caddy does with `protocols h1 h2c`, and lists its gRPC target on the card.
func grpcServer(t *testing.T, cfg Config) (*Handler, *httptest.Server) {
	t.Helper()
	if cfg.Card.Name == "" {
		cfg.Card = testCard()
	}
	srv := httptest.NewUnstartedServer(nil)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	cfg.GRPC = strings.TrimPrefix(srv.URL, "http://")
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	t.Cleanup(func() {
		stopNow(h)
		srv.Close()
	})
	return h, srv
}

// TestGRPCWithTheGoSDK: the official Go SDK reads the card, finds the gRPC interface, and
// sends, streams, gets, lists and cancels over gRPC; file and data parts round-trip; the
// bearer token travels as metadata and owns the tasks as on the other bindings.
func TestGRPCWithTheGoSDK(t *testing.T) {
	_, srv := grpcServer(t, Config{Executor: &echoExec{}, Tokens: []Token{{Name: "alice", Secret: "a-token"}, {Name: "bob", Secret: "b-token"}},
		Inputs: Inputs{Modes: []string{"text/plain", "application/json"}}})
	ctx := context.Background()
	// a2a-go v2.4 reads securityRequirements' StringList as a bare list and refuses
	// A2A 1.0's card when auth is on: the test's parser drops that member, as the
	// gateway's own peer client does.
	resolver := &agentcard.Resolver{Client: srv.Client(), CardParser: func(b []byte) (*sdk.AgentCard, error) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		delete(m, "securityRequirements")
		b, _ = json.Marshal(m)
		return agentcard.DefaultCardParser(b)
	}}
	card, err := resolver.Resolve(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var listed bool
	for _, i := range card.SupportedInterfaces {
		listed = listed || (i.ProtocolBinding == sdk.TransportProtocolGRPC && i.URL == strings.TrimPrefix(srv.URL, "http://"))
	}
	if !listed {
		t.Fatalf("the card lists no gRPC interface: %+v", card.SupportedInterfaces)
	}
	client := func(token string) *a2aclient.Client {
		c, err := a2aclient.NewFromCard(ctx, card, a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithUnaryInterceptor(func(ctx context.Context, m string, req, reply any, cc *grpc.ClientConn, inv grpc.UnaryInvoker, o ...grpc.CallOption) error {
				return inv(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token), m, req, reply, cc, o...)
			}),
			grpc.WithStreamInterceptor(func(ctx context.Context, d *grpc.StreamDesc, cc *grpc.ClientConn, m string, s grpc.Streamer, o ...grpc.CallOption) (grpc.ClientStream, error) {
				return s(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token), d, cc, m, o...)
			})),
			a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []sdk.TransportProtocol{sdk.TransportProtocolGRPC}}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Destroy() })
		return c
	}
	alice := client("a-token")

	data := sdk.NewDataPart(map[string]any{"n": 3.0})
	file := sdk.NewRawPart([]byte("report"))
	file.Filename, file.MediaType = "r.txt", "text/plain"
	res, err := alice.SendMessage(ctx, &sdk.SendMessageRequest{Message: sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart("hi"), file, data)})
	if err != nil {
		t.Fatalf("SendMessage over gRPC: %v", err)
	}
	task, ok := res.(*sdk.Task)
	if !ok || task.Status.State != sdk.TaskStateCompleted || len(task.Artifacts) != 1 || task.Artifacts[0].Parts[0].Text() != "echo: hi" {
		t.Fatalf("SendMessage answered %#v", res)
	}

	var events int
	var final sdk.TaskState
	for ev, err := range alice.SendStreamingMessage(ctx, &sdk.SendMessageRequest{Message: sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart("stream me"))}) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		events++
		if su, ok := ev.(*sdk.TaskStatusUpdateEvent); ok {
			final = su.Status.State
		}
	}
	if events < 3 || final != sdk.TaskStateCompleted {
		t.Errorf("the stream: %d events, final %q", events, final)
	}

	got, err := alice.GetTask(ctx, &sdk.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != sdk.TaskStateCompleted {
		t.Fatalf("GetTask: %+v, %v", got, err)
	}
	list, err := alice.ListTasks(ctx, &sdk.ListTasksRequest{})
	if err != nil || len(list.Tasks) != 2 {
		t.Errorf("ListTasks: %+v, %v", list, err)
	}
	if _, err := alice.CancelTask(ctx, &sdk.CancelTaskRequest{ID: task.ID}); !errors.Is(err, sdk.ErrTaskNotCancelable) {
		t.Errorf("CancelTask of a finished task: %v", err)
	}
	// Owners as on every binding: bob does not find alice's task.
	if _, err := client("b-token").GetTask(ctx, &sdk.GetTaskRequest{ID: task.ID}); !errors.Is(err, sdk.ErrTaskNotFound) {
		t.Errorf("bob's GetTask of alice's task: %v", err)
	}
}

// TestGRPCErrors: errors are gRPC statuses with the code A2A 1.0 maps them to and a
// google.rpc.ErrorInfo naming the reason in the A2A domain; a call without credentials is
// UNAUTHENTICATED.
func TestGRPCErrors(t *testing.T) {
	_, srv := grpcServer(t, Config{Executor: &echoExec{}, Tokens: []Token{{Name: "alice", Secret: "a-token"}}})
	conn, err := grpc.NewClient(strings.TrimPrefix(srv.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := a2apb.NewA2AServiceClient(conn)
	authed := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer a-token")
	for _, tc := range []struct {
		name   string
		call   func() error
		code   codes.Code
		reason string
	}{
		{"no such task", func() error { _, err := c.GetTask(authed, &a2apb.GetTaskRequest{Id: "tsk_nope"}); return err }, codes.NotFound, "TASK_NOT_FOUND"},
		{"no credentials", func() error {
			_, err := c.GetTask(context.Background(), &a2apb.GetTaskRequest{Id: "tsk_nope"})
			return err
		}, codes.Unauthenticated, ""},
		{"an empty message", func() error { _, err := c.SendMessage(authed, &a2apb.SendMessageRequest{}); return err }, codes.InvalidArgument, "INVALID_PARAMS"},
		{"a version gRPC does not speak", func() error {
			_, err := c.GetTask(metadata.AppendToOutgoingContext(authed, "a2a-version", "0.3"), &a2apb.GetTaskRequest{Id: "tsk_nope"})
			return err
		}, codes.Unimplemented, "VERSION_NOT_SUPPORTED"},
		{"no push notifications", func() error {
			_, err := c.ListTaskPushNotificationConfigs(authed, &a2apb.ListTaskPushNotificationConfigsRequest{TaskId: "tsk_nope"})
			return err
		}, codes.Unimplemented, "PUSH_NOTIFICATION_NOT_SUPPORTED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := grpcstatus.FromError(tc.call())
			if st.Code() != tc.code {
				t.Fatalf("status %v, want %v", st, tc.code)
			}
			if tc.reason == "" {
				return
			}
			var info *errdetails.ErrorInfo
			for _, d := range st.Details() {
				if i, ok := d.(*errdetails.ErrorInfo); ok {
					info = i
				}
			}
			if info == nil || info.Reason != tc.reason || info.Domain != "a2a-protocol.org" {
				t.Errorf("details %v, want ErrorInfo %s in a2a-protocol.org", st.Details(), tc.reason)
			}
		})
	}
}

// grpcBigFile answers with a file over InlineFileBytes, which the handler offloads to a URL.
type grpcBigFile struct{}

func (grpcBigFile) Execute(context.Context, *Job) Outcome {
	return Outcome{State: "completed", Artifacts: []Artifact{{Name: "big", Parts: []Part{{Kind: KindFile, Name: "big.bin",
		MediaType: "application/octet-stream", Bytes: bytes.Repeat([]byte("x"), InlineFileBytes+1)}}}}}
}

// TestGRPCFileURLs: a file offloaded to a URL is named at the endpoint, not under the
// gRPC method's path the call came in on, and downloads there.
func TestGRPCFileURLs(t *testing.T) {
	_, srv := grpcServer(t, Config{Executor: grpcBigFile{}})
	conn, err := grpc.NewClient(strings.TrimPrefix(srv.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	res, err := a2apb.NewA2AServiceClient(conn).SendMessage(context.Background(), &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m",
		Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "big"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var u string
	for _, a := range res.GetTask().GetArtifacts() {
		for _, p := range a.GetParts() {
			if p.GetUrl() != "" {
				u = p.GetUrl()
			}
		}
	}
	if !strings.HasPrefix(u, srv.URL+"/files/") {
		t.Fatalf("the file's URL %q is not the endpoint's %s/files/…", u, srv.URL)
	}
	resp, err := srv.Client().Get(u)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || n != InlineFileBytes+1 {
		t.Errorf("download: HTTP %d, %d bytes", resp.StatusCode, n)
	}
}
