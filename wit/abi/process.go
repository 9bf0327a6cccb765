package abi

// Names of murmur:driver/process@0.6.0 (wit/murmur-driver-process-0.6.0.wit), the
// interface a process driver exports.
const (
	ProcessInterface = "murmur:driver/process"

	ProcessDescribe = "describe"
	ProcessLaunch   = "launch"
	ProcessParse    = "parse"
	ProcessClassify = "classify-exit"
	ProcessLogin    = "read-login"
)

// Enum and variant cases of murmur:driver/process, in WIT order.
var (
	InterruptMethods = []string{"stdin-message", "signal-int", "unsupported"}
	PathAccesses     = []string{"read", "read-write"}
	SessionModes     = []string{"new", "resume"}
	FailureKinds     = []string{"auth", "quota", "max-turns", "canceled", "harness-error", "other"}
	EventCases       = []string{"session-started", "text-delta", "text", "thinking-delta", "thinking", "tool-call", "tool-result",
		"retry", "usage", "turn-end", "turn-failed", "note"}
	LoginStates = []string{"logged-in", "logged-out", "unknown"}
)

var (
	optU64 = OptionOf(U64)
	optS32 = OptionOf(S32)

	harnessNeedsType = Record(F("paths", List(Record(F("path", String), F("access", Enum(PathAccesses...))).Named("path-need"))),
		F("hosts", List(String))).Named("harness-needs")
	// DescriptionType is the process interface's description.
	DescriptionType = Record(F("harness", String), F("binary", String), F("version-args", List(String)),
		F("tested-versions", List(String)), F("interrupt", Enum(InterruptMethods...).Named("interrupt-method")),
		F("required-env", List(String)), F("streams-text", Bool), F("reports-usage", Bool),
		F("harness-needs", harnessNeedsType),
		F("login-check", OptionOf(Record(F("args", List(String))).Named("login-check")))).Named("description")
	bridgeType = Record(F("server-name", String), F("url", String), F("bearer-token", String),
		F("tool-names", List(String))).Named("bridge")
	// LaunchRequestType is the process interface's launch-request.
	LaunchRequestType = Record(F("model", optString), F("system-prompt", String), F("config", optString),
		F("bridge", OptionOf(bridgeType)),
		F("session", Record(F("id", String), F("mode", Enum(SessionModes...).Named("session-mode"))).Named("session")),
		F("harness-version", optString), F("task", String)).Named("launch-request")
	// LaunchPlanType is the process interface's launch-plan.
	LaunchPlanType = Record(F("args", List(String)), F("env-set", pairs),
		F("files", List(Record(F("name", String), F("contents", String)).Named("driver-file"))),
		F("stdin", OptionOf(List(U8))), F("keep-stdin-open", Bool), F("interrupt-stdin", OptionOf(List(U8)))).Named("launch-plan")
	// EventType is the process interface's event variant.
	EventType = VariantOf(
		C("session-started", Record(F("id", String), F("auth", String), F("model", optString)).Named("session-info")),
		C("text-delta", String), C("text", String), C("thinking-delta", String), C("thinking", String),
		C("tool-call", Record(F("id", String), F("name", String), F("input", String)).Named("tool-call-info")),
		C("tool-result", Record(F("id", String), F("output", String), F("is-error", Bool)).Named("tool-result-info")),
		C("retry", Record(F("attempt", U32), F("reason", String)).Named("retry-info")),
		C("usage", Record(F("input", optU64), F("output", optU64), F("cache-read", optU64), F("cache-creation", optU64),
			F("thinking", optU64)).Named("usage")),
		C("turn-end", String),
		C("turn-failed", Record(F("kind", Enum(FailureKinds...).Named("failure-kind")), F("message", String)).Named("turn-failure")),
		C("note", String)).Named("event")
	// ExitStatusType is the process interface's exit-status.
	ExitStatusType = Record(F("code", optS32), F("signal", optS32), F("stderr-tail", String), F("interrupted", Bool),
		F("saw-terminal", Bool)).Named("exit-status")
	// LoginOutputType is the process interface's login-output.
	LoginOutputType = Record(F("code", optS32), F("stdout", String), F("stderr", String)).Named("login-output")
	// LoginStateType is the process interface's login-state.
	LoginStateType = VariantOf(C("logged-in", String), C("logged-out", String), C("unknown", String)).Named("login-state")
)

// ProcessFuncs are the process interface's functions by name.
var ProcessFuncs = map[string]*Func{
	ProcessDescribe: NewFunc(nil, []*Type{DescriptionType}),
	ProcessLaunch:   NewFunc([]*Type{LaunchRequestType}, []*Type{ResultOf(LaunchPlanType, String)}),
	ProcessParse:    NewFunc([]*Type{List(String)}, []*Type{List(EventType)}),
	ProcessClassify: NewFunc([]*Type{ExitStatusType}, []*Type{EventType}),
	ProcessLogin:    NewFunc([]*Type{LoginOutputType}, []*Type{LoginStateType}),
}

// PathNeed is a path a harness needs, with "read" or "read-write" access.
type PathNeed struct{ Path, Access string }

