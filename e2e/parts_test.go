package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
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
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/capsulegate/capsulegate/internal/testkit/harnesstest"
	"github.com/capsulegate/capsulegate/runtime"
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
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	// Parallel: it waits on its own gateway more than it computes, and the package's
	// wall time is near its bound (docs/benchmarks.md, the test suite's time).
	t.Parallel()
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
	for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC} {
		t.Run(string(binding), func(t *testing.T) {
			client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{binding}}),
				a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
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
				case p.Raw() != nil || p.URL() != "":
					// A large file comes as a gateway URL (docs/reference/a2a.md "Parts").
					b := p.Raw()
					if p.URL() != "" {
						b = fetchFile(t, g, string(p.URL()))
					}
					got = append(got, fmt.Sprintf("file:%s:%s:%v:%v", p.Filename, p.MediaType, bytes.Equal(b, inline), bytes.Equal(b, remote)))
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
			if m, ok := res.(*a2a.Message); err != nil || !ok || m.Role != a2a.MessageRoleAgent || len(m.Parts) == 0 || m.Parts[0].Text() != "Direct message response" {
				t.Errorf("tck-message-response answered %s, %v", mustJSON(t, res), err)
			}

			// The sends above made context folders: a refused one must add none.
			before, err := os.ReadDir(work)
			if err != nil || len(before) == 0 {
				t.Fatalf("the context folders in %s: %d, %v", work, len(before), err)
			}
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
			if err != nil || len(final.Artifacts) != 1 || len(final.Artifacts[0].Parts) == 0 || final.Artifacts[0].Parts[0].Text() != strings.Join(chunks, "") {
				t.Errorf("the task's artifact is not the chunks' concatenation: %s, %v", mustJSON(t, final), err)
			}
			if err == nil {
				checkReceipt(t, "a2a-go v2's GetTask", final.Metadata[runtime.ReceiptURI])
			}
		})
	}
}

