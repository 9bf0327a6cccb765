package a2a

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// partsServer serves a capsule that takes PDFs, JSON and images, at most 1,000 bytes a
// file and 1,500 a message, fetching files by URL from files (a URL it does not hold is
// refused as a network rule would refuse it).
func partsServer(t *testing.T, files map[string]string) (*echoExec, *httptest.Server) {
	t.Helper()
	exec := &echoExec{}
	fetch := func(_ context.Context, url string, limit int64) ([]byte, string, error) {
		body, ok := files[url]
		if !ok {
			return nil, "", errors.New(`network policy: files.example:443 not in capabilities.network.allow`)
		}
		if int64(len(body)) > limit {
			return nil, "", fmt.Errorf("%w: %d bytes", ErrFileTooLarge, len(body))
		}
		return []byte(body), "application/pdf", nil
	}
	_, srv := newServer(t, Config{Executor: exec, Inputs: Inputs{
		Modes: []string{"application/pdf", "application/json", "image/*"}, MaxFileBytes: 1000, MaxMessageBytes: 1500, Fetch: fetch}})
	return exec, srv
}

// TestInboundParts sends files (inline and by URL) and data in both versions and checks
// what the executor gets, what the task's history shows, and each refusal: a media type
// the capsule does not take, a file or message over its limit, a URL it may not fetch.
func TestInboundParts(t *testing.T) {
	pdf := strings.Repeat("%PDF", 100) // 400 bytes
	b64 := base64.StdEncoding.EncodeToString([]byte(pdf))
	big := base64.StdEncoding.EncodeToString(make([]byte, 1001))
	files := map[string]string{"https://files.example/a.pdf": pdf, "https://files.example/big.pdf": strings.Repeat("x", 1001),
		"https://files.example/c.pdf": strings.Repeat("y", 900)}
	for _, tc := range []struct {
		name    string
		version string
		parts   string // the message's parts, JSON
		code    int    // the refusal's code; 0: accepted
		detail  string // a fragment of the refusal, or of nothing
		want    []Part // what the executor gets
	}{
		{"0.3 text, file, data", "0.3",
			`[{"kind":"text","text":"summarise"},{"kind":"file","file":{"bytes":"` + b64 + `","name":"a.pdf","mimeType":"application/pdf"}},{"kind":"data","data":{"n":1}}]`,
			0, "", []Part{{Kind: KindText, Text: "summarise"}, {Kind: KindFile, Name: "a.pdf", MediaType: "application/pdf", Bytes: []byte(pdf)},
				{Kind: KindData, MediaType: "application/json", Data: json.RawMessage(`{"n":1}`)}}},
		{"1.0 raw, url, data", "1.0",
			`[{"raw":"` + b64 + `","filename":"b.png"},{"url":"https://files.example/a.pdf"},{"data":[1,2]}]`,
			0, "", []Part{{Kind: KindFile, Name: "b.png", MediaType: "image/png", Bytes: []byte(pdf)},
				{Kind: KindFile, MediaType: "application/pdf", Bytes: []byte(pdf), URL: "https://files.example/a.pdf"},
				{Kind: KindData, MediaType: "application/json", Data: json.RawMessage(`[1,2]`)}}},
		{"0.3 file by uri", "0.3", `[{"kind":"file","file":{"uri":"https://files.example/a.pdf","name":"a.pdf"}}]`,
			0, "", []Part{{Kind: KindFile, Name: "a.pdf", MediaType: "application/pdf", Bytes: []byte(pdf), URL: "https://files.example/a.pdf"}}},
		{"type not taken", "1.0", `[{"raw":"aGk=","mediaType":"text/html"}]`, -32005, "is a file of type text/html; this agent reads text/plain, application/pdf, application/json, image/*", nil},
		{"file over its limit", "0.3", `[{"kind":"file","file":{"bytes":"` + big + `","mimeType":"image/png"}}]`, -32602, "1001 bytes, over this agent's limit of 1000 bytes per file (a2a.max_file_bytes)", nil},
		{"message over its limit", "1.0", `[{"raw":"` + b64 + `","mediaType":"image/png"},{"raw":"` + b64 + `","mediaType":"image/png"},{"raw":"` + b64 + `","mediaType":"image/png"},{"raw":"` + b64 + `","mediaType":"image/png"}]`,
			-32602, "message.parts[3] brings the message's files and data to 1600 bytes, over this agent's limit of 1500 bytes per message (a2a.max_message_bytes)", nil},
		{"fetched file over its limit", "1.0", `[{"url":"https://files.example/big.pdf"}]`, -32602, "over this agent's limit of 1000 bytes per file (a2a.max_file_bytes)", nil},
		{"fetched file over the message limit", "1.0", `[{"raw":"` + b64 + `","mediaType":"image/png"},{"raw":"` + b64 + `","mediaType":"image/png"},{"url":"https://files.example/c.pdf"}]`, -32602, "over this agent's limit of 1500 bytes per message", nil},
		{"url not allowed", "1.0", `[{"url":"https://files.example/nope.pdf"}]`, -32602, "message.parts[0]: the file at https://files.example/nope.pdf cannot be fetched: network policy: files.example:443 not in capabilities.network.allow", nil},
		{"text of another type", "1.0", `[{"text":"x","mediaType":"text/html"}]`, -32005, `mediaType "text/html"`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exec, srv := partsServer(t, files)
			msg := map[string]any{"messageId": "m-" + tc.name, "role": "ROLE_USER", "parts": json.RawMessage(tc.parts)}
			method := "SendMessage"
			if tc.version == "0.3" {
				msg["role"], msg["kind"], method = "user", "message", "message/send"
			}
			r := call(t, srv, tc.version, method, map[string]any{"message": msg})
			if tc.code != 0 {
				fails(t, r, tc.code)
				if !strings.Contains(r.Error.detail(), tc.detail) {
					t.Fatalf("detail %q does not hold %q", r.Error.detail(), tc.detail)
				}
				if n := len(exec.recorded()); n != 0 {
					t.Fatalf("a refused message reached the executor %d times", n)
				}
				return
			}
			ok(t, r)
			jobs := exec.recorded()
			if len(jobs) != 1 {
				t.Fatalf("executor ran %d jobs", len(jobs))
			}
			got, _ := json.Marshal(jobs[0].Parts)
			want, _ := json.Marshal(tc.want)
			if !bytes.Equal(got, want) || jobs[0].MessageID != "m-"+tc.name {
				t.Fatalf("executor got parts %s (message %q), want %s", got, jobs[0].MessageID, want)
			}
		})
	}
}

