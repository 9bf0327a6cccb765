package runtime

import (
	"maps"
	"slices"
	"testing"

	"github.com/capsulegate/capsulegate/manifest"
)

// TestReceiptSink: the receipt sink completes each task's receipt from that task's events
// alone — tokens from turns and driver-written summaries, tool calls by kind (the model's
// artifact manager calls among them, a guest's not), denials — and sends it on as a
// task_receipt event right after task_end.
func TestReceiptSink(t *testing.T) {
	staged := &Staged{Manifest: &manifest.Manifest{Name: "cap", Inference: &manifest.Inference{Model: "m-1"}}}
	type ev struct {
		typ  string
		data any
	}
	tests := []struct {
		name   string
		events []ev
		tokens []ModelTokens
		tools  map[string]int
		denied int
	}{
		{"a script task: nothing but its end", nil, []ModelTokens{}, map[string]int{}, 0},
		{"an agent task", []ev{
			{EventInference, Inference{InputTokens: 10, OutputTokens: 5}},
			{EventToolCall, ToolCall{Kind: KindWasm}},
			{EventToolCall, ToolCall{Kind: KindShell}},
			{EventToolCall, ToolCall{Kind: KindWasm, Status: StatusDenied}},
			{EventArtifact, ArtifactCall{Op: "pull", From: "model"}},
			{EventArtifact, ArtifactCall{Op: "list", From: "guest"}},
			{EventNetworkDenied, NetworkDenied{Host: "x.test"}},
			{EventCompaction, Compaction{Summariser: SummariserDriver, SummaryInput: 100, SummaryOutput: 20}},
			{EventCompaction, Compaction{Summariser: SummariserHook, SummaryInput: 7, SummaryOutput: 7}},
			{EventInference, Inference{InputTokens: 30, OutputTokens: 6}},
		}, []ModelTokens{{Model: "m-1", Input: 140, Output: 31}}, map[string]int{KindWasm: 2, KindShell: 1, KindManager: 1}, 1},
		{"a turn that reported no usage still names the model", []ev{{EventInference, Inference{}}},
			[]ModelTokens{{Model: "m-1"}}, map[string]int{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var receipts []Receipt
			record := sinkFunc(func(e *Event) error {
				if rc, ok := e.Data.(Receipt); ok && e.Type == EventReceipt {
					receipts = append(receipts, rc)
				}
				return nil
			})
			s := NewStream("ses_1", newReceiptSink(staged), record)
			// An earlier task's events are not this one's.
			s.Emit(EventTaskStart, "", TaskStart{TaskID: "t0"}, nil)
			s.Emit(EventInference, "", Inference{InputTokens: 999, OutputTokens: 999}, nil)
			s.Emit(EventTaskEnd, "", TaskEnd{TaskID: "t0", receipt: &Receipt{}}, nil)
			start, _ := s.Emit(EventTaskStart, "", TaskStart{TaskID: "t1"}, nil)
			for _, e := range tt.events {
				s.Emit(e.typ, start, e.data, nil)
			}
			rc := &Receipt{WallSeconds: 2, GuestSeconds: 1}
			s.Emit(EventTaskEnd, start, TaskEnd{TaskID: "t1", receipt: rc}, nil)
			if len(receipts) != 2 {
				t.Fatalf("%d task_receipt events, want one per task", len(receipts))
			}
			got := receipts[1]
			if !slices.Equal(got.Tokens, tt.tokens) || !maps.Equal(got.ToolCalls, tt.tools) || got.NetworkDenials != tt.denied ||
				got.Traps == nil || got.WallSeconds != 2 || got.GuestSeconds != 1 {
				t.Errorf("receipt %+v", got)
			}
			if !slices.Equal(rc.Tokens, got.Tokens) || !maps.Equal(rc.ToolCalls, got.ToolCalls) {
				t.Errorf("the task_end's receipt %+v is not the one sent on", *rc)
			}
		})
	}
}

// TestPeerDir: a peer's task id, the peer's word, names one folder under peers/ and no
// other place of the workdir.
func TestPeerDir(t *testing.T) {
	for in, want := range map[string]string{"tsk_01ab": "peers/tsk_01ab", "../out": "peers/out", "..": "peers/file",
		"a/../../b": "peers/b", "/etc/passwd": "peers/passwd", "": "peers/file"} {
		if got := peerDir(in); got != want {
			t.Errorf("peerDir(%q) = %q, want %q", in, got, want)
		}
	}
}
