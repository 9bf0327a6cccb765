package wit_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/witcheck"
	"github.com/capsulegate/capsulegate/wit"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// Interface IDs, as the .wit files declare them.
const (
	tool01       = "murmur:tool/run@0.1.0"
	tool02       = "murmur:tool/run@0.2.0"
	http01       = "capsulegate:http/outgoing@0.1.0"
	http02       = "capsulegate:http/outgoing@0.2.0"
	process      = "murmur:driver/process@0.6.0"
	lifecycle    = "murmur:hook/lifecycle@0.9.0"
	inference    = "murmur:runtime/inference@0.4.0"
	taskIO       = "murmur:task-io/read@0.1.0"
	conversation = "murmur:conversation/read@0.2.0"
	artifacts    = "murmur:artifact-manager/manage@0.1.0"
	message      = "murmur:message/send@0.1.0"
)

// hostBindings say where the host keeps its Go copies: all in wit/abi. Names and case
// lists are given only where the rule (witcheck.GoName) does not find them.
var hostBindings = []witcheck.Binding{
	{Interface: tool01, Dir: "wit/abi"},
	{Interface: tool02, Dir: "wit/abi"},
	{Interface: http01, Dir: "wit/abi", Names: map[string]string{"request": "HTTPRequest", "response": "HTTPResponse"}},
	{Interface: http02, Dir: "wit/abi", Names: map[string]string{"request": "HTTPRequest", "response": "HTTPResponse", "response-head": "HTTPHead"}},
	{Interface: process, Dir: "wit/abi", CaseLists: map[string]string{
		"interrupt-method": "InterruptMethods", "path-access": "PathAccesses", "session-mode": "SessionModes",
		"failure-kind": "FailureKinds", "event": "EventCases", "login-state": "LoginStates",
	}},
	{Interface: lifecycle, Dir: "wit/abi", CaseLists: map[string]string{"hook-output": "HookOutputCases"}},
	{Interface: inference, Dir: "wit/abi"},
	{Interface: taskIO, Dir: "wit/abi"},
	{Interface: conversation, Dir: "wit/abi"},
	{Interface: artifacts, Dir: "wit/abi"},
	{Interface: message, Dir: "wit/abi", Names: map[string]string{"message": "PeerMessage", "task-result": "PeerTaskResult"}},
}

// guestBindings say where the guest SDK keeps them: the tool and HTTP types in
// wit/guest (wit/guest/tool re-exports them by alias), the driver's in
// wit/guest/process, the hook world's in wit/guest/hook and the artifact manager's in
// wit/guest/artifacts. The case lists are the tables the wasip1 codecs index.
var guestBindings = []witcheck.Binding{
	{Interface: tool01, Dir: "wit/guest"},
	{Interface: tool02, Dir: "wit/guest"},
	{Interface: http01, Dir: "wit/guest", Names: map[string]string{"request": "HTTPRequest", "response": "HTTPResponse"}},
	{Interface: http02, Dir: "wit/guest", Names: map[string]string{"request": "HTTPRequest", "response": "HTTPResponse", "response-head": "HTTPStream"}},
	{Interface: process, Dir: "wit/guest/process", Names: map[string]string{"driver-file": "File"}, CaseLists: map[string]string{
		"interrupt-method": "interrupts", "path-access": "accesses", "failure-kind": "failures", "event": "eventCases", "login-state": "states",
	}},
	{Interface: lifecycle, Dir: "wit/guest/hook", Names: map[string]string{"hook-output": "Output"}, CaseLists: map[string]string{
		"context-insertion": "insertions", "hook-output": "caseIndex",
	}},
	{Interface: inference, Dir: "wit/guest/hook"},
	{Interface: taskIO, Dir: "wit/guest/hook", Names: map[string]string{"task-input-form": "InputForm"}},
	{Interface: conversation, Dir: "wit/guest/hook"},
	{Interface: artifacts, Dir: "wit/guest/artifacts", Names: map[string]string{"artifact-summary": "Summary", "artifact-info": "Info"}},
	{Interface: message, Dir: "wit/guest/message"},
}

