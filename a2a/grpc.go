package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// The gRPC binding of A2A 1.0 (docs/reference/a2a.md "gRPC"): a2a.proto's A2AService,
// served from the handler itself to HTTP/2 requests of content type application/grpc.
// It has no operation of its own: each RPC is the JSON-RPC 1.0 call of the same name,
// its request the proto's JSON mapping (which A2A 1.0's JSON-RPC params are), run
// through the one call layer — authentication, principals, owners, limits and parts as
// on the other bindings — and its answer read back into the proto's messages.

// grpcServicePath is the path every A2AService call is made on, before its method.
const grpcServicePath = "/lf.a2a.v1.A2AService/"

// grpcRequestKey carries the HTTP request a gRPC call came in on, for the call layer.
type grpcRequestKey struct{}

// maxGRPCMessage bounds a received gRPC message, as MaxBody bounds a JSON body.
const maxGRPCMessage = 64 << 20

// isGRPC reports whether r is a gRPC call: HTTP/2, content type application/grpc[+proto].
func isGRPC(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return r.ProtoMajor == 2 && (ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+") || strings.HasPrefix(ct, "application/grpc;"))
}

// newGRPCServer is the gRPC server of h's A2AService.
func newGRPCServer(h *Handler) *grpc.Server {
	s := grpc.NewServer(grpc.MaxRecvMsgSize(maxGRPCMessage))
	a2apb.RegisterA2AServiceServer(s, &grpcService{h: h})
	return s
}

// serveGRPC hands r to the gRPC server, the request kept in its context for the calls.
func (h *Handler) serveGRPC(w http.ResponseWriter, r *http.Request) {
	if _, ok := w.(http.Flusher); !ok {
		// A host program's wrapper (Caddy's) flushes through Unwrap only; the gRPC server
		// asks for http.Flusher itself.
		w = flushWriter{w, http.NewResponseController(w)}
	}
	h.grpc.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), grpcRequestKey{}, r)))
}

// flushWriter gives a ResponseWriter whose flushing is reached through Unwrap the
// http.Flusher method.
type flushWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (f flushWriter) Flush() { _ = f.rc.Flush() }

