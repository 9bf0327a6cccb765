//go:build linux

package shell

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSplitWords(t *testing.T) {
	for in, want := range map[string][]string{
		`status`:                 {"status"},
		`  log  --oneline -n 3 `: {"log", "--oneline", "-n", "3"},
		`'a  b' "c\"d" e\ f`:     {"a  b", `c"d`, "e f"},
		`"$HOME" '$x' \$y`:       {"$HOME", "$x", "$y"},
		`a|b > c; d`:             {"a|b", ">", "c;", "d"},
		`"" ''`:                  {"", ""},
		`x"y"'z'`:                {"xyz"},
		"a\\\nb":                 {"ab"},
		`"\a\\"`:                 {`\a\`},
	} {
		got, err := splitWords(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`'open`, `"open`, `end\`} {
		if _, err := splitWords(bad); err == nil {
			t.Errorf("splitWords(%q) accepted", bad)
		}
	}
}

// TestShellTools: interpreters get -c (node -e); other binaries get words, no shell.
func TestShellTools(t *testing.T) {
	s := newSandbox(t, Config{Allow: []string{"bash", "sh", "python3", "node", "echo", "printf"}})
	for _, tc := range []struct{ tool, cmd, want string }{
		{"bash", "echo $((6*7))", "42\n"},
		{"sh", "echo $((6*7))", "42\n"},
		{"python3", "print(6*7)", "42\n"},
		{"node", "console.log(6*7)", "42\n"},
		{"echo", `echo 'a  b' "c\"d" e\ f | not-a-pipe $HOME`, "a  b c\"d e f | not-a-pipe $HOME\n"},
		{"printf", `'%s-%s\n' x y`, "x-y\n"},
	} {
		r := runTool(t, s, tc.tool, tc.cmd, time.Minute)
		if out, _ := streams(t, r); out != tc.want || r.Status != "passed" || !strings.HasPrefix(r.Text, "$ "+tc.cmd+"\nExit code: 0\n") {
			t.Errorf("%s %q: %q\n%s", tc.tool, tc.cmd, out, r.Text)
		}
	}
	r := runTool(t, s, "bash", "exit 7", time.Minute)
	if r.ExitCode != 7 || r.Status != "passed" || !strings.Contains(r.Text, "Exit code: 7") {
		t.Errorf("exit 7: %+v", r)
	}
}

// TestShellRefusals: what the model did wrong is an error result it can read.
func TestShellRefusals(t *testing.T) {
	s := newSandbox(t, Config{Allow: []string{"bash", "no-such-binary-5e1", "echo"}})
	for _, tc := range []struct {
		tool, input, want string
	}{
		{"rm", `{"command": "rm -rf /"}`, `"rm" is not in capabilities.shell.allow`},
		{"bash", `{}`, `{"command": "<non-empty command>"}`},
		{"bash", `{"command": "  "}`, `non-empty`},
		{"bash", `not json`, `non-empty`},
		{"no-such-binary-5e1", `{"command": "x"}`, "not installed"},
		{"echo", `{"command": "echo 'open"}`, "unterminated single quote"},
	} {
		r, err := s.RunShell(context.Background(), tc.tool, []byte(tc.input))
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != "error" || r.ExitCode != -1 || !strings.Contains(r.Text, tc.want) {
			t.Errorf("%s %s: %+v", tc.tool, tc.input, r)
		}
	}
}

// TestPlan: what a shell call will run, worked out before it runs (for on-shell hooks)
// — the resolved path, argv as RunShell executes it, the script an interpreter gets —
// and the refusals RunShell answers with.
func TestPlan(t *testing.T) {
	s := newSandbox(t, Config{Allow: []string{"bash", "echo", "no-such-binary-5e1"}})
	for _, tc := range []struct {
		tool, input string
		argv        []string
		script      string
		refusal     string
	}{
		{"bash", `{"command": "ls; rm -f a"}`, []string{"bash", "-c", "ls; rm -f a"}, "ls; rm -f a", ""},
		{"echo", `{"command": "echo 'a b' c"}`, []string{"echo", "a b", "c"}, "", ""},
		{"echo", `{"command": "x"}`, []string{"echo", "x"}, "", ""},
		{"rm", `{"command": "rm -rf /"}`, nil, "", "not in capabilities.shell.allow"},
		{"no-such-binary-5e1", `{"command": "x"}`, nil, "", "not installed"},
		{"bash", `{}`, nil, "", "non-empty"},
	} {
		cmd, refusal := s.Plan(tc.tool, []byte(tc.input))
		if !slices.Equal(cmd.Argv, tc.argv) || cmd.Script != tc.script || (refusal == "") != (tc.refusal == "") || !strings.Contains(refusal, tc.refusal) {
			t.Errorf("%s %s: %+v, %q", tc.tool, tc.input, cmd, refusal)
		}
		if cmd.Argv != nil && (!filepath.IsAbs(cmd.Path) || filepath.Base(cmd.Path) != tc.tool) {
			t.Errorf("%s: path %q", tc.tool, cmd.Path)
		}
	}
}

// TestNativeTool: the tool gets {"data": "<input as JSON text>", "log_path"} on stdin; its {"status","summary",
// "data"} is the result; other stdout passes through; its own folder is read-only.
func TestNativeTool(t *testing.T) {
	for _, tier := range append(tiers(t), TierEnvOnly) {
		t.Run(tier, func(t *testing.T) {
			work, rec := t.TempDir(), t.TempDir()
			tool := filepath.Join(rec, "tools", "reverse", "reverse")
			writeFile(t, tool, `#!/usr/bin/python3
import json, os, sys
req = json.load(sys.stdin)
try:
    open(os.path.join(os.path.dirname(sys.argv[0]) or ".", "scribble"), "w")
    own = "writable"
except OSError:
    own = "read-only"
with open(req["log_path"], "w") as f:
    f.write("logged")
print(json.dumps({"status": "passed", "summary": "reversed",
    "data": json.dumps({"text": json.loads(req["data"])["text"][::-1], "own_folder": own, "log": req["log_path"]})}))
`)
			plain := filepath.Join(rec, "tools", "plain", "plain")
			writeFile(t, plain, "#!/bin/sh\necho plain words\n")
			for _, p := range []string{tool, plain} {
				if err := os.Chmod(p, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			s := newSandbox(t, Config{Workdir: work, Records: rec, tier: tier})
			r, err := s.RunNative(context.Background(), "reverse", tool, json.RawMessage(`{"text": "abc"}`))
			if err != nil {
				t.Fatal(err)
			}
			var data struct{ Text, Own_folder, Log string }
			if err := json.Unmarshal([]byte(r.Text), &data); err != nil || r.Status != "passed" || r.Metadata["summary"] != "reversed" {
				t.Fatalf("%+v: %v", r, err)
			}
			if data.Text != "cba" || !strings.HasPrefix(data.Log, filepath.Join(work, "logs", "reverse-")) {
				t.Errorf("data %+v", data)
			}
			if tier != TierEnvOnly && data.Own_folder != "read-only" {
				t.Errorf("the tool could write its own folder")
			}
			if b, _ := os.ReadFile(data.Log); string(b) != "logged" {
				t.Errorf("log_path: %q", b)
			}
			r, err = s.RunNative(context.Background(), "plain", plain, nil)
			if err != nil || r.Status != "passed" || r.Text != "plain words\n" {
				t.Errorf("passthrough: %+v %v", r, err)
			}
			r, err = s.RunNative(context.Background(), "gone", filepath.Join(rec, "tools", "gone", "gone"), nil)
			if err != nil || r.Status != "error" || !strings.Contains(r.Text, "missing") {
				t.Errorf("missing tool: %+v %v", r, err)
			}
		})
	}
}

// TestNativeInput: data is the input as compact JSON text, "{}" when there is none.
func TestNativeInput(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"text": "abc", "n": [1, 2]}`, `{"data":"{\"text\":\"abc\",\"n\":[1,2]}","log_path":"/w/logs/t.log"}`},
		{``, `{"data":"{}","log_path":"/w/logs/t.log"}`},
		{" \n", `{"data":"{}","log_path":"/w/logs/t.log"}`},
		{`"just text"`, `{"data":"\"just text\"","log_path":"/w/logs/t.log"}`},
	} {
		got, err := nativeInput(json.RawMessage(tc.in), "/w/logs/t.log")
		if err != nil || string(got) != tc.want {
			t.Errorf("nativeInput(%q) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := nativeInput(json.RawMessage(`{not json`), "/w/logs/t.log"); err == nil {
		t.Error("nativeInput accepted input that is not JSON")
	}
}

// TestMurmurNativeTool runs a native tool built from source (testdata/murmurtool) that
// reads stdin as Murmur's native tools do: data must be a string holding the arguments,
// and log_path a file in the workdir's logs/ it appends one line to per call.
func TestMurmurNativeTool(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain to build the native tool:", err)
	}
	rec := t.TempDir()
	tool := filepath.Join(rec, "tools", "fixture", "fixture")
	build := exec.Command(gobin, "build", "-o", tool, "./testdata/murmurtool")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the native tool: %v\n%s", err, out)
	}
	for _, tier := range append(tiers(t), TierEnvOnly) {
		t.Run(tier, func(t *testing.T) {
			work := t.TempDir()
			s := newSandbox(t, Config{Workdir: work, Records: rec, tier: tier})
			for _, tc := range []struct{ input, wantData, wantOp string }{
				{`{"operation": "list_entries", "path": "."}`, `{"operation":"list_entries","path":"."}`, "list_entries"},
				{``, `{}`, "<nil>"},
			} {
				r, err := s.RunNative(context.Background(), "fixture", tool, json.RawMessage(tc.input))
				if err != nil {
					t.Fatal(err)
				}
				var got struct {
					Args map[string]any
					Data string
				}
				if r.Status != "passed" || r.Metadata["summary"] != "decoded" || json.Unmarshal([]byte(r.Text), &got) != nil || got.Data != tc.wantData {
					t.Fatalf("input %q: %+v", tc.input, r)
				}
				logs, _ := filepath.Glob(filepath.Join(work, "logs", "fixture-*.log"))
				if len(logs) == 0 {
					t.Fatalf("input %q: no log in %s/logs", tc.input, work)
				}
				if b, _ := os.ReadFile(logs[len(logs)-1]); string(b) != "murmur-tool-fixture: "+tc.wantOp+"\n" {
					t.Errorf("input %q: log %q", tc.input, b)
				}
			}
		})
	}
}

// TestEnvOnlyConfinesNothing is the control for the confinement tests: without a
// sandbox the same reads succeed, so those tests can fail.
func TestEnvOnlyConfinesNothing(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret"), "visible")
	s := newSandbox(t, Config{tier: TierEnvOnly})
	if r := bash(t, s, "cat "+filepath.Join(outside, "secret")); r.ExitCode != 0 || !strings.Contains(r.Text, "visible") {
		t.Errorf("env-only should not confine files:\n%s", r.Text)
	}
}