// Description is what a process driver drives (its describe()).
type Description struct {
	Harness, Binary             string
	VersionArgs, TestedVersions []string
	// Interrupt is stdin-message, signal-int or unsupported.
	Interrupt                 string
	RequiredEnv               []string
	StreamsText, ReportsUsage bool
	NeedsPaths                []PathNeed
	NeedsHosts                []string
	// LoginCheck is the login-check's arguments; nil when the driver has none.
	LoginCheck []string
	HasLogin   bool
}

// Bridge is the launch-request's bridge: the MCP server the harness calls tools through.
type Bridge struct {
	ServerName, URL, BearerToken string
	ToolNames                    []string
}

// LaunchRequest is everything a driver needs to plan one turn.
type LaunchRequest struct {
	Model          *string
	SystemPrompt   string
	Config         *string
	Bridge         *Bridge
	SessionID      string
	Resume         bool
	HarnessVersion *string
	Task           string
}

// DriverFile is a file written before the harness starts.
type DriverFile struct{ Name, Contents string }

// LaunchPlan is how to spawn the harness for one turn.
type LaunchPlan struct {
	Args           []string
	EnvSet         [][2]string
	Files          []DriverFile
	Stdin          []byte
	HasStdin       bool
	KeepStdinOpen  bool
	InterruptStdin []byte
}

// Usage is a usage event: cumulative counts, nil when not reported.
type Usage struct {
	Input, Output, CacheRead, CacheCreation, Thinking *uint64
}

// Event is one event a driver read out of its harness's output: Case names it (one of
// EventCases); the fields its case carries are set.
type Event struct {
	Case string
	// Text is the string of text-delta, text, thinking-delta, thinking, turn-end and
	// note, a turn-failed's message, a retry's reason.
	Text string
	// Session: session-started's id, auth and model.
	SessionID, Auth string
	Model           *string
	// Tool calls and results.
	ToolID, ToolName, ToolInput string
	IsError                     bool
	Attempt                     uint32
	// FailureKind is a turn-failed's kind.
	FailureKind string
	Usage       Usage
}

// ExitStatus is how the harness exited, for classify-exit.
type ExitStatus struct {
	Code, Signal             *int32
	StderrTail               string
	Interrupted, SawTerminal bool
}

// LoginOutput is what the login check printed.
type LoginOutput struct {
	Code           *int32
	Stdout, Stderr string
}

// reader converts lifted values, keeping the first mismatch.
type reader struct {
	t   *Type
	err error
}

func (r *reader) fail(v any) {
	if r.err == nil {
		r.err = valueErr(r.t, "unexpected value %T %v", v, v)
	}
}

func (r *reader) fields(v any, n int) []any {
	f, ok := v.([]any)
	if !ok || len(f) != n {
		r.fail(v)
		return make([]any, n)
	}
	return f
}

func (r *reader) str(v any) string {
	s, ok := v.(string)
	if !ok {
		r.fail(v)
	}
	return s
}

func (r *reader) boolean(v any) bool {
	b, ok := v.(bool)
	if !ok {
		r.fail(v)
	}
	return b
}

func (r *reader) strs(v any) []string {
	l, ok := v.([]any)
	if !ok {
		r.fail(v)
		return nil
	}
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = r.str(s)
	}
	return out
}

func (r *reader) enum(v any, cases []string) string {
	d, ok := v.(uint32)
	if !ok || d >= uint32(len(cases)) {
		r.fail(v)
		return ""
	}
	return cases[d]
}

func (r *reader) opt(v any) (any, bool) {
	o, ok := v.(Option)
	if !ok {
		r.fail(v)
	}
	return o.Value, o.Some
}

func (r *reader) optStr(v any) *string {
	x, some := r.opt(v)
	if !some {
		return nil
	}
	s := r.str(x)
	return &s
}

func (r *reader) optU64(v any) *uint64 {
	x, some := r.opt(v)
	if !some {
		return nil
	}
	n, ok := x.(uint64)
	if !ok {
		r.fail(x)
	}
	return &n
}

func (r *reader) bytes(v any) []byte {
	b, ok := v.([]byte)
	if !ok {
		r.fail(v)
	}
	return b
}

// ToDescription converts a lifted description.
func ToDescription(v any) (Description, error) {
	r := &reader{t: DescriptionType}
	f := r.fields(v, 10)
	d := Description{Harness: r.str(f[0]), Binary: r.str(f[1]), VersionArgs: r.strs(f[2]), TestedVersions: r.strs(f[3]),
		Interrupt: r.enum(f[4], InterruptMethods), RequiredEnv: r.strs(f[5]), StreamsText: r.boolean(f[6]), ReportsUsage: r.boolean(f[7])}
	needs := r.fields(f[8], 2)
	if paths, ok := needs[0].([]any); ok {
		for _, p := range paths {
			pf := r.fields(p, 2)
			d.NeedsPaths = append(d.NeedsPaths, PathNeed{Path: r.str(pf[0]), Access: r.enum(pf[1], PathAccesses)})
		}
	} else {
		r.fail(needs[0])
	}
	d.NeedsHosts = r.strs(needs[1])
	if lc, some := r.opt(f[9]); some {
		d.HasLogin, d.LoginCheck = true, r.strs(r.fields(lc, 1)[0])
	}
	return d, r.err
}