// Unwrap lets http.ResponseController reach what f wraps.
func (f flushWriter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// grpcService is A2AService over the call layer.
type grpcService struct {
	a2apb.UnimplementedA2AServiceServer
	h *Handler
}

var (
	grpcIn  = protojson.MarshalOptions{UseProtoNames: false, EmitUnpopulated: false}
	grpcOut = protojson.UnmarshalOptions{DiscardUnknown: true}
)

// call runs method with req's JSON as params and reads its result into out.
func (g *grpcService) call(ctx context.Context, method string, req, out proto.Message) error {
	rec := &grpcRecorder{header: http.Header{}}
	if err := g.run(ctx, method, req, rec); err != nil {
		return err
	}
	var resp rpcResponseIn
	if err := json.Unmarshal(rec.body.Bytes(), &resp); err != nil {
		return grpcstatus.Errorf(codes.Internal, "a2a: the call layer's answer to %s is not JSON-RPC: %v", method, err)
	}
	if resp.Error != nil {
		return grpcError(resp.Error)
	}
	if err := grpcOut.Unmarshal(resp.Result, out); err != nil {
		return grpcstatus.Errorf(codes.Internal, "a2a: the answer to %s does not read as its proto message: %v", method, err)
	}
	return nil
}

// stream runs the streaming method with req's JSON as params and sends each event.
func (g *grpcService) stream(method string, req proto.Message, ss grpc.ServerStreamingServer[a2apb.StreamResponse]) error {
	var sendErr error
	var failed error
	rec := &grpcRecorder{header: http.Header{}, event: func(data []byte) bool {
		var resp rpcResponseIn
		if err := json.Unmarshal(data, &resp); err != nil {
			failed = grpcstatus.Errorf(codes.Internal, "a2a: a stream event of %s is not JSON-RPC: %v", method, err)
			return false
		}
		if resp.Error != nil {
			failed = grpcError(resp.Error)
			return false
		}
		var ev a2apb.StreamResponse
		if err := grpcOut.Unmarshal(resp.Result, &ev); err != nil {
			failed = grpcstatus.Errorf(codes.Internal, "a2a: a stream event of %s does not read as StreamResponse: %v", method, err)
			return false
		}
		if sendErr = ss.Send(&ev); sendErr != nil {
			return false
		}
		return true
	}}
	if err := g.run(ss.Context(), method, req, rec); err != nil {
		return err
	}
	rec.finish()
	if failed != nil {
		return failed
	}
	if rec.plain.Len() > 0 { // an answer that was no stream: an error before it started
		var resp rpcResponseIn
		if json.Unmarshal(rec.plain.Bytes(), &resp) == nil && resp.Error != nil {
			return grpcError(resp.Error)
		}
	}
	return sendErr
}

// run serves method as a JSON-RPC 1.0 request made of the gRPC call's HTTP request and
// req's JSON, writing the answer to rec.
func (g *grpcService) run(ctx context.Context, method string, req proto.Message, rec *grpcRecorder) error {
	orig, _ := ctx.Value(grpcRequestKey{}).(*http.Request)
	if orig == nil {
		return grpcstatus.Error(codes.Internal, "a2a: a gRPC call without its request")
	}
	if v := orig.Header.Get("A2A-Version"); v != "" {
		// gRPC is A2A 1.0's binding only: another version asked for is refused, as the
		// other bindings refuse one they do not speak.
		if d, ok := parseVersion(v); !ok || d != v10 {
			return grpcError(&rpcErrorIn{Code: codeVersion, Message: fmt.Sprintf("Version not supported: A2A-Version %q: this agent's gRPC binding speaks 1.0", v)})
		}
	}
	params, err := grpcIn.Marshal(req)
	if err != nil {
		return grpcstatus.Errorf(codes.InvalidArgument, "a2a: the %s request cannot be read: %v", method, err)
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": json.RawMessage(params)})
	r := orig.Clone(ctx)
	r.Method = http.MethodPost
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("A2A-Version", "1.0")
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	if _, peer := peerOf(r); peer && !g.h.acceptsPeers(r) {
		return grpcstatus.Error(codes.PermissionDenied, "peer_not_accepted: this capsule does not accept tasks from peers")
	}
	cfg, _ := g.h.configFor(r)
	who, f := identify(r, cfg)
	if f != nil {
		g.h.refusedAuth(r, f)
		e := f.rpc("this agent needs a bearer token (authorization: Bearer <token>), see the agent card's securitySchemes").in(v10)
		b, _ := json.Marshal(e.Data)
		return grpcError(&rpcErrorIn{Code: e.Code, Message: e.Message, Data: b})
	}
	who, _ = asPeer(r, who)
	if int64(len(body)) > cfg.MaxBody {
		return grpcstatus.Errorf(codes.ResourceExhausted, "request over %d bytes", cfg.MaxBody)
	}
	g.h.serveRPC(rec, r, who, body)
	return nil
}

// rpcResponseIn is a JSON-RPC response as the gRPC binding reads it back.
type rpcResponseIn struct {
	Result json.RawMessage `json:"result"`
	Error  *rpcErrorIn     `json:"error"`
}

// rpcErrorIn is a JSON-RPC error object as the gRPC binding reads it back.
type rpcErrorIn struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// grpcCodes map A2A's errors to gRPC status codes as A2A 1.0 specifies.
var grpcCodes = map[int]codes.Code{
	codeParse:            codes.InvalidArgument,
	codeInvalidRequest:   codes.InvalidArgument,
	codeMethodNotFound:   codes.Unimplemented,
	codeInvalidParams:    codes.InvalidArgument,
	codeInternal:         codes.Internal,
	codeTaskNotFound:     codes.NotFound,
	codeNotCancelable:    codes.FailedPrecondition,
	codePushNotSupported: codes.Unimplemented,
	codeUnsupported:      codes.Unimplemented,
	codeContentType:      codes.InvalidArgument,
	codeNoExtendedCard:   codes.FailedPrecondition,
	codeVersion:          codes.Unimplemented,
	codeUnauthenticated:  codes.Unauthenticated,
	codePermissionDenied: codes.PermissionDenied,
	codeRateLimited:      codes.ResourceExhausted,
	codeTokenBudget:      codes.ResourceExhausted,
	codeOverloaded:       codes.Unavailable,
}

// grpcError is e as a gRPC status: its code mapped, its message, and a
// google.rpc.ErrorInfo with its reason, the A2A domain and the JSON-RPC error's metadata.
func grpcError(e *rpcErrorIn) error {
	c, ok := grpcCodes[e.Code]
	if !ok {
		c = codes.Unknown
	}
	info := &errdetails.ErrorInfo{Reason: reasons[e.Code], Domain: "a2a-protocol.org", Metadata: map[string]string{}}
	var details []struct {
		Type     string            `json:"@type"`
		Metadata map[string]string `json:"metadata"`
	}
	if json.Unmarshal(e.Data, &details) == nil {
		for _, d := range details {
			for k, v := range d.Metadata {
				info.Metadata[k] = v
			}
		}
	}
	if info.Reason == "" {
		info.Reason = fmt.Sprintf("A2A_ERROR_%d", -e.Code)
	}
	st, err := grpcstatus.New(c, e.Message).WithDetails(info)
	if err != nil {
		return grpcstatus.Error(c, e.Message)
	}
	return st.Err()
}

// grpcRecorder is the ResponseWriter the call layer answers a gRPC call into: a plain
// answer is kept whole; a stream's events (SSE) are handed to event as they are flushed.
type grpcRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer // a plain answer
	plain  bytes.Buffer // a plain answer to a streaming call (an error before the stream)
	event  func(data []byte) bool
	sse    bool
	buf    []byte
	mu     sync.Mutex
	done   bool
}

func (w *grpcRecorder) Header() http.Header { return w.header }

func (w *grpcRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.sse = strings.HasPrefix(w.header.Get("Content-Type"), "text/event-stream")
	}
}