// hostFuncs are the host's descriptors of every WIT function, by interface#function.
func hostFuncs() map[string]witcheck.HostFunc {
	m := map[string]witcheck.HostFunc{}
	add := func(iface, fn, name string, f *abi.Func) {
		m[iface+"#"+fn] = witcheck.HostFunc{Name: name, Func: f}
	}
	add(tool01, "run", "abi.ToolRun01", abi.ToolRun01)
	add(tool02, "run", "abi.ToolRun02", abi.ToolRun02)
	add("murmur:tool-registry/invoke@0.1.0", "invoke", "abi.Invoke", abi.Invoke)
	add("murmur:stream/events@0.1.0", "emit-chunk", "abi.EmitChunk", abi.EmitChunk)
	add("murmur:stream/events@0.1.0", "emit-thinking-chunk", "abi.EmitThink", abi.EmitThink)
	add("murmur:stream/events@0.1.0", "tool-call-started", "abi.CallStarted", abi.CallStarted)
	add("murmur:stream/events@0.1.0", "tool-call-input-bytes", "abi.InputBytes", abi.InputBytes)
	add("murmur:task/task@0.1.0", "request-input", "abi.RequestIn", abi.RequestIn)
	for _, iface := range []string{http01, http02} {
		add(iface, "send", "abi.HTTPSend", abi.HTTPSend)
	}
	add(http02, "open", "abi.HTTPOpen", abi.HTTPOpen)
	add(http02, "read-body", "abi.HTTPRead", abi.HTTPRead)
	add(http02, "close-body", "abi.HTTPClose", abi.HTTPClose)
	for fn, f := range abi.ProcessFuncs {
		add(process, fn, fmt.Sprintf("abi.ProcessFuncs[%q]", fn), f)
	}
	for fn, f := range abi.HookFuncs {
		add(lifecycle, fn, fmt.Sprintf("abi.HookFuncs[%q]", fn), f)
	}
	add(inference, "run-inference", "abi.RunInference", abi.RunInference)
	add("murmur:runtime/tokens@0.4.0", "count", "abi.CountTokens", abi.CountTokens)
	add(taskIO, "input-len", "abi.InputLen", abi.InputLen)
	add(taskIO, "read-input", "abi.ReadInput", abi.ReadInput)
	add(taskIO, "output-len", "abi.OutputLen", abi.OutputLen)
	add(taskIO, "read-output", "abi.ReadOutput", abi.ReadOutput)
	add(conversation, "read-messages", "abi.ReadMessages", abi.ReadMessages)
	add(artifacts, "list", "abi.AMList", abi.AMList)
	add(artifacts, "describe", "abi.AMDescribe", abi.AMDescribe)
	add(artifacts, "search", "abi.AMSearch", abi.AMSearch)
	add(artifacts, "pull", "abi.AMPull", abi.AMPull)
	add(artifacts, "remove", "abi.AMRemove", abi.AMRemove)
	add(artifacts, "diagnostics", "abi.AMDiagnose", abi.AMDiagnose)
	add(message, "send", "abi.MessageSend", abi.MessageSend)
	return m
}

// Reasons shared by several exceptions.
const (
	hostEventRecord = "the host builds each lifecycle event as a generic value (runtime's *Record functions) " +
		"against its abi.Type descriptor, which is compared instead; it has no Go struct"
	flatEvent = "the Go Event flattens its payload records into its own fields (SessionID, ToolID, Text, …), " +
		"so neither side has a Go struct for it; the host's descriptor is compared"
	flatDescription = "Description flattens harness-needs into NeedsPaths and NeedsHosts"
	flatSession     = "LaunchRequest flattens session into SessionID and Resume (mode resume)"
	guestTool01     = "the SDK's tool package exports murmur:tool/run@0.1.0 only (the host serves both levels), " +
		"so it has no 0.2.0 attachments"
)

