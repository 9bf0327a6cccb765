package a2a

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bigFileExec answers with a file artifact of 200 KiB, and records the parts it was given.
type bigFileExec struct{ got chan []Part }

func (e bigFileExec) Execute(_ context.Context, job *Job) Outcome {
	if e.got != nil {
		e.got <- job.Parts
	}
	return Outcome{State: "completed", Text: "here", Artifacts: []Artifact{
		{Name: "big.bin", Parts: []Part{{Kind: KindFile, Name: "big.bin", MediaType: "application/octet-stream", Bytes: bigFile()}}}}}
}

func bigFile() []byte { return bytes.Repeat([]byte("0123456789abcdef"), 200<<10/16) }

// fetch GETs u with the bearer token tok ("" for none).
func fetch(t *testing.T, u, tok string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestLargeFiles: a file over InlineFileBytes is kept as a blob of its task, both ways. An
// artifact's file is handed out as a gateway URL served to the task's owner only, while its
// signature holds and has not expired, and still after a restart of the handler and its
// store; a message's large file reaches the executor whole and shows in the history as a
// URL; when the task is removed, so is the file.
func TestLargeFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	got := make(chan []Part, 1)
	tokens := []Token{{Name: "team-a", Secret: "tok-a"}, {Name: "team-b", Secret: "tok-b"}}
	g := openGenWith(t, path, Config{Executor: bigFileExec{got: got}, Tokens: tokens, Inputs: Inputs{Modes: []string{"image/*"}}})
	in := bytes.Repeat([]byte{7}, 100<<10)
	r := callWith(t, g.srv, "1.0", "SendMessage", map[string]any{"message": map[string]any{"messageId": "m1", "role": "ROLE_USER",
		"parts": []any{map[string]any{"text": "take this"}, map[string]any{"raw": base64.StdEncoding.EncodeToString(in), "filename": "in.bin", "mediaType": "image/png"}}}},
		map[string]string{"Authorization": "Bearer tok-a"})
	var res struct{ Task tObjFiles }
	if err := json.Unmarshal(ok(t, r), &res); err != nil {
		t.Fatal(err)
	}
	parts := recv(t, got)
	if len(parts) != 2 || !bytes.Equal(parts[1].Bytes, in) || parts[1].Blob != "" {
		t.Fatalf("the executor got %d parts, the file %d bytes (blob %q)", len(parts), len(parts[1].Bytes), parts[1].Blob)
	}
	out, hist := res.Task.url(t, 1, 0), res.Task.historyURL(t, 1)
	for _, tc := range []struct {
		name, url, token string
		status           int
		body             []byte
	}{
		{"the owner reads the artifact", out, "tok-a", 200, bigFile()},
		{"the owner reads the message's file", hist, "tok-a", 200, in},
		{"another principal", out, "tok-b", 404, nil},
		{"no token", out, "", 401, nil},
		{"a forged signature", strings.Replace(out, "sig=", "sig=x", 1), "tok-a", 404, nil},
		{"another expiry, same signature", withQuery(t, out, "expires", "99999999999"), "tok-a", 404, nil},
		{"expired", expired(t, g, res.Task.ID, out), "tok-a", 410, nil},
	} {
		status, body := fetch(t, tc.url, tc.token)
		if status != tc.status || tc.body != nil && !bytes.Equal(body, tc.body) {
			t.Errorf("%s: HTTP %d, %d bytes; want %d", tc.name, status, len(body), tc.status)
		}
	}

	// A restart: the same URL still reads the file.
	g.stop()
	g = openGenWith(t, path, Config{Executor: bigFileExec{}, Tokens: tokens})
	out = strings.Replace(out, strings.Split(out, prefix)[0], g.srv.URL, 1) // the new listener's port
	if status, body := fetch(t, out, "tok-a"); status != 200 || !bytes.Equal(body, bigFile()) {
		t.Errorf("after a restart: HTTP %d, %d bytes", status, len(body))
	}
	// Removed with its task: the store's sweep evicts it (MaxTasks 1, a newer task beside it).
	g.stop()
	g = openGenWith(t, path, Config{Executor: bigFileExec{}, Tokens: tokens, MaxTasks: 1})
	callWith(t, g.srv, "1.0", "SendMessage", map[string]any{"message": msg10("newer")}, map[string]string{"Authorization": "Bearer tok-a"})
	g.stop()
	g = openGenWith(t, path, Config{Executor: bigFileExec{}, Tokens: tokens, MaxTasks: 1})
	out = strings.Replace(out, strings.Split(out, prefix)[0], g.srv.URL, 1)
	if status, _ := fetch(t, out, "tok-a"); status != 404 {
		t.Errorf("after its task was removed: HTTP %d", status)
	}
	if _, ok, _ := g.db.Blob(testCard().Name, res.Task.ID, strings.Split(strings.Split(out, "/files/"+res.Task.ID+"/")[1], "?")[0]); ok {
		t.Error("the store still holds the removed task's blob")
	}
}