func (w *grpcRecorder) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.event == nil:
		w.body.Write(b)
	case !w.sse:
		w.plain.Write(b)
	case w.done:
		return 0, io.ErrClosedPipe // the client went away, or an event failed: end the stream
	default:
		w.buf = append(w.buf, b...)
		w.drainLocked()
		if w.done {
			return len(b), io.ErrClosedPipe
		}
	}
	return len(b), nil
}

// Flush is what startSSE asks of a stream's writer; events are handed on as written.
func (w *grpcRecorder) Flush() {}

// drainLocked hands on every whole event in buf.
func (w *grpcRecorder) drainLocked() {
	for !w.done {
		i := bytes.Index(w.buf, []byte("\n\n"))
		if i < 0 {
			return
		}
		ev := w.buf[:i]
		w.buf = w.buf[i+2:]
		for line := range bytes.SplitSeq(ev, []byte("\n")) {
			if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				if !w.event(data) {
					w.done = true
				}
			}
		}
	}
}

// finish hands on what the stream left whole.
func (w *grpcRecorder) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sse {
		w.buf = append(w.buf, '\n', '\n')
		w.drainLocked()
	}
}

// unary runs the unary RPC method and returns out, read from its answer.
func unary[Out proto.Message](g *grpcService, ctx context.Context, method string, req proto.Message, out Out) (Out, error) {
	return out, g.call(ctx, method, req, out)
}

func (g *grpcService) SendMessage(ctx context.Context, req *a2apb.SendMessageRequest) (*a2apb.SendMessageResponse, error) {
	return unary(g, ctx, "SendMessage", req, &a2apb.SendMessageResponse{})
}

func (g *grpcService) SendStreamingMessage(req *a2apb.SendMessageRequest, ss grpc.ServerStreamingServer[a2apb.StreamResponse]) error {
	return g.stream("SendStreamingMessage", req, ss)
}

func (g *grpcService) GetTask(ctx context.Context, req *a2apb.GetTaskRequest) (*a2apb.Task, error) {
	return unary(g, ctx, "GetTask", req, &a2apb.Task{})
}

func (g *grpcService) ListTasks(ctx context.Context, req *a2apb.ListTasksRequest) (*a2apb.ListTasksResponse, error) {
	if req.PageSize != nil && *req.PageSize == 0 {
		// A proto3 client sets 0 for "unset" as often as it leaves the field out (the Go
		// SDK does): the default page, as JSON-RPC's omitted pageSize.
		req.PageSize = nil
	}
	return unary(g, ctx, "ListTasks", req, &a2apb.ListTasksResponse{})
}

func (g *grpcService) CancelTask(ctx context.Context, req *a2apb.CancelTaskRequest) (*a2apb.Task, error) {
	return unary(g, ctx, "CancelTask", req, &a2apb.Task{})
}

func (g *grpcService) SubscribeToTask(req *a2apb.SubscribeToTaskRequest, ss grpc.ServerStreamingServer[a2apb.StreamResponse]) error {
	return g.stream("SubscribeToTask", req, ss)
}

func (g *grpcService) CreateTaskPushNotificationConfig(ctx context.Context, req *a2apb.TaskPushNotificationConfig) (*a2apb.TaskPushNotificationConfig, error) {
	return unary(g, ctx, "CreateTaskPushNotificationConfig", req, &a2apb.TaskPushNotificationConfig{})
}

func (g *grpcService) GetTaskPushNotificationConfig(ctx context.Context, req *a2apb.GetTaskPushNotificationConfigRequest) (*a2apb.TaskPushNotificationConfig, error) {
	return unary(g, ctx, "GetTaskPushNotificationConfig", req, &a2apb.TaskPushNotificationConfig{})
}

func (g *grpcService) ListTaskPushNotificationConfigs(ctx context.Context, req *a2apb.ListTaskPushNotificationConfigsRequest) (*a2apb.ListTaskPushNotificationConfigsResponse, error) {
	return unary(g, ctx, "ListTaskPushNotificationConfigs", req, &a2apb.ListTaskPushNotificationConfigsResponse{})
}

func (g *grpcService) DeleteTaskPushNotificationConfig(ctx context.Context, req *a2apb.DeleteTaskPushNotificationConfigRequest) (*emptypb.Empty, error) {
	return unary(g, ctx, "DeleteTaskPushNotificationConfig", req, &emptypb.Empty{})
}

func (g *grpcService) GetExtendedAgentCard(ctx context.Context, req *a2apb.GetExtendedAgentCardRequest) (*a2apb.AgentCard, error) {
	return unary(g, ctx, "GetExtendedAgentCard", req, &a2apb.AgentCard{})
}
