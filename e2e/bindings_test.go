package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
)

// TestBindingsBehindAFront: the conformance capsule served as operators.md "gRPC" says —
// JSON-RPC and HTTP+JSON under `handle_path`, gRPC on a site of its own, both behind a
// front Caddy (reverse_proxy, and reverse_proxy h2c:// for gRPC), the card naming the
// front's gRPC target. The official Go SDK (a2a-go v2) reads the card through the front
// and, on each of the three bindings, sends (file and data parts echoed back), streams,
// gets, lists and cancels.
func TestBindingsBehindAFront(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	home, reg := filepath.Join(tmp, "home"), filepath.Join(tmp, "registry")
	os.MkdirAll(home, 0o755)
	publish(t, home, reg, "../examples/artifacts/conformance-io", "conformance-io", guestbuild.Wasm(t, "../examples/guests/conformance-io"))
	capDir := filepath.Join(tmp, "conformance")
	copyDir(t, "../examples/capsules/conformance", capDir)
	os.Remove(filepath.Join(capDir, "murmur.lock"))
	os.WriteFile(filepath.Join(capDir, "capsule.wasm"), guestbuild.Wasm(t, "../examples/guests/conformance-capsule"), 0o644)
	manifest := filepath.Join(capDir, "murmur.yaml")

	gw, gwGRPC, front, frontGRPC := freePort(t), freePort(t), freePort(t), freePort(t)
	const h2c = "\tservers {\n\t\tprotocols h1 h2 h2c\n\t}\n"
	capsule := "capsule " + manifest + " {\n\t\t\tgrpc 127.0.0.1:" + frontGRPC + "\n\t\t}"
	serveGlobal(t, h2c, "", `http://127.0.0.1:`+gw+` {
	handle_path /agents/conformance/* {
		`+capsule+`
	}
}

http://127.0.0.1:`+gwGRPC+` {
	`+capsule+`
}
`, "CAPSULE_REGISTRY="+reg)
	serveGlobal(t, h2c, "", `http://127.0.0.1:`+front+` {
	reverse_proxy 127.0.0.1:`+gw+`
}

http://127.0.0.1:`+frontGRPC+` {
	reverse_proxy h2c://127.0.0.1:`+gwGRPC+`
}
`)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := "http://127.0.0.1:" + front + "/agents/conformance/"
	card, err := agentcard.NewResolver(nil).Resolve(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC} {
		t.Run(string(binding), func(t *testing.T) {
			client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{binding}}),
				a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
			if err != nil {
				t.Fatal(err)
			}
			defer client.Destroy()
			message := func(id string, parts ...*a2a.Part) *a2a.SendMessageRequest {
				m := a2a.NewMessage(a2a.MessageRoleUser, parts...)
				m.ID = id + "-" + a2a.NewMessageID()
				return &a2a.SendMessageRequest{Message: m}
			}

			file := a2a.NewRawPart([]byte("%PDF-1.4 a small file"))
			file.Filename, file.MediaType = "in.pdf", "application/pdf"
			data := a2a.NewDataPart(map[string]any{"answer": 42})
			res, err := client.SendMessage(ctx, message("echo-parts", a2a.NewTextPart("echo these"), file, data))
			if err != nil {
				t.Fatal(err)
			}
			task, ok := res.(*a2a.Task)
			var got []string
			if ok {
				for _, a := range task.Artifacts {
					for _, p := range a.Parts {
						switch {
						case p.Text() != "":
							got = append(got, "text:"+p.Text())
						case p.Raw() != nil:
							got = append(got, "file:"+p.Filename+":"+string(p.Raw()))
						case p.Data() != nil:
							got = append(got, "data:"+mustJSON(t, p.Data()))
						}
					}
				}
			}
			if want := `text:echo these file:in.pdf:%PDF-1.4 a small file data:{"answer":42}`; !ok || task.Status.State != a2a.TaskStateCompleted || strings.Join(got, " ") != want {
				t.Fatalf("echo-parts: %v, want %q: %s", got, want, mustJSON(t, res))
			}

			var chunks []string
			var streamed a2a.TaskID
			for ev, err := range client.SendStreamingMessage(ctx, message("tck-stream-artifact-chunked", a2a.NewTextPart("chunks"))) {
				if err != nil {
					t.Fatal(err)
				}
				if u, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
					streamed = u.TaskID
					for _, p := range u.Artifact.Parts {
						chunks = append(chunks, p.Text())
					}
				}
			}
			if strings.Join(chunks, "") != "chunk-1 chunk-2" {
				t.Errorf("streamed chunks %q", chunks)
			}
			if got, err := client.GetTask(ctx, &a2a.GetTaskRequest{ID: streamed}); err != nil || got.Status.State != a2a.TaskStateCompleted {
				t.Errorf("GetTask of the streamed task: %v, %v", got, err)
			}
			list, err := client.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: task.ContextID})
			if err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != task.ID {
				t.Errorf("ListTasks of the echo's context: %s, %v", mustJSON(t, list), err)
			}

			// A blocking send returns once the task waits for input; then it is canceled.
			res, err = client.SendMessage(ctx, message("tck-input-required", a2a.NewTextPart("wait")))
			if err != nil {
				t.Fatal(err)
			}
			waiting, _ := res.(*a2a.Task)
			if waiting == nil || waiting.Status.State != a2a.TaskStateInputRequired {
				t.Fatalf("the waiting task: %s", mustJSON(t, res))
			}
			canceled, err := client.CancelTask(ctx, &a2a.CancelTaskRequest{ID: waiting.ID})
			if err != nil || canceled.Status.State != a2a.TaskStateCanceled {
				t.Errorf("CancelTask: %v, %v", canceled, err)
			}
		})
	}
}
