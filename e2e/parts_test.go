package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
)

// fileServer serves files on 127.0.0.1, where the conformance capsule may fetch from.
func fileServer(t *testing.T, files map[string][]byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/pdf")
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPartsWithTheGoSDK sends files and data to the conformance capsule through the built
// gateway with the official A2A Go SDK (v2, A2A 1.0), on both bindings, and reads them
// back: an inline file of 1 MiB, a file by URL from an allowed loopback server and a data
// part come back as artifacts byte for byte; a URL the capsule may not reach and a file
// over its limit are refused, naming the rule and the limit, and leave nothing behind; a
// Message answer is read as a Message; a streamed answer comes in appended chunks whose
// concatenation is the task's artifact.
func TestPartsWithTheGoSDK(t *testing.T) {
	g := startGateway(t)
	inline := randomBytes(t, 1<<20)
	remote := randomBytes(t, 300<<10)
	files := fileServer(t, map[string][]byte{"/remote.pdf": remote})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	card, err := agentcard.NewResolver(g.httpClient).Resolve(ctx, g.conformance)
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(g.dir, "bin", "work", "conformance")
	for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON} {
		t.Run(string(binding), func(t *testing.T) {
			client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{binding}}))
			if err != nil {
				t.Fatal(err)
			}
			send := func(id string, parts ...*a2a.Part) (a2a.SendMessageResult, error) {
				msg := a2a.NewMessage(a2a.MessageRoleUser, parts...)
				msg.ID = id + "-" + a2a.NewMessageID()
				return client.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
			}

			file := a2a.NewRawPart(inline)
			file.Filename, file.MediaType = "in.bin", "application/octet-stream"
			byURL := a2a.NewFileURLPart(a2a.URL(files.URL+"/remote.pdf"), "application/pdf")
			byURL.Filename = "remote.pdf"
			data := a2a.NewDataPart(map[string]any{"answer": 42, "nested": map[string]any{"ok": true}})
			res, err := send("echo-parts", a2a.NewTextPart("echo these"), file, byURL, data)
			if err != nil {
				t.Fatal(err)
			}
			task, ok := res.(*a2a.Task)
			if !ok || task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 4 {
				t.Fatalf("echo-parts answered %s", mustJSON(t, res))
			}
			got := []string{}
			for _, a := range task.Artifacts {
				if len(a.Parts) != 1 {
					t.Fatalf("artifact %s has %d parts", a.ID, len(a.Parts))
				}
				p := a.Parts[0]
				switch {
				case p.Text() != "":
					got = append(got, "text:"+p.Text())
				case p.Raw() != nil:
					got = append(got, fmt.Sprintf("file:%s:%s:%v:%v", p.Filename, p.MediaType, bytes.Equal(p.Raw(), inline), bytes.Equal(p.Raw(), remote)))
				case p.Data() != nil:
					got = append(got, "data:"+mustJSON(t, p.Data()))
				default:
					got = append(got, "other:"+mustJSON(t, p))
				}
			}
			want := []string{"text:echo these", "file:in.bin:application/octet-stream:true:false", "file:remote.pdf:application/pdf:false:true",
				`data:{"answer":42,"nested":{"ok":true}}`}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("artifacts\n got %v\nwant %v", got, want)
			}

			res, err = send("tck-message-response", a2a.NewTextPart("hi"))
			if m, ok := res.(*a2a.Message); err != nil || !ok || m.Role != a2a.MessageRoleAgent || m.Parts[0].Text() != "Direct message response" {
				t.Errorf("tck-message-response answered %s, %v", mustJSON(t, res), err)
			}

			before, _ := os.ReadDir(work)
			_, err = send("echo-parts", a2a.NewFileURLPart(a2a.URL(strings.Replace(files.URL, "127.0.0.1", "localhost", 1)+"/remote.pdf"), "application/pdf"))
			if err == nil || !strings.Contains(err.Error(), "not in capabilities.network.allow") {
				t.Errorf("a URL on a host the capsule may not reach: %v", err)
			}
			big := a2a.NewRawPart(make([]byte, 2<<20+1))
			big.MediaType = "application/octet-stream"
			_, err = send("echo-parts", big)
			if err == nil || !strings.Contains(err.Error(), "over this agent's limit of 2097152 bytes per file (a2a.max_file_bytes)") {
				t.Errorf("a file over the limit: %v", err)
			}
			if after, _ := os.ReadDir(work); len(after) != len(before) {
				t.Errorf("a refused message left a context folder: %d before, %d after", len(before), len(after))
			}

			msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("chunks"))
			msg.ID = "tck-stream-artifact-chunked-" + a2a.NewMessageID()
			var chunks []string
			var flags []string
			var taskID a2a.TaskID
			for ev, err := range client.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}) {
				if err != nil {
					t.Fatal(err)
				}
				if u, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
					taskID = u.TaskID
					for _, p := range u.Artifact.Parts {
						chunks = append(chunks, p.Text())
					}
					flags = append(flags, fmt.Sprint(u.Append, u.LastChunk))
				}
			}
			appended := 0
			for _, f := range flags {
				if strings.HasPrefix(f, "true") {
					appended++
				}
			}
			if appended < 2 || flags[len(flags)-1] != "true true" || strings.Join(chunks, "") != "chunk-1 chunk-2" {
				t.Errorf("chunks %q, (append, lastChunk) %v", chunks, flags)
			}
			final, err := client.GetTask(ctx, &a2a.GetTaskRequest{ID: taskID})
			if err != nil || len(final.Artifacts) != 1 || final.Artifacts[0].Parts[0].Text() != strings.Join(chunks, "") {
				t.Errorf("the task's artifact is not the chunks' concatenation: %s, %v", mustJSON(t, final), err)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPartsWithTheJSSDK does what TestPartsWithTheGoSDK does with the official A2A JS SDK
// 1.x (e2e/testdata/jsparts/parts.mjs), on both bindings: files inline and by URL and a
// data part read back byte for byte, a Message answer, appended chunks, a refused URL.
func TestPartsWithTheJSSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is not installed: .ci/run installs it, and in CI this test does not skip")
		}
		t.Skip("node is not installed; .ci/run installs it")
	}
	g := startGateway(t)
	inline := randomBytes(t, 1<<20)
	remote := randomBytes(t, 300<<10)
	files := fileServer(t, map[string][]byte{"/remote.pdf": remote})
	in := filepath.Join(t.TempDir(), "in.bin")
	if err := os.WriteFile(in, inline, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, _ := filepath.Abs("testdata/jsparts")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@a2a-js", "sdk", "package.json")); err != nil {
		install := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		install.Dir = dir
		if out, err := install.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	for _, transport := range []string{"jsonrpc", "rest"} {
		t.Run(transport, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, node, "parts.mjs", g.conformance+"/.well-known/agent-card.json", files.URL+"/remote.pdf", in, transport)
			cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("node parts.mjs: %v\n%s\n%s", err, stdout.Bytes(), stderr.Bytes())
			}
			type jsPart struct {
				Kind, Filename, MediaType, Text, SHA256 string
				Length                                  int
				Data                                    json.RawMessage
			}
			var out struct {
				ProtocolVersion string
				Send            struct {
					Kind, State string
					Artifacts   []struct {
						ArtifactID, Name string
						Parts            []jsPart
					}
				}
				Message struct{ Kind, Role, Text string }
				Stream  []struct {
					Kind, Text        string
					Append, LastChunk bool
				}
				Refused struct{ Name, Message string }
			}
			if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
				t.Fatalf("parts.mjs output: %v\n%s", err, stdout.Bytes())
			}
			if out.ProtocolVersion != "1.0" || out.Send.Kind != "task" || out.Send.State != "TASK_STATE_COMPLETED" || len(out.Send.Artifacts) != 4 {
				t.Fatalf("send: %s", stdout.Bytes())
			}
			var got []string
			for _, a := range out.Send.Artifacts {
				for _, p := range a.Parts {
					got = append(got, fmt.Sprintf("%s:%s:%s:%s:%s:%d:%s", a.ArtifactID, p.Kind, p.Filename, p.Text, p.SHA256, p.Length, p.Data))
				}
			}
			want := []string{"answer:text::echo these::0:",
				fmt.Sprintf("artifact-1:raw:in.bin::%s:%d:", sum(inline), len(inline)),
				fmt.Sprintf("artifact-2:raw:remote.pdf::%s:%d:", sum(remote), len(remote)),
				`artifact-3:data::::0:{"answer":42,"nested":{"ok":true}}`}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("artifacts\n got %q\nwant %q", got, want)
			}
			if m := out.Message; m.Kind != "message" || m.Role != "ROLE_AGENT" || m.Text != "Direct message response" {
				t.Errorf("message answer %+v", m)
			}
			var chunks string
			var appended int
			last := false
			for _, e := range out.Stream {
				if e.Kind == "artifactUpdate" {
					chunks += e.Text
					if e.Append {
						appended++
					}
					last = e.LastChunk
				}
			}
			if chunks != "chunk-1 chunk-2" || appended < 2 || !last {
				t.Errorf("stream %+v", out.Stream)
			}
			if out.Refused.Name != "RequestMalformedError" || !strings.Contains(out.Refused.Message, "not in capabilities.network.allow") {
				t.Errorf("refused URL: %+v", out.Refused)
			}
		})
	}
}