// exceptions are every way a side intentionally departs from the mapping rule.
var exceptions = []witcheck.Exception{
	// murmur:tool/run
	{Kind: witcheck.ExtraField, Side: witcheck.Host, Type: tool01 + ".tool-result", Member: "Attachments",
		Reason: "abi.ToolResult serves both levels: Attachments is 0.2.0's field, dropped when a 0.1.0 result is lowered"},
	{Kind: witcheck.NoGoType, Side: witcheck.Guest, Type: tool02 + ".attachment", Reason: guestTool01},
	{Kind: witcheck.FieldShape, Side: witcheck.Guest, Type: tool02 + ".tool-result", Member: "attachments", Reason: guestTool01},

	// capsulegate:http/outgoing
	{Kind: witcheck.FieldShape, Side: witcheck.Guest, Type: http02 + ".response-head", Member: "body", StandIns: []string{"Body"},
		Reason: "the SDK wraps the body handle (u32) in *HTTPBody, an io.ReadCloser over read-body and close-body"},

	// murmur:driver/process: both sides copy the driver's records the same hand-flattened way.
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: process + ".harness-needs", Reason: flatDescription},
	{Kind: witcheck.NoGoType, Side: witcheck.Guest, Type: process + ".harness-needs", Reason: flatDescription},
	{Kind: witcheck.FieldShape, Side: witcheck.Host, Type: process + ".description", Member: "harness-needs", StandIns: []string{"NeedsPaths", "NeedsHosts"}, Reason: flatDescription},
	{Kind: witcheck.FieldShape, Side: witcheck.Guest, Type: process + ".description", Member: "harness-needs", StandIns: []string{"NeedsPaths", "NeedsHosts"}, Reason: flatDescription},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: process + ".login-check", Reason: "Description carries login-check's args as LoginCheck, with HasLogin for some"},
	{Kind: witcheck.NoGoType, Side: witcheck.Guest, Type: process + ".login-check", Reason: "Description carries login-check's args as LoginCheck, nil for none"},
	{Kind: witcheck.FieldShape, Side: witcheck.Host, Type: process + ".description", Member: "login-check", StandIns: []string{"LoginCheck", "HasLogin"},
		Reason: "option<login-check> is its args (LoginCheck) and whether it is some (HasLogin)"},
	{Kind: witcheck.FieldShape, Side: witcheck.Guest, Type: process + ".description", Member: "login-check", StandIns: []string{"LoginCheck"},
		Reason: "option<login-check> is its args, nil for none"},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: process + ".session", Reason: flatSession},
	{Kind: witcheck.NoGoType, Side: witcheck.Guest, Type: process + ".session", Reason: flatSession},
	{Kind: witcheck.NoGoType, Side: witcheck.Guest, Type: process + ".session-mode", Reason: flatSession + "; the codec writes the mode from Resume"},
	{Kind: witcheck.FieldShape, Side: witcheck.Host, Type: process + ".launch-request", Member: "session", StandIns: []string{"SessionID", "Resume"}, Reason: flatSession},
	{Kind: witcheck.FieldShape, Side: witcheck.Guest, Type: process + ".launch-request", Member: "session", StandIns: []string{"SessionID", "Resume"}, Reason: flatSession},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: process + ".session-info", Reason: flatEvent},
	{Kind: witcheck.NoGoType, Side: witcheck.Guest, Type: process + ".session-info", Reason: flatEvent},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: process + ".tool-call-info", Reason: flatEvent},
	{Kind: witcheck.NoGoType, Side: witcheck.Guest, Type: process + ".tool-call-info", Reason: flatEvent},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: process + ".tool-result-info", Reason: flatEvent},
	{Kind: witcheck.NoGoType, Side: witcheck.Guest, Type: process + ".tool-result-info", Reason: flatEvent},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: process + ".retry-info", Reason: flatEvent},
	{Kind: witcheck.NoGoType, Side: witcheck.Guest, Type: process + ".retry-info", Reason: flatEvent},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: process + ".turn-failure", Reason: flatEvent},
	{Kind: witcheck.NoGoType, Side: witcheck.Guest, Type: process + ".turn-failure", Reason: flatEvent},

	// murmur:hook/lifecycle
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: lifecycle + ".context-insertion",
		Reason: "the host never reads inserted-by (abi.Message drops it), so it has neither a Go type nor a case list; the descriptor is compared"},
	{Kind: witcheck.FieldShape, Side: witcheck.Host, Type: lifecycle + ".message", Member: "inserted-by",
		Reason: "the host never marks a message it hands out (Message.Value lowers none) and ignores the mark on those it takes back"},
	{Kind: witcheck.CaseAbsent, Side: witcheck.Guest, Type: lifecycle + ".hook-output", Member: "seed-context",
		Reason: "no commit_policy honours seed-context, so the SDK offers no way to answer it"},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: lifecycle + ".stage-event", Reason: hostEventRecord},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: lifecycle + ".session-context", Reason: hostEventRecord},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: lifecycle + ".task-start-event", Reason: hostEventRecord},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: lifecycle + ".task-end-event", Reason: hostEventRecord},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: lifecycle + ".inference-event", Reason: hostEventRecord},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: lifecycle + ".tool-outcome", Reason: hostEventRecord},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: lifecycle + ".tool-event", Reason: hostEventRecord},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: lifecycle + ".shell-outcome", Reason: hostEventRecord},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: lifecycle + ".shell-event", Reason: hostEventRecord},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: lifecycle + ".compaction-event", Reason: hostEventRecord},
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: lifecycle + ".session-end-event", Reason: hostEventRecord},

	// murmur:task-io/read
	{Kind: witcheck.NoGoType, Side: witcheck.Host, Type: taskIO + ".task-input-form",
		Reason: "the host reads the form as its case index (runtime/wasm/murmur's taskText); the descriptor is compared"},

	// murmur:capsule/run
	{Kind: witcheck.NoDescriptor, Side: witcheck.Host, Type: "murmur:capsule/run@0.1.0#run",
		Reason: "its descriptor (abi's capsuleRun, no parameters and no results) is unexported"},
}

