package replay

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRecorder records a conversation from a fake upstream on 127.0.0.1 — a streamed
// Anthropic turn, then a whole one — and replays the cassette it wrote: the client got
// the upstream's answers, the upstream got the key, the cassette holds no key.
func TestRecorder(t *testing.T) {
	const key = "sk-ant-SECRET-0123456789"
	var gotKeys []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKeys = append(gotKeys, r.Header.Get("x-api-key")+"|"+r.Header.Get("Authorization"))
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/base/v1/messages" {
			http.Error(w, "wrong path "+r.URL.Path, http.StatusNotFound)
			return
		}
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n"))
			w.(http.Flusher).Flush()
			// A provider that echoes the key must not get it into the cassette.
			w.Write([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi " + key + "\"}}\n\n"))
			w.Write([]byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"m2","type":"message","role":"assistant","content":[{"type":"text","text":"done"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`))
	}))
	defer upstream.Close()
	dir := filepath.Join(t.TempDir(), "rec")
	rc, err := NewRecorder(upstream.URL+"/base", dir)
	if err != nil {
		t.Fatal(err)
	}
	var recErrs []error
	rc.OnRecord = func(_ string, _ int, err error) { recErrs = append(recErrs, err) }
	front := httptest.NewServer(rc)
	defer front.Close()

	post := func(body string) string {
		req, _ := http.NewRequest("POST", front.URL+"/v1/messages", strings.NewReader(body))
		req.Header.Set("x-api-key", key)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := post(`{"stream":true,"messages":[{"role":"user","content":"record me"}]}`); !strings.Contains(got, "event: message_stop") || !strings.Contains(got, key) {
		t.Fatalf("streamed answer through the recorder: %q", got)
	}
	if got := post(`{"messages":[{"role":"user","content":"record me"},{"role":"assistant","content":"hi"}]}`); !strings.Contains(got, `"done"`) {
		t.Fatalf("whole answer through the recorder: %q", got)
	}
	if len(gotKeys) != 2 || gotKeys[0] != key+"|Bearer "+key {
		t.Errorf("upstream saw keys %q", gotKeys)
	}
	for _, err := range recErrs {
		if err != nil {
			t.Errorf("recording: %v", err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "recorded-anthropic-messages.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), key) || strings.Contains(string(data), "SECRET") || !strings.Contains(string(data), redacted) {
		t.Fatalf("the cassette holds the key, or does not show it redacted:\n%s", data)
	}

	// The recording replays: the stream as a stream, the second turn verbatim.
	lib, err := Load(dir)
	if err != nil {
		t.Fatalf("loading the recording: %v\n%s", err, data)
	}
	srv := httptest.NewServer(lib.Handler())
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(`{"stream":true,"messages":[{"role":"user","content":"record me"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	evs := readSSE(t, resp)
	resp.Body.Close()
	if len(evs) != 3 || evs[0].event != "message_start" || evs[2].event != "message_stop" {
		t.Errorf("replayed stream %+v", evs)
	}
	resp, err = http.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"record me"},{"role":"assistant","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"done"`) {
		t.Errorf("replayed turn 1: %s", b)
	}
}

func TestNewRecorderRefuses(t *testing.T) {
	for _, tt := range []struct{ upstream, dir, code string }{
		{"ftp://x", t.TempDir(), CodeUpstream},
		{"api.anthropic.com", t.TempDir(), CodeUpstream},
		{"https://api.anthropic.com", "", CodeDir},
	} {
		if _, err := NewRecorder(tt.upstream, tt.dir); err == nil || !strings.Contains(err.Error(), tt.code) {
			t.Errorf("NewRecorder(%q, %q) = %v, want %s", tt.upstream, tt.dir, err, tt.code)
		}
	}
}

// TestRecorderTurnOvertakes stages what a harness does under load: the client has turn
// 0's whole stream, sends turn 1, and turn 1 is answered while the recorder is still
// finishing turn 0 (here its upstream holds the connection open after the last event).
// Turn 1 must be written after turn 0, not refused as having arrived before it.
func TestRecorderTurnOvertakes(t *testing.T) {
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n"))
			w.Write([]byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
			w.(http.Flusher).Flush()
			<-release
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"m2","type":"message","role":"assistant","content":[{"type":"text","text":"done"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`))
	}))
	defer upstream.Close()
	defer close(release) // before upstream.Close, which waits for its handlers
	dir := t.TempDir()
	rc, err := NewRecorder(upstream.URL, dir)
	if err != nil {
		t.Fatal(err)
	}
	// ahead is told once turn 1 is saved or waits for turn 0, whichever the recorder does.
	ahead := make(chan struct{}, 2)
	recErrs := make(chan error, 2)
	rc.OnRecord = func(_ string, turn int, err error) {
		if turn == 1 {
			ahead <- struct{}{}
		}
		recErrs <- err
	}
	rc.held = func(turn, earlier int) {
		if earlier >= 0 {
			ahead <- struct{}{}
		}
	}
	front := httptest.NewServer(rc)
	defer front.Close()

	resp0, err := http.Post(front.URL+"/v1/messages", "application/json", strings.NewReader(`{"stream":true,"messages":[{"role":"user","content":"race me"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp0.Body.Close()
	// The client reads turn 0's stream to its last event, as a harness does, not to EOF.
	br := bufio.NewReader(resp0.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("turn 0's stream ended before message_stop: %v", err)
		}
		if strings.HasPrefix(line, "data: {\"type\":\"message_stop\"") {
			break
		}
	}
	done1 := make(chan string)
	go func() {
		resp, err := http.Post(front.URL+"/v1/messages", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"race me"},{"role":"assistant","content":"hi"}]}`))
		if err != nil {
			done1 <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done1 <- string(b)
	}()
	<-ahead
	release <- struct{}{} // turn 0's upstream ends only now
	if got := <-done1; !strings.Contains(got, `"done"`) {
		t.Fatalf("turn 1 through the recorder: %q", got)
	}
	io.Copy(io.Discard, resp0.Body)
	for range 2 {
		if err := <-recErrs; err != nil {
			t.Errorf("recording: %v", err)
		}
	}
	lib, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	convs := lib.byPro[Anthropic]
	if len(convs) != 1 || len(convs[0].Turns) != 2 || !strings.Contains(string(convs[0].Turns[1]), `"done"`) {
		t.Fatalf("recorded %d conversations, want 1 of 2 turns, turn 1 the whole answer: %s", len(convs), convs)
	}
	if evs, _ := parseStream(convs[0].Turns[0]); len(evs) != 2 {
		t.Fatalf("turn 0 was not recorded as its stream: %s", convs[0].Turns[0])
	}
}

// TestRecorderClientLeavesAtTheEnd stages the other side of the same race: the client
// hangs up as soon as it has the last event (Codex exits), before the upstream's end of
// stream reaches the recorder. What the client got is whole and is recorded.
func TestRecorderClientLeavesAtTheEnd(t *testing.T) {
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n"))
		w.Write([]byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer upstream.Close()
	defer close(release)
	dir := t.TempDir()
	rc, err := NewRecorder(upstream.URL, dir)
	if err != nil {
		t.Fatal(err)
	}
	rc.grace = time.Hour // the test ends the upstream itself, once the client is gone
	recorded := make(chan error, 1)
	rc.OnRecord = func(_ string, _ int, err error) { recorded <- err }
	gone := make(chan struct{}, 1)
	rc.held = func(turn, earlier int) {
		if earlier < 0 {
			gone <- struct{}{}
		}
	}
	front := httptest.NewServer(rc)
	defer front.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", front.URL+"/v1/messages", strings.NewReader(`{"stream":true,"messages":[{"role":"user","content":"leave early"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before message_stop: %v", err)
		}
		if strings.HasPrefix(line, "data: {\"type\":\"message_stop\"") {
			break
		}
	}
	cancel() // the client hangs up with the whole answer
	resp.Body.Close()
	// Without the grace the recorder gives up at once; with it, it waits for the upstream.
	select {
	case err := <-recorded:
		t.Fatalf("recorded before the upstream ended: %v", err)
	case <-gone:
	}
	release <- struct{}{}
	if err := <-recorded; err != nil {
		t.Fatalf("recording: %v", err)
	}
	lib, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if convs := lib.byPro[Anthropic]; len(convs) != 1 || len(convs[0].Turns) != 1 {
		t.Fatalf("recorded %d conversations, want 1 of 1 turn: %s", len(convs), convs)
	}
}
