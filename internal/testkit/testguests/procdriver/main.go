//go:build wasip1

// Command procdriver is a process driver for a stand-in harness, `fakeharness`, whose
// stdout lines are "<case> <text>" (text-delta hi, turn-end done, …): what the runtime's
// process transport tests drive ("whoami" answers a note with the session launch was
// given; "spin" never returns). Its describe() needs PROC_MODE and PROC_HINT, read
// access to /usr/share and the host harness.example, and has a login check.
package main

import (
	"fmt"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest/process"
)

type driver struct{ session string }

func (driver) Describe() process.Description {
	return process.Description{Harness: "fake", Binary: "fakeharness", VersionArgs: []string{"--version"}, TestedVersions: []string{"1.0.0"},
		Interrupt: process.InterruptSignal, RequiredEnv: []string{"PROC_MODE", "PROC_HINT"}, StreamsText: true, ReportsUsage: true,
		NeedsPaths: []process.PathNeed{{Path: "/usr/share", Access: "read"}}, NeedsHosts: []string{"harness.example"},
		LoginCheck: []string{"auth", "status"}}
}

func (d *driver) Launch(req process.LaunchRequest) (process.LaunchPlan, error) {
	if req.Task == "" {
		return process.LaunchPlan{}, fmt.Errorf("procdriver: an empty task")
	}
	d.session = req.SessionID
	args := []string{"run", "--session", req.SessionID}
	if req.Resume {
		args = append(args, "--resume")
	}
	env := [][2]string{{"FAKE_FILES", "{files_dir}"}, {"FAKE_GATEWAY", "{gateway_url}"}, {"FAKE_KEY", "{gateway_key}"}}
	if b := req.Bridge; b != nil {
		env = append(env, [2]string{"FAKE_BRIDGE", b.URL}, [2]string{"FAKE_BRIDGE_TOKEN", b.BearerToken}, [2]string{"FAKE_TOOLS", strings.Join(b.ToolNames, ",")})
	}
	return process.LaunchPlan{Args: append(args, req.Task), EnvSet: env,
		Files: []process.File{{Name: "session.txt", Contents: req.SessionID}}}, nil
}

func (d *driver) Parse(lines []string) []process.Event {
	var out []process.Event
	for _, l := range lines {
		c, text, _ := strings.Cut(l, " ")
		switch c {
		case "whoami": // what launch was given, so tests see one instance serve the run
			out = append(out, process.Event{Case: process.Note, Text: d.session})
		case "spin": // never returns: the runtime's per-call deadline must cut it
			for {
			}
		case process.TextDelta, process.Text, process.TurnEnd, process.Note:
			out = append(out, process.Event{Case: c, Text: text})
		case process.TurnFailed:
			kind, msg, _ := strings.Cut(text, " ")
			out = append(out, process.Event{Case: c, FailureKind: kind, Text: msg})
		case process.SessionStarted:
			out = append(out, process.Event{Case: c, SessionID: text, Auth: "api-key"})
		case process.ToolCall:
			id, name, _ := strings.Cut(text, " ")
			out = append(out, process.Event{Case: c, ToolID: id, ToolName: name, ToolInput: "{}"})
		default:
			out = append(out, process.Event{Case: process.Note, Text: "unread line: " + l})
		}
	}
	return out
}

func (driver) ClassifyExit(x process.ExitStatus) process.Event {
	if x.Interrupted {
		return process.Event{Case: process.TurnFailed, FailureKind: process.FailCanceled, Text: "interrupted"}
	}
	return process.Event{Case: process.TurnFailed, FailureKind: process.FailHarnessError, Text: "exited without an answer: " + x.StderrTail}
}

func (driver) ReadLogin(o process.LoginOutput) (string, string) {
	if o.Code != nil && *o.Code == 0 {
		return process.LoggedIn, strings.TrimSpace(o.Stdout)
	}
	return process.LoggedOut, strings.TrimSpace(o.Stderr)
}

func init() { process.Handle(&driver{}) }

func main() {}