func config(subset bool) witcheck.Config {
	return witcheck.Config{Root: "..", Host: hostBindings, Guest: guestBindings, HostFuncs: hostFuncs(),
		Exceptions: exceptions, Subset: subset}
}

// TestWITMatchesGo holds every record, variant, enum, flags and type alias of wit/*.wit
// against the host's Go types and descriptors and the guest SDK's Go types.
func TestWITMatchesGo(t *testing.T) {
	srcs, err := witcheck.ReadFS(wit.Files, "wit/")
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := filepath.Glob("*.wit")
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) != len(onDisk) || len(srcs) == 0 {
		t.Fatalf("checked %d embedded .wit files, %d on disk", len(srcs), len(onDisk))
	}
	findings, err := witcheck.Check(config(false), srcs)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		t.Error(f)
	}
}

// updateDrift rewrites the drift copies under testdata/drift from the real file.
var updateDrift = flag.Bool("update", false, "rewrite testdata/drift from the real .wit file and each case's edit")

// TestWITDriftReported runs the check on committed copies of one .wit file, one with a
// record field renamed and one with a variant case added, and wants each reported by
// name on every side that disagrees.
func TestWITDriftReported(t *testing.T) {
	const file = "murmur-driver-process-0.6.0.wit"
	orig, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	const exitStatus = "record murmur:driver/process.exit-status"
	const event = "variant murmur:driver/process.event"
	type key = witcheck.Key
	for _, tc := range []struct {
		name     string
		old, new string // the edit made to the copy
		want     []key
	}{
		{
			name: "renamed field",
			old:  "    stderr-tail: string,\n",
			new:  "    stderr-end: string,\n",
			want: []key{
				{Subject: exitStatus, Member: `field "stderr-end"`, Side: witcheck.Host},  // abi.ExitStatus has no StderrEnd
				{Subject: exitStatus, Member: "Go field StderrTail", Side: witcheck.Host}, // abi.ExitStatus's StderrTail is no WIT field
				{Subject: exitStatus, Member: `field "stderr-end"`, Side: witcheck.Guest}, // process.ExitStatus likewise
				{Subject: exitStatus, Member: "Go field StderrTail", Side: witcheck.Guest},
				{Subject: exitStatus, Member: `field "stderr-end"`, Side: witcheck.Host},  // the descriptor lacks it…
				{Subject: exitStatus, Member: `field "stderr-tail"`, Side: witcheck.Host}, // …and has the old name
			},
		},
		{
			name: "added variant case",
			old:  "    text(string),\n",
			new:  "    text(string),\n    compacted(string),\n",
			want: []key{
				{Subject: event, Member: `case "compacted"`, Side: witcheck.Host},  // abi.EventCases lacks it
				{Subject: event, Member: `case "compacted"`, Side: witcheck.Guest}, // process.eventCases lacks it
				{Subject: event, Member: `case "compacted"`, Side: witcheck.Host},  // the descriptor lacks it
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Count(string(orig), tc.old) != 1 {
				t.Fatalf("%s does not hold %q exactly once: update the test's edit", file, tc.old)
			}
			// The copy is committed under testdata/drift, and must be the real file with
			// the one edit: a change to the real file shows here, not as a stale copy.
			dir := filepath.Join("testdata", "drift", strings.ReplaceAll(tc.name, " ", "-"))
			edited := strings.Replace(string(orig), tc.old, tc.new, 1)
			if *updateDrift {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, file), []byte(edited), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			copied, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil || string(copied) != edited {
				t.Fatalf("%s is not %s with the one edit %q → %q (%v): run go test ./wit -run TestWITDriftReported -update",
					filepath.Join(dir, file), file, tc.old, tc.new, err)
			}
			srcs, err := witcheck.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			findings, err := witcheck.Check(config(true), srcs)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range findings {
				t.Log(f)
				// Each message names the file, the WIT interface and type, the member and the side.
				s := f.String()
				for _, part := range []string{filepath.Join(dir, file), f.Subject, f.Member, "the " + string(f.Side) + "'s", "(fix: "} {
					if !strings.Contains(s, part) {
						t.Errorf("finding %q does not name %q", s, part)
					}
				}
			}
			if same, got := witcheck.SameKeys(findings, tc.want); !same {
				t.Errorf("findings %v,\nwant %v", got, tc.want)
			}
		})
	}
}
