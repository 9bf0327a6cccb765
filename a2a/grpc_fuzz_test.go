package a2a

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/protobuf/proto"
)

// grpcMethods are A2AService's methods, by the fuzz target's index.
var grpcMethods = []string{"SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask",
	"CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
	"DeleteTaskPushNotificationConfig", "GetExtendedAgentCard", "NoSuchMethod"}

// grpcFrame is msg as one gRPC message: an uncompressed flag, its length, its bytes.
func grpcFrame(msg []byte) []byte {
	out := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(out[1:], uint32(len(msg)))
	return append(out, msg...)
}

// FuzzGRPC decodes arbitrary gRPC messages — any method, any bytes, whole frames or
// not — through the handler, as the gRPC binding's requests arrive: it must answer each
// with a gRPC status (in the trailers, or a header for an answer before any message),
// never panic, never hang.
func FuzzGRPC(f *testing.F) {
	seed := func(method int, m proto.Message) {
		b, _ := proto.Marshal(m)
		f.Add(uint8(method), grpcFrame(b))
	}
	text := &a2apb.Part{Content: &a2apb.Part_Text{Text: "hi"}}
	raw := &a2apb.Part{Content: &a2apb.Part_Raw{Raw: []byte("report")}, Filename: "r.txt", MediaType: "text/plain"}
	msg := &a2apb.Message{MessageId: "m", Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{text, raw}}
	seed(0, &a2apb.SendMessageRequest{Message: msg})
	seed(1, &a2apb.SendMessageRequest{Message: msg})
	seed(2, &a2apb.GetTaskRequest{Id: "tsk_1"})
	seed(3, &a2apb.ListTasksRequest{ContextId: "c"})
	seed(4, &a2apb.CancelTaskRequest{Id: "tsk_1"})
	seed(5, &a2apb.SubscribeToTaskRequest{Id: "tsk_1"})
	seed(6, &a2apb.TaskPushNotificationConfig{TaskId: "tsk_1", Url: "https://example.com/hook"})
	seed(10, &a2apb.GetExtendedAgentCardRequest{})
	f.Add(uint8(0), []byte{0, 0, 0, 0, 9, 1, 2})         // a frame shorter than it says
	f.Add(uint8(0), []byte{1, 0, 0, 0, 1, 0})            // compressed, without a compressor
	f.Add(uint8(11), grpcFrame([]byte{0x0a, 0x01, 'x'})) // a method the service has not
	h, err := NewHandler(Config{Card: testCard(), Executor: &echoExec{}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		stopNow(h)
	})
	f.Fuzz(func(t *testing.T, method uint8, body []byte) {
		name := grpcMethods[int(method)%len(grpcMethods)]
		u := &url.URL{Scheme: "http", Host: "127.0.0.1", Path: "/lf.a2a.v1.A2AService/" + name}
		r := &http.Request{Method: http.MethodPost, URL: u, Host: u.Host, RequestURI: u.Path, Header: http.Header{},
			Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Proto: "HTTP/2.0", ProtoMajor: 2}
		r.Header.Set("Content-Type", "application/grpc")
		r.Header.Set("TE", "trailers")
		ctx, cancel := context.WithTimeout(context.Background(), watchdog)
		defer cancel()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r.WithContext(ctx))
		res := w.Result()
		st := res.Trailer.Get("Grpc-Status")
		if st == "" {
			st = res.Header.Get("Grpc-Status")
		}
		if code, err := strconv.Atoi(st); err != nil || code < 0 || code > 16 {
			t.Fatalf("%s: HTTP %d, no gRPC status (%q); headers %v, trailers %v", name, res.StatusCode, st, res.Header, res.Trailer)
		}
	})
}
