package a2a

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// BenchmarkSendPerBinding compares, in one run, a blocking A2A 1.0 SendMessage answered
// at once (instantExec, memory store) over each binding of one handler served over
// HTTP/1.1 and h2c on 127.0.0.1: JSON-RPC, HTTP+JSON (keep-alive HTTP/1.1 clients) and
// gRPC (one HTTP/2 connection). Every iteration sends one message on each binding in
// turn, so that the machine's other work weighs on the three alike; it reports p50 and
// p99 per binding, in µs. docs/benchmarks.md quotes it.
func BenchmarkSendPerBinding(b *testing.B) {
	h, err := NewHandler(Config{Card: testCard(), Executor: instantExec{}})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	b.Cleanup(func() {
		stopNow(h)
		srv.Close()
	})
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	b.Cleanup(hc.CloseIdleConnections)
	conn, err := grpc.NewClient(strings.TrimPrefix(srv.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	gc := a2apb.NewA2AServiceClient(conn)
	post := func(path string, body []byte, version string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", version)
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: HTTP %d", path, resp.StatusCode)
		}
	}
	var n int
	bindings := []struct {
		name string
		send func()
	}{
		{"jsonrpc", func() {
			post("/", fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"message":{"messageId":"m-%d","role":"ROLE_USER","parts":[{"text":"hello"}]}}}`, n, n), "1.0")
		}},
		{"httpjson", func() {
			post("/message:send", fmt.Appendf(nil, `{"message":{"messageId":"m-%d","role":"ROLE_USER","parts":[{"text":"hello"}]}}`, n), "1.0")
		}},
		{"grpc", func() {
			res, err := gc.SendMessage(context.Background(), &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: fmt.Sprintf("m-%d", n),
				Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hello"}}}}})
			if err != nil || res.GetTask().GetStatus().GetState() != a2apb.TaskState_TASK_STATE_COMPLETED {
				b.Fatalf("gRPC SendMessage: %v, %v", res, err)
			}
		}},
	}
	lat := make([][]time.Duration, len(bindings))
	for b.Loop() {
		for i, bd := range bindings {
			n++
			start := time.Now()
			bd.send()
			lat[i] = append(lat[i], time.Since(start))
		}
	}
	for i, bd := range bindings {
		slices.Sort(lat[i])
		b.ReportMetric(float64(pctOf(lat[i], 0.50))/float64(time.Microsecond), bd.name+"-p50-µs")
		b.ReportMetric(float64(pctOf(lat[i], 0.99))/float64(time.Microsecond), bd.name+"-p99-µs")
	}
	b.ReportMetric(0, "ns/op") // the sum of three bindings' requests means nothing alone
}