// tObjFiles is a 1.0 task whose parts may be files by URL.
type tObjFiles struct {
	ID        string
	Artifacts []struct {
		Parts []struct{ URL, Raw, Text string }
	}
	History []struct {
		Parts []struct{ URL, Raw, Text string }
	}
}

func (o tObjFiles) url(t *testing.T, art, part int) string {
	t.Helper()
	if len(o.Artifacts) <= art || len(o.Artifacts[art].Parts) <= part || o.Artifacts[art].Parts[part].URL == "" || o.Artifacts[art].Parts[part].Raw != "" {
		t.Fatalf("artifact %d part %d is not a file by URL: %+v", art, part, o.Artifacts)
	}
	return o.Artifacts[art].Parts[part].URL
}

func (o tObjFiles) historyURL(t *testing.T, part int) string {
	t.Helper()
	if len(o.History) == 0 || len(o.History[0].Parts) <= part || o.History[0].Parts[part].URL == "" {
		t.Fatalf("the message's part %d is not a file by URL: %+v", part, o.History)
	}
	return o.History[0].Parts[part].URL
}

func withQuery(t *testing.T, u, k, v string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Query()
	q.Set(k, v)
	p.RawQuery = q.Encode()
	return p.String()
}

// expired is u re-signed, with the blob's own key, to have expired a minute ago.
func expired(t *testing.T, g *durableGen, taskID, u string) string {
	t.Helper()
	blob := strings.Split(strings.Split(u, "/files/"+taskID+"/")[1], "?")[0]
	tk := g.h.lookup(taskID, caller{principal: "team-a"})
	if tk == nil {
		t.Fatal("task not found")
	}
	p, ok := tk.blobPart(blob)
	if !ok {
		t.Fatal("blob part not found")
	}
	exp := time.Now().Add(-time.Minute).Unix()
	return withQuery(t, withQuery(t, u, "expires", strconv.FormatInt(exp, 10)), "sig", fileSignature(p.BlobKey, taskID, blob, exp))
}

// TestLargeFileByURL: a file the client named by URL, fetched and over InlineFileBytes, is
// kept as a blob for the executor, and the task's history shows it as the client sent it:
// its URL, not the gateway's.
func TestLargeFileByURL(t *testing.T) {
	got := make(chan []Part, 1)
	in := bytes.Repeat([]byte{9}, 100<<10)
	fetch := func(_ context.Context, u string, limit int64) ([]byte, string, error) { return in, "image/png", nil }
	g := openGenWith(t, filepath.Join(t.TempDir(), "tasks.db"), Config{Executor: bigFileExec{got: got},
		Inputs: Inputs{Modes: []string{"image/*"}, Fetch: fetch}})
	const src = "https://files.example.com/in.png"
	r := call(t, g.srv, "1.0", "SendMessage", map[string]any{"message": map[string]any{"messageId": "m1", "role": "ROLE_USER",
		"parts": []any{map[string]any{"text": "take this"}, map[string]any{"url": src, "mediaType": "image/png"}}}})
	var res struct{ Task tObjFiles }
	if err := json.Unmarshal(ok(t, r), &res); err != nil {
		t.Fatal(err)
	}
	if parts := recv(t, got); len(parts) != 2 || !bytes.Equal(parts[1].Bytes, in) {
		t.Fatalf("the executor got %d parts", len(parts))
	}
	if u := res.Task.historyURL(t, 1); u != src {
		t.Errorf("the history shows the file at %s, want the client's %s", u, src)
	}
}