// TestInboundPartsInHistory reads a task's first message back with its file and data
// parts, in the shapes of each version and binding.
func TestInboundPartsInHistory(t *testing.T) {
	_, srv := partsServer(t, nil)
	r := call(t, srv, "1.0", "SendMessage", map[string]any{"message": map[string]any{"messageId": "m1", "role": "ROLE_USER",
		"parts": []any{map[string]any{"text": "look"}, map[string]any{"raw": "aGk=", "filename": "a.pdf", "mediaType": "application/pdf"}, map[string]any{"data": map[string]any{"k": "v"}}}}})
	id := decode[tWrap](t, ok(t, r)).Task.ID
	for _, tc := range []struct{ version, method, want string }{
		{"0.3", "tasks/get", `[{"kind":"text","text":"look"},{"kind":"file","file":{"bytes":"aGk=","name":"a.pdf","mimeType":"application/pdf"}},{"kind":"data","data":{"k":"v"}}]`},
		{"1.0", "GetTask", `[{"text":"look"},{"raw":"aGk=","filename":"a.pdf","mediaType":"application/pdf"},{"data":{"k":"v"}}]`},
	} {
		res := ok(t, call(t, srv, tc.version, tc.method, map[string]any{"id": id}))
		var task struct {
			History []struct{ Parts json.RawMessage } `json:"history"`
		}
		if err := json.Unmarshal(res, &task); err != nil || len(task.History) == 0 {
			t.Fatalf("%s: %v: %s", tc.method, err, res)
		}
		if got := string(task.History[0].Parts); got != tc.want {
			t.Errorf("%s history parts\n got %s\nwant %s", tc.method, got, tc.want)
		}
	}
	req, err := http.NewRequest(http.MethodGet, srv.URL+prefix+"/v1/tasks/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := roundTrip(t, srv, req, map[string]string{"A2A-Version": "0.3"})
	want := `"content":[{"text":"look"},{"file":{"fileWithBytes":"aGk=","mimeType":"application/pdf","name":"a.pdf"}},{"data":{"data":{"k":"v"}}}]`
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		t.Errorf("0.3 HTTP+JSON task: HTTP %d %s\nwant it to hold %s", resp.StatusCode, body, want)
	}
}