// fetchFile reads a file URL the gateway handed out; it must be one of the gateway's.
func fetchFile(t *testing.T, g *gateway, u string) []byte {
	t.Helper()
	if !strings.HasPrefix(u, g.conformance+"/files/") {
		t.Fatalf("file URL %s is not the gateway's", u)
	}
	resp, err := g.httpClient.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d, %v", u, resp.StatusCode, err)
	}
	return b
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
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	// Parallel: it waits on its own servers and processes more than it computes, and
	// the package's wall time is near its bound (docs/benchmarks.md, the test suite's time).
	t.Parallel()
	node, dir := jsSDK(t, "testdata/jsparts")
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
				Kind, Filename, MediaType, Text, SHA256, URL string
				Length                                       int
				Data                                         json.RawMessage
			}
			var out struct {
				Binding         string
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
			if want := map[string]string{"jsonrpc": "JSONRPC", "rest": "HTTP+JSON"}[transport]; out.Binding != want {
				t.Errorf("the SDK spoke %q, want %q", out.Binding, want)
			}
			if out.ProtocolVersion != "1.0" || out.Send.Kind != "task" || out.Send.State != "TASK_STATE_COMPLETED" || len(out.Send.Artifacts) != 4 {
				t.Fatalf("send: %s", stdout.Bytes())
			}
			var got []string
			for _, a := range out.Send.Artifacts {
				for _, p := range a.Parts {
					if p.Kind == "url" { // a large file, read at the gateway's URL
						b := fetchFile(t, g, p.URL)
						p.Kind, p.SHA256, p.Length = "raw", sum(b), len(b)
					}
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

// TestConformanceScenarios drives the conformance capsule through every scenario the A2A
// TCK runs against it (internal/cmd/tck/run.sh), over JSON-RPC in both versions: text,
// file, file-URL and data artifacts, a Message answer, input-required answered and
// canceled, an unsupported media type, and the card each site serves.
func TestConformanceScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	// Parallel: it waits on its own gateway more than it computes, and the package's
	// wall time is near its bound (docs/benchmarks.md, the test suite's time).
	t.Parallel()
	g := startGateway(t)
	type site struct{ name, url, version, send, get, cancel string }
	for _, s := range []site{
		{"1.0", g.conformance + "/", "1.0", "SendMessage", "GetTask", "CancelTask"},
		{"0.3", g.conformance03 + "/", "0.3", "message/send", "tasks/get", "tasks/cancel"},
	} {
		t.Run(s.name, func(t *testing.T) {
			msg := func(id, taskID string) map[string]any {
				m := map[string]any{"messageId": id + "-" + s.name + fmt.Sprint(time.Now().UnixNano()), "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hi"}}}
				if s.version == "0.3" {
					m["role"], m["kind"] = "user", "message"
					m["parts"] = []any{map[string]any{"kind": "text", "text": "hi"}}
				}
				if taskID != "" {
					m["taskId"] = taskID
				}
				return m
			}
			// result returns the send's Task or Message as JSON, unwrapped from 1.0's member.
			result := func(r rpcReply) (kind string, body json.RawMessage) {
				t.Helper()
				if r.Error != nil {
					t.Fatalf("error %d: %s", r.Error.Code, r.Error.Message)
				}
				if s.version == "0.3" {
					var k struct{ Kind string }
					json.Unmarshal(r.Result, &k)
					return k.Kind, r.Result
				}
				var w map[string]json.RawMessage
				json.Unmarshal(r.Result, &w)
				for k, v := range w {
					return k, v
				}
				return "", nil
			}
			state := func(st string) string {
				if s.version == "1.0" {
					return "TASK_STATE_" + strings.ToUpper(strings.ReplaceAll(st, "-", "_"))
				}
				return st
			}
			for _, tc := range []struct{ id, kind, want string }{
				{"tck-artifact-text", "task", `"artifacts":[{"artifactId":"answer","name":"answer","parts":[{%s"text":"Generated text content"}]}]`},
				{"tck-artifact-file", "task", `"artifacts":[{"artifactId":"artifact-1","name":"file","parts":[%s]}]`},
				{"tck-artifact-file-url", "task", `"artifacts":[{"artifactId":"artifact-1","name":"file-url","parts":[%s]}]`},
				{"tck-artifact-data", "task", `"artifacts":[{"artifactId":"artifact-1","name":"data","parts":[{%s"data":{"key":"value","count":42}}]}]`},
				{"tck-message-response", "message", `"parts":[{%s"text":"Direct message response"}]`},
				{"tck-complete-task", "task", `"parts":[{%s"text":"Hello from TCK"}]`},
				{"tck-other", "task", `"parts":[{%s"text":"Unhandled messageId prefix: tck-other`},
			} {
				kind, body := result(g.call(t, s.url, s.version, s.send, map[string]any{"message": msg(tc.id, "")}))
				want := tc.want
				switch {
				case tc.id == "tck-artifact-file" && s.version == "0.3":
					want = fmt.Sprintf(want, `{"kind":"file","file":{"bytes":"dGNr","name":"output.txt","mimeType":"text/plain"}}`)
				case tc.id == "tck-artifact-file":
					want = fmt.Sprintf(want, `{"raw":"dGNr","filename":"output.txt","mediaType":"text/plain"}`)
				case tc.id == "tck-artifact-file-url" && s.version == "0.3":
					want = fmt.Sprintf(want, `{"kind":"file","file":{"uri":"https://example.com/output.txt","name":"output.txt","mimeType":"text/plain"}}`)
				case tc.id == "tck-artifact-file-url":
					want = fmt.Sprintf(want, `{"url":"https://example.com/output.txt","filename":"output.txt","mediaType":"text/plain"}`)
				case s.version == "0.3" && tc.id == "tck-artifact-data":
					want = fmt.Sprintf(want, `"kind":"data",`)
				case s.version == "0.3":
					want = fmt.Sprintf(want, `"kind":"text",`)
				default:
					want = fmt.Sprintf(want, "")
				}
				if kind != tc.kind || !strings.Contains(string(body), want) {
					t.Errorf("%s: a %s %s\nwant a %s holding %s", tc.id, kind, body, tc.kind, want)
				}
			}

			// input-required: it waits, an answer that says wait keeps it waiting, one that
			// says complete completes it; another waiting task is canceled.
			var task struct {
				ID     string
				Status struct{ State string }
			}
			_, body := result(g.call(t, s.url, s.version, s.send, map[string]any{"message": msg("tck-input-required", "")}))
			json.Unmarshal(body, &task)
			if task.Status.State != state("input-required") {
				t.Fatalf("tck-input-required: %s", body)
			}
			_, body = result(g.call(t, s.url, s.version, s.send, map[string]any{"message": msg("tck-input-required", task.ID)}))
			if json.Unmarshal(body, &task); task.Status.State != state("input-required") {
				t.Fatalf("a second tck-input-required: %s", body)
			}
			_, body = result(g.call(t, s.url, s.version, s.send, map[string]any{"message": msg("tck-complete-task", task.ID)}))
			if json.Unmarshal(body, &task); task.Status.State != state("completed") || !strings.Contains(string(body), "Hello from TCK") {
				t.Fatalf("tck-complete-task answering: %s", body)
			}
			_, body = result(g.call(t, s.url, s.version, s.send, map[string]any{"message": msg("continuation", "")}))
			json.Unmarshal(body, &task)
			r := g.call(t, s.url, s.version, s.cancel, map[string]any{"id": task.ID})
			if r.Error != nil || !strings.Contains(string(r.Result), `"state":"`+state("canceled")+`"`) {
				t.Fatalf("cancel of a waiting task: %+v %s", r.Error, r.Result)
			}
			r = g.call(t, s.url, s.version, s.get, map[string]any{"id": task.ID, "historyLength": 1})
			var got struct{ History []json.RawMessage }
			if json.Unmarshal(r.Result, &got); r.Error != nil || len(got.History) != 1 {
				t.Errorf("get with historyLength 1: %s", r.Result)
			}

			// A media type the capsule does not take: ContentTypeNotSupportedError.
			m := msg("tck-send-003", "")
			m["parts"] = []any{map[string]any{"raw": "dGNr", "mediaType": "application/x-unsupported-tck-type"}}
			if s.version == "0.3" {
				m["parts"] = []any{map[string]any{"kind": "file", "file": map[string]any{"bytes": "dGNr", "mimeType": "application/x-unsupported-tck-type"}}}
			}
			if r := g.call(t, s.url, s.version, s.send, map[string]any{"message": m}); r.Error == nil || r.Error.Code != -32005 {
				t.Errorf("an unsupported media type: %+v", r.Error)
			}
		})
	}

	// The card: the 1.0 one at the default site, validating fields only; the mixed one at
	// the card 0.3 site, where 0.3 clients that do not ask find url and protocolVersion.
	for _, c := range []struct {
		url   string
		mixed bool
	}{{g.conformance, false}, {g.conformance03, true}} {
		resp, err := g.httpClient.Get(c.url + "/.well-known/agent-card.json")
		if err != nil {
			t.Fatal(err)
		}
		var card map[string]any
		json.NewDecoder(resp.Body).Decode(&card)
		resp.Body.Close()
		_, hasURL := card["url"]
		modes := fmt.Sprint(card["defaultInputModes"])
		if hasURL != c.mixed || !strings.Contains(modes, "application/pdf") || !strings.HasPrefix(modes, "[text/plain") {
			t.Errorf("card at %s: url present %v, input modes %s", c.url, hasURL, modes)
		}
	}
}

