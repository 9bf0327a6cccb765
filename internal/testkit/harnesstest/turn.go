package harnesstest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/wit/guest/process"
)

// Translator is what a shipped driver's Go type offers the tests that run its real
// CLI: launch's plan, parse and classify-exit.
type Translator interface {
	Launch(process.LaunchRequest) (process.LaunchPlan, error)
	Parse(lines []string) []process.Event
	ClassifyExit(process.ExitStatus) process.Event
}

// Turn is one run of a real CLI as the runtime would run it, and what the driver read
// of its output.
type Turn struct {
	Events []process.Event
	Res    Result
}

// prepare plans a turn as the runtime would (Plan).
func prepare(t *testing.T, d Translator, req process.LaunchRequest, filesDir string, p *Provider) (args, env []string) {
	t.Helper()
	plan, err := d.Launch(req)
	if err != nil {
		t.Fatal(err)
	}
	return Plan(t, plan, filesDir, p.URL)
}

// RunTurn runs the CLI bin with the plan d makes for req, its files in filesDir, in a
// run folder of its own, against p, with extraEnv added; d parses what it printed.
func RunTurn(t *testing.T, d Translator, bin string, req process.LaunchRequest, filesDir string, p *Provider, extraEnv ...string) Turn {
	t.Helper()
	args, env := prepare(t, d, req, filesDir, p)
	res := Run(t, t.TempDir(), bin, args, append(env, extraEnv...))
	return Turn{Events: d.Parse(res.Lines), Res: res}
}

// InterruptTurn starts a turn of bin the provider never finishes, sends SIGINT once
// the request is in (Interrupt), and returns what d read of it and what d's
// classify-exit answers.
func InterruptTurn(t *testing.T, d Translator, bin string, req process.LaunchRequest) (Turn, process.Event) {
	t.Helper()
	sp := NewProvider(t, Script{Stall: true})
	args, env := prepare(t, d, req, t.TempDir(), sp)
	res, x := Interrupt(t, bin, args, env, sp)
	tr := Turn{Events: d.Parse(res.Lines), Res: res}
	for _, e := range tr.Events {
		x.SawTerminal = x.SawTerminal || e.Case == process.TurnEnd || e.Case == process.TurnFailed
	}
	t.Logf("interrupted: exit %v, signal %v, saw terminal %v; stderr %q", deref(x.Code), deref(x.Signal), x.SawTerminal, res.Stderr)
	return tr, d.ClassifyExit(x)
}

func deref(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}

// Cases are the events of case c, in order.
func Cases(events []process.Event, c string) []process.Event {
	var out []process.Event
	for _, e := range events {
		if e.Case == c {
			out = append(out, e)
		}
	}
	return out
}

// Last is the turn's last event; a turn without any fails t.
func Last(t *testing.T, tr Turn) process.Event {
	t.Helper()
	if len(tr.Events) == 0 {
		t.Fatalf("no events; stderr %s, %v", tr.Res.Stderr, tr.Res.Err)
	}
	return tr.Events[len(tr.Events)-1]
}

// Scrub replaces what matches RE in a captured line With (regexp.ReplaceAllString).
type Scrub struct {
	RE   *regexp.Regexp
	With string
}

// hostScrubs take run folders and ports out of captured lines.
var hostScrubs = []Scrub{
	{regexp.MustCompile(`/tmp/[A-Za-z0-9_./-]*?/(\d{3})(/home)?`), "/run/$1$2"},
	{regexp.MustCompile(`-tmp-[A-Za-z0-9_-]*?-(\d{3})`), "-run-$1"},
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:0"},
}

// Capture writes lines into testdata/<name>.jsonl when update is set (a driver test's
// -update flag), host paths and ports scrubbed, then extra.
func Capture(t *testing.T, update bool, name string, lines []string, extra ...Scrub) {
	t.Helper()
	if !update {
		return
	}
	var b strings.Builder
	for _, l := range lines {
		for _, s := range append(hostScrubs, extra...) {
			l = s.RE.ReplaceAllString(l, s.With)
		}
		b.WriteString(l + "\n")
	}
	if err := os.WriteFile(filepath.Join("testdata", name+".jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