// Value is req's generic value, of LaunchRequestType.
func (req LaunchRequest) Value() any {
	bridge := Option{}
	if b := req.Bridge; b != nil {
		bridge = Option{Some: true, Value: []any{b.ServerName, b.URL, b.BearerToken, LinesValue(b.ToolNames)}}
	}
	mode := uint32(0)
	if req.Resume {
		mode = 1
	}
	return []any{optValue(req.Model), req.SystemPrompt, optValue(req.Config), bridge, []any{req.SessionID, mode},
		optValue(req.HarnessVersion), req.Task}
}

// ToLaunch converts a lifted result<launch-plan, string>: the plan, or the driver's
// refusal as refused.
func ToLaunch(v any) (plan LaunchPlan, refused string, err error) {
	res, ok := v.(Result)
	if !ok {
		return plan, "", valueErr(ResultOf(LaunchPlanType, String), "got %T", v)
	}
	r := &reader{t: LaunchPlanType}
	if res.Err {
		return plan, r.str(res.Value), r.err
	}
	f := r.fields(res.Value, 6)
	plan.Args = r.strs(f[0])
	if plan.EnvSet, err = toPairs(f[1]); err != nil {
		return plan, "", err
	}
	if files, ok := f[2].([]any); ok {
		for _, x := range files {
			ff := r.fields(x, 2)
			plan.Files = append(plan.Files, DriverFile{Name: r.str(ff[0]), Contents: r.str(ff[1])})
		}
	} else {
		r.fail(f[2])
	}
	if in, some := r.opt(f[3]); some {
		plan.HasStdin, plan.Stdin = true, r.bytes(in)
	}
	plan.KeepStdinOpen = r.boolean(f[4])
	if in, some := r.opt(f[5]); some {
		plan.InterruptStdin = r.bytes(in)
	}
	return plan, "", r.err
}

// LinesValue is the generic value of a parse batch.
func LinesValue(lines []string) []any {
	out := make([]any, len(lines))
	for i, l := range lines {
		out[i] = l
	}
	return out
}

// ToEvents converts a lifted list<event>.
func ToEvents(v any) ([]Event, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, valueErr(List(EventType), "got %T", v)
	}
	out := make([]Event, len(l))
	for i, e := range l {
		ev, err := ToEvent(e)
		if err != nil {
			return nil, err
		}
		out[i] = ev
	}
	return out, nil
}

// ToEvent converts a lifted event.
func ToEvent(v any) (Event, error) {
	r := &reader{t: EventType}
	vr, ok := v.(Variant)
	if !ok || vr.Case >= uint32(len(EventCases)) {
		return Event{}, valueErr(EventType, "got %v", v)
	}
	e := Event{Case: EventCases[vr.Case]}
	switch e.Case {
	case "session-started":
		f := r.fields(vr.Value, 3)
		e.SessionID, e.Auth, e.Model = r.str(f[0]), r.str(f[1]), r.optStr(f[2])
	case "tool-call":
		f := r.fields(vr.Value, 3)
		e.ToolID, e.ToolName, e.ToolInput = r.str(f[0]), r.str(f[1]), r.str(f[2])
	case "tool-result":
		f := r.fields(vr.Value, 3)
		e.ToolID, e.Text, e.IsError = r.str(f[0]), r.str(f[1]), r.boolean(f[2])
	case "retry":
		f := r.fields(vr.Value, 2)
		n, ok := f[0].(uint32)
		if !ok {
			r.fail(f[0])
		}
		e.Attempt, e.Text = n, r.str(f[1])
	case "usage":
		f := r.fields(vr.Value, 5)
		e.Usage = Usage{Input: r.optU64(f[0]), Output: r.optU64(f[1]), CacheRead: r.optU64(f[2]), CacheCreation: r.optU64(f[3]), Thinking: r.optU64(f[4])}
	case "turn-failed":
		f := r.fields(vr.Value, 2)
		e.FailureKind, e.Text = r.enum(f[0], FailureKinds), r.str(f[1])
	default: // the cases carrying a string
		e.Text = r.str(vr.Value)
	}
	return e, r.err
}

// Value is x's generic value, of ExitStatusType.
func (x ExitStatus) Value() any {
	return []any{optValue(x.Code), optValue(x.Signal), x.StderrTail, x.Interrupted, x.SawTerminal}
}

// Value is o's generic value, of LoginOutputType.
func (o LoginOutput) Value() any {
	return []any{optValue(o.Code), o.Stdout, o.Stderr}
}

// ToLoginState converts a lifted login-state: its case and string.
func ToLoginState(v any) (state, detail string, err error) {
	vr, ok := v.(Variant)
	if !ok || vr.Case >= uint32(len(LoginStates)) {
		return "", "", valueErr(LoginStateType, "got %v", v)
	}
	s, ok := vr.Value.(string)
	if !ok {
		return "", "", valueErr(LoginStateType, "got %v", v)
	}
	return LoginStates[vr.Case], s, nil
}