// TestCodexExampleCapsule sends a task to the Codex example capsule as `make run` serves
// it: the real Codex CLI (installed by harnesstest; in CI a missing one fails) runs in the
// sandbox and its model is answered by the replay provider from examples/cassettes.
func TestCodexExampleCapsule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	// Parallel: it waits on its own servers and processes more than it computes, and
	// the package's wall time is near its bound (docs/benchmarks.md, the test suite's time).
	t.Parallel()
	g := startGatewayCodex(t, harnesstest.Codex(t))
	tk := decodeTask(t, g.call(t, "/agents/codex/", "", "message/send", map[string]any{"message": msg03("Say hello from the Codex capsule")}))
	if tk.Status.State != "completed" || !strings.HasPrefix(tk.text(), "Hello from the Codex capsule") {
		t.Fatalf("task: %v\n%s", tk, g.logs.String())
	}
}

// TestArtifactsAfterKill: a task's small artifacts (inline in its records) and the URLs
// of its large files (blobs of the task store) still read after the gateway is killed
// with SIGKILL and started again; the URL of a large file reads nothing for a stranger.
func TestArtifactsAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	// Parallel: it waits on its own gateways more than it computes, and the package's
	// wall time is near its bound (docs/benchmarks.md, the test suite's time).
	t.Parallel()
	g := startGateway(t)
	big := randomBytes(t, 200<<10)
	files := fileServer(t, map[string][]byte{"/big.bin": big})
	msg := map[string]any{"messageId": "echo-parts-kill", "role": "ROLE_USER", "parts": []any{
		map[string]any{"text": "small and large"},
		map[string]any{"raw": "c21hbGw=", "filename": "small.txt", "mediaType": "text/plain"},
		map[string]any{"url": files.URL + "/big.bin", "filename": "big.bin", "mediaType": "application/octet-stream"}}}
	r := g.call(t, g.conformance+"/", "1.0", "SendMessage", map[string]any{"message": msg})
	var res struct {
		Task struct {
			ID        string
			Artifacts []struct {
				Parts []struct{ Raw, URL, Filename string }
			}
		}
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || len(res.Task.Artifacts) != 3 || len(res.Task.Artifacts[1].Parts) == 0 || len(res.Task.Artifacts[2].Parts) == 0 {
		t.Fatalf("send: %+v %s", r.Error, r.Result)
	}
	small, large := res.Task.Artifacts[1].Parts[0], res.Task.Artifacts[2].Parts[0]
	if small.Raw != "c21hbGw=" || large.URL == "" {
		t.Fatalf("small %+v, large %+v", small, large)
	}
	g.killAndRestart(t)
	r = g.call(t, g.conformance+"/", "1.0", "GetTask", map[string]any{"id": res.Task.ID})
	if r.Error != nil || !strings.Contains(string(r.Result), `"raw":"c21hbGw=","filename":"small.txt"`) {
		t.Errorf("the small artifact after the restart: %+v %s", r.Error, r.Result)
	}
	if b := fetchFile(t, g, large.URL); !bytes.Equal(b, big) {
		t.Errorf("the large file's URL after the restart read %d bytes, want the %d sent", len(b), len(big))
	}
	resp, err := g.httpClient.Get(strings.Replace(large.URL, "sig=", "sig=0", 1))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a URL with a forged signature: HTTP %d, want 404", resp.StatusCode)
	}
}
