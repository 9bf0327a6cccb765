// Package process is the Go SDK for process drivers: guests exporting
// murmur:driver/process@0.6.0 (wit/murmur-driver-process-0.6.0.wit), the translation
// between the runtime and one harness CLI. Importing it exports the interface's
// functions, which call the Driver installed with Handle from init:
//
//	func init() { process.Handle(myDriver{}) }
//
// A process driver is granted nothing: no environment, arguments, files, stdio or
// network, and it imports nothing of Murmur's (docs/guests.md "Process drivers").
package process

import "fmt"

// Interrupt methods: how a turn in progress is stopped.
const (
	InterruptStdin       = "stdin-message"
	InterruptSignal      = "signal-int"
	InterruptUnsupported = "unsupported"
)

// PathNeed is a path outside its run folder the harness needs; Access is "read" or
// "read-write".
type PathNeed struct{ Path, Access string }

// Description is what the driver drives, read once at stage.
type Description struct {
	Harness, Binary             string
	VersionArgs, TestedVersions []string
	// Interrupt is InterruptStdin, InterruptSignal or InterruptUnsupported.
	Interrupt                 string
	RequiredEnv               []string
	StreamsText, ReportsUsage bool
	NeedsPaths                []PathNeed
	NeedsHosts                []string
	// LoginCheck is the arguments after Binary that print the login state; nil: none.
	LoginCheck []string
}

// Bridge is the MCP server through which the harness calls the capsule's tools.
type Bridge struct {
	ServerName, URL, BearerToken string
	ToolNames                    []string
}

// LaunchRequest is everything the driver needs to plan one turn.
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

// File is a file the runtime writes into the files directory before spawning.
type File struct{ Name, Contents string }

// LaunchPlan is how to spawn the harness for one turn; "{files_dir}" in Args and EnvSet
// values is replaced with the files directory.
type LaunchPlan struct {
	Args           []string
	EnvSet         [][2]string
	Files          []File
	Stdin          []byte // nil writes nothing
	KeepStdinOpen  bool
	InterruptStdin []byte // nil: none
}

// Event cases.
const (
	SessionStarted = "session-started"
	TextDelta      = "text-delta"
	Text           = "text"
	ThinkingDelta  = "thinking-delta"
	Thinking       = "thinking"
	ToolCall       = "tool-call"
	ToolResult     = "tool-result"
	Retry          = "retry"
	UsageEvent     = "usage"
	TurnEnd        = "turn-end"
	TurnFailed     = "turn-failed"
	Note           = "note"
)

// Failure kinds of a turn-failed event.
const (
	FailAuth         = "auth"
	FailQuota        = "quota"
	FailMaxTurns     = "max-turns"
	FailCanceled     = "canceled"
	FailHarnessError = "harness-error"
	FailOther        = "other"
)

// Usage is cumulative for the run; nil members are not reported.
type Usage struct {
	Input, Output, CacheRead, CacheCreation, Thinking *uint64
}

// Event is one thing the harness did: Case names it, and the fields of its case are
// set (Text for the string cases, a turn-failed's message and a retry's reason).
type Event struct {
	Case            string
	Text            string
	SessionID, Auth string
	Model           *string
	ToolID          string
	ToolName        string
	ToolInput       string
	IsError         bool
	Attempt         uint32
	FailureKind     string
	Usage           Usage
}

// ExitStatus is how the harness exited without a terminal event.
type ExitStatus struct {
	Code, Signal             *int32
	StderrTail               string
	Interrupted, SawTerminal bool
}

// How says in words how the harness ended: "killed by signal N", "exited with status
// N", or "ended".
func (x ExitStatus) How() string {
	switch {
	case x.Signal != nil:
		return fmt.Sprintf("killed by signal %d", *x.Signal)
	case x.Code != nil:
		return fmt.Sprintf("exited with status %d", *x.Code)
	}
	return "ended"
}

// LoginOutput is what the login check printed.
type LoginOutput struct {
	Code           *int32
	Stdout, Stderr string
}

// Login states.
const (
	LoggedIn  = "logged-in"
	LoggedOut = "logged-out"
	Unknown   = "unknown"
)

// Driver translates for one harness.
type Driver interface {
	Describe() Description
	// Launch plans one turn; an error refuses it with its message.
	Launch(LaunchRequest) (LaunchPlan, error)
	// Parse reads a batch of complete stdout lines into events.
	Parse(lines []string) []Event
	// ClassifyExit gives the final event of a run that ended without one: turn-end or
	// turn-failed, and turn-failed canceled when the runtime interrupted it.
	ClassifyExit(ExitStatus) Event
	// ReadLogin reads the login check's output: a login state and how, or why not.
	ReadLogin(LoginOutput) (state, detail string)
}

var driver Driver

// Handle installs the driver the exports call; call it from init.
func Handle(d Driver) { driver = d }

// Clip is s cut to at most n bytes, on a UTF-8 boundary, with "…" when cut: a string
// handed to the host must be valid UTF-8, or the call fails.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
