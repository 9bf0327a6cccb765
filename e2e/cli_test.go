package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/otlptest"
	"github.com/capsulegate/capsulegate/replay"
)

type result struct {
	code           int
	stdout, stderr string
}

// capsule runs `caddy capsule args…` with a clean environment and returns its outcome.
func capsule(t *testing.T, home string, args ...string) result {
	t.Helper()
	return capsuleEnv(t, home, nil, args...)
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPackPublishInstallVerify drives the example through the real binary as a user
// would, then tampers with the registry and checks that verify refuses and the lock is
// untouched.
func TestPackPublishInstallVerify(t *testing.T) {
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	reg := filepath.Join(tmp, "registry")
	capDir := filepath.Join(tmp, "hello")
	os.MkdirAll(home, 0o755)
	// A capsule of two skills: the greeting from the registry, the tone from a local file.
	os.MkdirAll(filepath.Join(capDir, "skills"), 0o755)
	os.WriteFile(filepath.Join(capDir, "skills", "tone.md"), []byte("# Tone\nBe brief.\n"), 0o644)
	os.WriteFile(filepath.Join(capDir, "murmur.yaml"), []byte("name: skills\nversion: 1.0.0\nartifacts:\n"+
		"  - {name: greeting, version: 1.0.0, runtime: skill}\n  - {name: tone, runtime: skill, source: skills/tone.md}\n"), 0o644)
	zipPath := filepath.Join(tmp, "greeting.mur.zip")
	manifestPath := filepath.Join(capDir, "murmur.yaml")
	lockPath := filepath.Join(capDir, "murmur.lock")

	steps := []struct {
		name     string
		args     []string
		wantCode int
		check    func(t *testing.T, r result)
	}{
		{"pack", []string{"pack", "../examples/artifacts/greeting", "--output", zipPath}, 0, func(t *testing.T, r result) {
			if _, err := os.Stat(zipPath); err != nil {
				t.Fatal(err)
			}
		}},
		{"publish", []string{"publish", zipPath, "--registry", reg}, 0, func(t *testing.T, r result) {
			for _, f := range []string{"greeting-1.0.0.mur.zip", "greeting-1.0.0.sha256", "greeting-1.0.0.meta.json"} {
				if _, err := os.Stat(filepath.Join(reg, "greeting", "1.0.0", f)); err != nil {
					t.Error(err)
				}
			}
		}},
		{"publish again is a no-op", []string{"publish", zipPath, "--registry", reg}, 0, nil},
		{"verify before install", []string{"verify", manifestPath, "--registry", reg}, 1, func(t *testing.T, r result) {
			if !strings.Contains(r.stderr, "E-LOCK-010") {
				t.Errorf("stderr = %s", r.stderr)
			}
		}},
		{"install", []string{"install", manifestPath, "--registry", reg}, 0, func(t *testing.T, r result) {
			lock, err := os.ReadFile(lockPath)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(lock), "lock_version: 2") || !strings.Contains(string(lock), "name: greeting") || strings.Contains(string(lock), "tone") {
				t.Errorf("lock:\n%s", lock)
			}
			if n := strings.Count(r.stderr, "\n"); n != 2 || !strings.Contains(r.stderr, "[1/2]") || !strings.Contains(r.stderr, "[2/2]") {
				t.Errorf("want one progress line per artifact, got:\n%s", r.stderr)
			}
		}},
		{"verify", []string{"verify", manifestPath, "--registry", reg, "--json"}, 0, func(t *testing.T, r result) {
			var out struct {
				OK        bool `json:"ok"`
				Artifacts []struct {
					Name, Platform, SHA256 string
				} `json:"artifacts"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
				t.Fatalf("%v: %s", err, r.stdout)
			}
			if !out.OK || len(out.Artifacts) != 2 || out.Artifacts[0].Name != "greeting" || len(out.Artifacts[0].SHA256) != 64 {
				t.Errorf("verify --json = %+v", out)
			}
		}},
		{"usage: no argument", []string{"verify", "--registry", reg}, 2, nil},
		{"usage: unknown flag", []string{"verify", manifestPath, "--no-such-flag"}, 2, nil},
		{"usage: pack reads no registry", []string{"pack", "../examples/artifacts/greeting", "--output", zipPath, "--registry", reg}, 2, func(t *testing.T, r result) {
			if !strings.Contains(r.stderr, "unknown flag: --registry") {
				t.Errorf("stderr: %s", r.stderr)
			}
		}},
		{"registry from the environment's default", []string{"verify", manifestPath}, 1, func(t *testing.T, r result) {
			// Caddy's data folder, which the gateway defaults to as well.
			if !strings.Contains(r.stderr, filepath.Join(home, ".local", "share", "caddy", "capsule", "registry")) {
				t.Errorf("default registry not named: %s", r.stderr)
			}
		}},
	}
	for _, s := range steps {
		r := capsule(t, home, s.args...)
		if r.code != s.wantCode {
			t.Fatalf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", s.name, r.code, s.wantCode, r.stdout, r.stderr)
		}
		if s.check != nil {
			t.Run(s.name, func(t *testing.T) { s.check(t, r) })
		}
	}

	// Flip one byte of the published archive: verify refuses, names the artifact, and
	// the lock stays byte-for-byte the same.
	lockBefore, _ := os.ReadFile(lockPath)
	published := filepath.Join(reg, "greeting", "1.0.0", "greeting-1.0.0.mur.zip")
	data, err := os.ReadFile(published)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if err := os.WriteFile(published, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r := capsule(t, home, "verify", manifestPath, "--registry", reg)
	if r.code != 1 || !strings.Contains(r.stderr, "greeting") {
		t.Fatalf("verify after tampering: exit %d\n%s", r.code, r.stderr)
	}
	lockAfter, _ := os.ReadFile(lockPath)
	if !bytes.Equal(lockBefore, lockAfter) {
		t.Fatal("verify changed murmur.lock")
	}
	// install must refuse too, and also leave the lock alone.
	if r := capsule(t, home, "install", manifestPath, "--registry", reg); r.code != 1 {
		t.Fatalf("install after tampering: exit %d\n%s", r.code, r.stderr)
	}
	lockAfter, _ = os.ReadFile(lockPath)
	if !bytes.Equal(lockBefore, lockAfter) {
		t.Fatal("install changed murmur.lock after a refusal")
	}
}

// TestRunScriptCapsule runs the example script capsule with the real binary: its module
// invokes the example wasm tool from the registry and writes the report.
func TestRunScriptCapsule(t *testing.T) {
	t.Parallel() // its own gateway or CLI run, folders and ports
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	reg := filepath.Join(tmp, "registry")
	os.MkdirAll(home, 0o755)
	art := filepath.Join(tmp, "wordcount")
	copyDir(t, "../examples/artifacts/wordcount", art)
	os.WriteFile(filepath.Join(art, "wordcount.wasm"), guestbuild.Wasm(t, "../examples/guests/wordcount"), 0o644)
	capDir := filepath.Join(tmp, "capsule")
	os.MkdirAll(capDir, 0o755)
	data, _ := os.ReadFile("../examples/capsules/wordcount/murmur.yaml")
	os.WriteFile(filepath.Join(capDir, "murmur.yaml"), data, 0o644)
	os.WriteFile(filepath.Join(capDir, "capsule.wasm"), guestbuild.Wasm(t, "../examples/guests/wordcount-capsule"), 0o644)
	zipPath := filepath.Join(tmp, "wordcount.mur.zip")
	for _, args := range [][]string{
		{"pack", art, "--output", zipPath},
		{"publish", zipPath, "--registry", reg},
	} {
		if r := capsule(t, home, args...); r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
	}
	manifestPath := filepath.Join(capDir, "murmur.yaml")
	workRoot := filepath.Join(tmp, "work")
	r := capsule(t, home, "run", manifestPath, "--registry", reg, "--work-root", workRoot, "--task", "one two three", "--json")
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var out struct {
		SessionID                                 string `json:"session_id"`
		Capsule, Status, Result, Workdir, Records string
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if out.Status != "completed" || !strings.Contains(out.Result, "3 words") || out.Capsule != "wordcount" ||
		!strings.HasPrefix(out.SessionID, "ses_") || !strings.HasPrefix(out.Records, workRoot) {
		t.Fatalf("run --json = %+v", out)
	}
	if _, err := os.Stat(filepath.Join(capDir, "murmur.lock")); err != nil {
		t.Errorf("run did not write the lock: %v", err)
	}
	// Task from a file, and a custom workdir.
	taskFile := filepath.Join(tmp, "task.md")
	os.WriteFile(taskFile, []byte("a b"), 0o644)
	wd := filepath.Join(tmp, "wd")
	r = capsule(t, home, "run", manifestPath, "--registry", reg, "--work-root", workRoot, "--task", "@"+taskFile, "--workdir", wd)
	if r.code != 0 || !strings.Contains(r.stdout, "2 words") {
		t.Fatalf("run @file: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(wd, "out", "result.txt")); !strings.Contains(string(got), "2 words") {
		t.Errorf("workdir result = %q", got)
	}
	// A capsule whose task fails exits 1 and says why.
	os.Remove(filepath.Join(capDir, "capsule.wasm"))
	os.WriteFile(filepath.Join(capDir, "capsule.wasm"), guestbuild.Wasm(t, "../internal/testkit/testguests/script"), 0o644)
	os.Remove(filepath.Join(capDir, "murmur.lock"))
	r = capsule(t, home, "run", manifestPath, "--registry", reg, "--work-root", workRoot)
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, `no wasm tool named "echo"`) {
		t.Fatalf("failing task: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestRunAgentCapsuleAgainstReplay drives the hello example as a user would: the replay
// provider from the binary, then `caddy capsule run` of the agent capsule.
func TestRunAgentCapsuleAgainstReplay(t *testing.T) {
	t.Parallel() // its own gateway or CLI run, folders and ports
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	reg := filepath.Join(tmp, "registry")
	os.MkdirAll(home, 0o755)
	for name, src := range map[string]string{
		"anthropic-messages": "../examples/drivers/anthropic-messages",
		"wordcount":          "../examples/guests/wordcount",
	} {
		art := filepath.Join(tmp, "art-"+name)
		if name == "wordcount" {
			copyDir(t, "../examples/artifacts/wordcount", art)
		} else {
			copyDir(t, "../examples/drivers/anthropic-messages/artifact", art)
		}
		os.WriteFile(filepath.Join(art, name+".wasm"), guestbuild.Wasm(t, src), 0o644)
		zip := filepath.Join(tmp, name+".mur.zip")
		if r := capsule(t, home, "pack", art, "--output", zip); r.code != 0 {
			t.Fatalf("pack %s: %s", name, r.stderr)
		}
		if r := capsule(t, home, "publish", zip, "--registry", reg); r.code != 0 {
			t.Fatalf("publish %s: %s", name, r.stderr)
		}
	}
	zip := filepath.Join(tmp, "greeting.mur.zip")
	capsule(t, home, "pack", "../examples/artifacts/greeting", "--output", zip)
	capsule(t, home, "publish", zip, "--registry", reg)

	// The replay provider on a free port; its ready line names the address.
	ctx, cancel := context.WithCancel(context.Background())
	replayCmd := exec.CommandContext(ctx, caddyBin, "capsule", "replay", "../examples/cassettes", "--listen", "127.0.0.1:0")
	replayCmd.Env = []string{"HOME=" + home}
	stderr, _ := replayCmd.StderrPipe()
	if err := replayCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); replayCmd.Wait() }()
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil {
		t.Fatalf("replay did not start: %v", err)
	}
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("ready line: %q", line)
	}
	endpoint := strings.TrimSpace(line[i:])

	capDir := filepath.Join(tmp, "hello")
	copyDir(t, "../examples/capsules/hello", capDir)
	os.Remove(filepath.Join(capDir, "murmur.lock"))
	m, _ := os.ReadFile(filepath.Join(capDir, "murmur.yaml"))
	os.WriteFile(filepath.Join(capDir, "murmur.yaml"), []byte(strings.Replace(string(m), "http://127.0.0.1:8089", endpoint, 1)), 0o644)
	workRoot := filepath.Join(tmp, "work")
	r := capsule(t, home, "run", filepath.Join(capDir, "murmur.yaml"), "--registry", reg, "--work-root", workRoot,
		"--task", "Say hello, then count the words in: the quick brown fox", "--json")
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var out struct {
		Status, Result, Records string
	}
	json.Unmarshal([]byte(r.stdout), &out)
	if out.Status != "completed" || !strings.Contains(out.Result, "has 4 words") {
		t.Fatalf("run --json = %s", r.stdout)
	}
	trace, _ := os.ReadFile(filepath.Join(out.Records, "trace.jsonl"))
	for _, ev := range []string{"session_start", "task_start", "inference", "tool_call", "task_end", "session_end"} {
		if !strings.Contains(string(trace), `"event_type":"`+ev+`"`) {
			t.Errorf("trace lacks %s", ev)
		}
	}
	if !strings.Contains(string(trace), `"kind":"wasm"`) {
		t.Error("trace lacks the wasm tool call")
	}
	// A task the cassette does not know fails with the provider's 404 message.
	r = capsule(t, home, "run", filepath.Join(capDir, "murmur.yaml"), "--registry", reg, "--work-root", workRoot, "--task", "an unknown question")
	if r.code != 1 || !strings.Contains(r.stdout, "404") {
		t.Fatalf("cassette miss: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// recordingProvider serves the cassettes in dir as the replay provider on 127.0.0.1 for
// the test's length; requests returns the bodies of the model requests it got so far.
func recordingProvider(t *testing.T, dir string) (srv *httptest.Server, requests func() []string) {
	t.Helper()
	lib, err := replay.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		bodies []string
	)
	h := lib.Handler()
	h.OnRequest = func(_ *http.Request, body []byte) {
		mu.Lock()
		bodies = append(bodies, string(body))
		mu.Unlock()
	}
	srv = httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(bodies)
	}
}

// capsuleEnv is capsule with extra KEY=VALUE variables in the binary's environment.
func capsuleEnv(t *testing.T, home string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(caddyBin, append([]string{"capsule"}, args...)...)
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

// TestRunAgentCapsuleOpenAI is the hello run with the openai-chat driver and the
// OpenAI-format cassette, its key a sentinel from the environment: the binary exits 0
// with the cassette's answer, the trace links every event to its parent, the provider
// receives the key (checked there) and nothing the run wrote or printed holds it; with
// max_turns 1 the same task ends max_turns_reached and the binary exits 1.
func TestRunAgentCapsuleOpenAI(t *testing.T) {
	t.Parallel() // its own gateway or CLI run, folders and ports
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	reg := filepath.Join(tmp, "registry")
	os.MkdirAll(home, 0o755)
	for name, src := range map[string][2]string{
		"openai-chat": {"../examples/drivers/openai-chat/artifact", "../examples/drivers/openai-chat"},
		"wordcount":   {"../examples/artifacts/wordcount", "../examples/guests/wordcount"},
		"greeting":    {"../examples/artifacts/greeting", ""},
	} {
		art := filepath.Join(tmp, "art-"+name)
		copyDir(t, src[0], art)
		if src[1] != "" {
			os.WriteFile(filepath.Join(art, name+".wasm"), guestbuild.Wasm(t, src[1]), 0o644)
		}
		zip := filepath.Join(tmp, name+".mur.zip")
		for _, args := range [][]string{{"pack", art, "--output", zip}, {"publish", zip, "--registry", reg}} {
			if r := capsule(t, home, args...); r.code != 0 {
				t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
			}
		}
	}

	// The replay provider in this process, serving the example cassettes, so the key it
	// receives can be checked.
	lib, err := replay.Load("../examples/cassettes")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		auth []string
	)
	h := lib.Handler()
	h.OnRequest = func(r *http.Request, _ []byte) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	key := make([]byte, 8)
	rand.Read(key)
	sentinel := "sk-test-SENTINEL-" + hex.EncodeToString(key)
	hello, _ := os.ReadFile("../examples/capsules/hello/murmur.yaml")
	yaml := string(hello)
	for _, r := range [][2]string{
		{"anthropic-messages", "openai-chat"},
		{"endpoint: http://127.0.0.1:8089", "endpoint: " + srv.URL + "\n      api_key: ${TEST_KEY}"},
		{"model: claude-sonnet-4-5", "model: gpt-4o-mini"},
	} {
		if !strings.Contains(yaml, r[0]) {
			t.Fatalf("the hello manifest no longer has %q", r[0])
		}
		yaml = strings.ReplaceAll(yaml, r[0], r[1])
	}
	writeCapsule := func(name, yaml string) string {
		dir := filepath.Join(tmp, name)
		copyDir(t, "../examples/capsules/hello", dir)
		os.Remove(filepath.Join(dir, "murmur.lock"))
		os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte(yaml), 0o644)
		return filepath.Join(dir, "murmur.yaml")
	}
	const (
		task  = "Say hello, then count the words in: the quick brown fox"
		final = `Hello, I'm hello. "the quick brown fox" has 4 words.`
	)
	workRoot := filepath.Join(tmp, "work")
	env := []string{"TEST_KEY=" + sentinel}
	noKey := func(what, s string) {
		if strings.Contains(s, sentinel) {
			t.Errorf("the key is in %s", what)
		}
	}

	r := capsuleEnv(t, home, env, "run", writeCapsule("hello-openai", yaml), "--registry", reg, "--work-root", workRoot, "--task", task, "--json")
	noKey("stdout", r.stdout)
	noKey("stderr", r.stderr)
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var out struct {
		Status, Result, Workdir, Records string
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Status != "completed" || out.Result != final {
		t.Fatalf("run --json (%v): %s", err, r.stdout)
	}
	if got, _ := os.ReadFile(filepath.Join(out.Workdir, "out", "result.txt")); string(got) != final+"\n" {
		t.Errorf("out/result.txt = %q, want the cassette's final answer", got)
	}
	checkAgentTrace(t, filepath.Join(out.Records, "trace.jsonl"))
	mu.Lock()
	if len(auth) != 2 || auth[0] != "Bearer "+sentinel || auth[1] != auth[0] {
		t.Errorf("the provider saw Authorization %q, want the key as a bearer token on both turns", auth)
	}
	mu.Unlock()

	// The same task with one turn: the model still wants a tool, so the turns run out.
	short := strings.Replace(yaml, "max_turns: 5", "max_turns: 1", 1)
	r = capsuleEnv(t, home, env, "run", writeCapsule("hello-short", short), "--registry", reg, "--work-root", workRoot, "--task", task, "--json")
	noKey("stdout", r.stdout)
	noKey("stderr", r.stderr)
	if r.code != 1 {
		t.Fatalf("max_turns run: exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Status != "max_turns_reached" || !strings.HasPrefix(out.Result, "error: ") {
		t.Fatalf("max_turns run --json (%v): %s", err, r.stdout)
	}
	if got, _ := os.ReadFile(filepath.Join(out.Workdir, "out", "result.txt")); string(got) != out.Result+"\n" {
		t.Errorf("out/result.txt = %q, want %q", got, out.Result)
	}

	// Nothing either run wrote holds the key: workdirs, MURMUR.md, traces, logs.
	var files int
	filepath.WalkDir(workRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		data, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
		}
		noKey(p, string(data))
		return nil
	})
	if files < 8 { // per run at least trace.jsonl, MURMUR.md, task.md, out/result.txt
		t.Errorf("walked only %d files under %s", files, workRoot)
	}
}

// checkAgentTrace checks the trace of one hello run: every line carries the common fields,
// every parent_id names an earlier event of the right kind, and the events are those of
// two turns with a skill and a wasm tool call between them.
func checkAgentTrace(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	evtID := regexp.MustCompile(`^evt_[0-9a-f]{32}$`)
	typeOf := map[string]string{} // event_id → event_type
	var seq []string
	session := ""
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev struct {
			Type      string  `json:"event_type"`
			ID        string  `json:"event_id"`
			Parent    *string `json:"parent_id"`
			Session   string  `json:"session_id"`
			Timestamp int64   `json:"timestamp"`
			Turn      int     `json:"turn"`
			Kind      string  `json:"kind"`
			ToolName  string  `json:"tool_name"`
			State     string  `json:"state"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %d: %v: %s", i+1, err, line)
		}
		if session == "" {
			session = ev.Session
		}
		if !evtID.MatchString(ev.ID) || typeOf[ev.ID] != "" || !strings.HasPrefix(ev.Session, "ses_") || ev.Session != session || ev.Timestamp < 1e12 {
			t.Errorf("line %d: bad id, session or timestamp: %s", i+1, line)
		}
		parent := ""
		if ev.Parent != nil {
			parent = typeOf[*ev.Parent]
			if parent == "" {
				t.Errorf("line %d: parent_id %q names no earlier event", i+1, *ev.Parent)
			}
		}
		wantParent := map[string][]string{
			"session_start": {""}, "task_start": {"session_start"}, "inference": {"task_start"},
			"tool_call": {"task_start", "inference"}, "task_end": {"task_start"}, "session_end": {"session_start"},
		}[ev.Type]
		if (ev.Type == "session_start") != (ev.Parent == nil) || (wantParent != nil && !slices.Contains(wantParent, parent)) {
			t.Errorf("line %d: %s has parent %q, want one of %q", i+1, ev.Type, parent, wantParent)
		}
		typeOf[ev.ID] = ev.Type
		switch ev.Type {
		case "inference":
			seq = append(seq, fmt.Sprintf("inference %d", ev.Turn))
		case "tool_call":
			seq = append(seq, fmt.Sprintf("tool_call %s %s", ev.Kind, ev.ToolName))
		case "task_end":
			seq = append(seq, "task_end "+ev.State)
		case "session_start", "task_start", "session_end":
			seq = append(seq, ev.Type)
		}
	}
	want := []string{"session_start", "task_start", "inference 1", "tool_call skill greeting", "tool_call wasm wordcount",
		"inference 2", "task_end completed", "session_end"}
	if !slices.Equal(seq, want) {
		t.Errorf("trace events\n got %q\nwant %q", seq, want)
	}
}

// TestRunShellThroughHelper runs an agent whose model asks for a shell command with the
// real binary, as installed: the session announces the sandbox helper next to the
// binary as its wrapper (no W-SEC-004), and the command runs through it, in its own
// namespaces (hostname "capsule") when the host gives the sealed tier.
func TestRunShellThroughHelper(t *testing.T) {
	t.Parallel() // its own gateway or CLI run, folders and ports
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	reg := filepath.Join(tmp, "registry")
	os.MkdirAll(home, 0o755)
	publish(t, home, reg, "../examples/drivers/anthropic-messages/artifact", "anthropic-messages", guestbuild.Wasm(t, "../examples/drivers/anthropic-messages"))
	cassettes := filepath.Join(tmp, "cassettes")
	os.MkdirAll(cassettes, 0o755)
	os.WriteFile(filepath.Join(cassettes, "shell.json"), []byte(`{"provider": "anthropic-messages", "conversations": [{"match": "use the shell", "turns": [
 {"id": "m1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
  "content": [{"type": "tool_use", "id": "tu_1", "name": "bash", "input": {"command": "echo ran-on-$(hostname)"}}], "usage": {"input_tokens": 1, "output_tokens": 1}},
 {"id": "m2", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
  "content": [{"type": "text", "text": "done"}], "usage": {"input_tokens": 1, "output_tokens": 1}}]}]}`), 0o644)
	srv, requests := recordingProvider(t, cassettes)
	capDir := filepath.Join(tmp, "shelly")
	os.MkdirAll(capDir, 0o755)
	os.WriteFile(filepath.Join(capDir, "murmur.yaml"), []byte(`name: shelly
version: 1.0.0
artifacts:
  - name: anthropic-messages
    version: 0.2.0
    runtime: driver
    gateway:
      endpoint: `+srv.URL+`
inference:
  driver:
    artifact: anthropic-messages
  model: m
  max_turns: 3
capabilities:
  shell:
    allow: [bash]
`), 0o644)
	r := capsule(t, home, "run", filepath.Join(capDir, "murmur.yaml"), "--registry", reg, "--work-root", filepath.Join(tmp, "work"),
		"--task", "please use the shell", "--json")
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.Contains(line, "sandbox tier") {
			t.Log(line)
		}
	}
	helper := filepath.Join(filepath.Dir(caddyBin), "capsulegate-sandbox")
	if !strings.Contains(r.stderr, "wrapper "+helper+" (the sandbox helper next to the gateway)") || strings.Contains(r.stderr, "W-SEC-004") {
		t.Errorf("the helper next to the binary was not the wrapper:\n%s", r.stderr)
	}
	want := "ran-on-"
	if strings.Contains(r.stderr, "sandbox tier sealed") {
		want = "ran-on-capsule"
	}
	bodies := requests()
	if len(bodies) != 2 || !strings.Contains(bodies[1], want) || !strings.Contains(bodies[1], "Exit code: 0") {
		t.Errorf("the model did not get the command's output %q: %d requests, last %.800s", want, len(bodies), bodies[len(bodies)-1])
	}
}

// TestRunWarnsForUnhonouredKeys: a manifest writing a key this release accepts but does
// not act on still runs, and `caddy capsule run` says so on stderr with the key's stable
// code (docs/errors.md W-RUN-…); the session's bootstrap.log keeps the warning.
func TestRunWarnsForUnhonouredKeys(t *testing.T) {
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	reg := filepath.Join(tmp, "registry")
	os.MkdirAll(home, 0o755)
	art := filepath.Join(tmp, "wordcount")
	copyDir(t, "../examples/artifacts/wordcount", art)
	os.WriteFile(filepath.Join(art, "wordcount.wasm"), guestbuild.Wasm(t, "../examples/guests/wordcount"), 0o644)
	capDir := filepath.Join(tmp, "capsule")
	os.MkdirAll(capDir, 0o755)
	data, _ := os.ReadFile("../examples/capsules/wordcount/murmur.yaml")
	// An artifact's config is accepted and not yet handed to it (W-RUN-001); and the
	// run's spans go to observability.otel_endpoint, a real receiver here.
	rcv := otlptest.Start(t)
	data = bytes.Replace(data, []byte("    version: 1.1.0\n"), []byte("    version: 1.1.0\n    config: {unit: words}\n"), 1)
	data = append(data, "\nobservability:\n  otel_endpoint: "+rcv.Endpoint()+"\n"...)
	os.WriteFile(filepath.Join(capDir, "murmur.yaml"), data, 0o644)
	os.WriteFile(filepath.Join(capDir, "capsule.wasm"), guestbuild.Wasm(t, "../examples/guests/wordcount-capsule"), 0o644)
	zipPath := filepath.Join(tmp, "wordcount.mur.zip")
	for _, args := range [][]string{{"pack", art, "--output", zipPath}, {"publish", zipPath, "--registry", reg}} {
		if r := capsule(t, home, args...); r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
	}
	r := capsule(t, home, "run", filepath.Join(capDir, "murmur.yaml"), "--registry", reg, "--work-root", filepath.Join(tmp, "work"), "--task", "one two", "--json")
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "warning: runtime: W-RUN-001") || !strings.Contains(r.stderr, "config") ||
		strings.Count(r.stderr, "W-RUN-") != 1 {
		t.Errorf("stderr does not hold exactly the artifacts[].config warning:\n%s", r.stderr)
	}
	// Flushed before the command ended: the task's span is there.
	if len(otlptest.ByName(rcv.Spans(), "invoke_agent wordcount")) != 1 {
		t.Errorf("the run exported %v", rcv.Spans())
	}
	var out struct{ Status, Records string }
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Status != "completed" {
		t.Fatalf("run --json = %s (%v)", r.stdout, err)
	}
	if log, _ := os.ReadFile(filepath.Join(out.Records, "logs", "bootstrap.log")); !strings.Contains(string(log), "W-RUN-001") {
		t.Errorf("bootstrap.log = %q", log)
	}
}
