package runtime

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// barrier answers GET /<group>?wait=<duration> with "together" once two requests of the
// group are in, or with "alone" when wait passed first.
type barrier struct {
	mu     sync.Mutex
	groups map[string]chan struct{}
	count  map[string]int
}

func (b *barrier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	wait, err := time.ParseDuration(r.URL.Query().Get("wait"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	g := r.URL.Path
	if b.groups[g] == nil {
		b.groups[g] = make(chan struct{})
	}
	all := b.groups[g]
	if b.count[g]++; b.count[g] == 2 {
		close(all)
	}
	b.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-all:
		w.Write([]byte("together"))
	case <-t.C:
		b.mu.Lock()
		b.count[g]-- // gone: a later request must not count it
		b.mu.Unlock()
		w.Write([]byte("alone"))
	}
}

// TestHostedContexts: two contexts run side by side (their guests meet at a barrier only
// both can reach), each in its own session and workdir; two tasks of one context run in
// order (the second reaches the barrier only after the first gave up); session start and
// end are on each context's stream.
func TestHostedContexts(t *testing.T) {
	srv := httptest.NewServer(&barrier{groups: map[string]chan struct{}{}, count: map[string]int{}})
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	e, _ := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	h := hostGatewayCapsuleWith(t, e, "http://127.0.0.1:"+port, ServeOptions{})
	defer h.Close()

	runPair := func(ctxA, ctxB, group, wait string) [2]TaskOutcome {
		var outs [2]TaskOutcome
		var wg sync.WaitGroup
		for i, c := range []string{ctxA, ctxB} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i] = h.RunTask(context.Background(), TaskRequest{ContextID: c, Text: "barrier " + srv.URL + "/" + group + "?wait=" + wait})
			}()
		}
		wg.Wait()
		return outs
	}

	side := runPair("ctx_a", "ctx_b", "side", "60s")
	for _, out := range side {
		if out.State != StateCompleted || !strings.HasPrefix(out.Result, "together") {
			t.Fatalf("contexts did not run side by side: %+v", out)
		}
	}
	if side[0].Session == side[1].Session || side[0].Layout.Work == side[1].Layout.Work {
		t.Errorf("two contexts share a session or workdir: %s %s", side[0].Layout.Work, side[1].Layout.Work)
	}
	// A correct run always answers alone twice; a context running both at once would
	// meet itself at the barrier.
	order := runPair("ctx_c", "ctx_c", "order", "300ms")
	for _, out := range order {
		if out.State != StateCompleted || !strings.HasPrefix(out.Result, "alone") {
			t.Fatalf("two tasks of one context ran at once: %+v", out)
		}
	}
	if order[0].Session != order[1].Session {
		t.Errorf("one context ran in two sessions: %s %s", order[0].Session, order[1].Session)
	}
	if n := h.Contexts(); n != 3 {
		t.Errorf("%d contexts open, want 3", n)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	trace, err := os.ReadFile(filepath.Join(order[0].Layout.Root, "trace.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(trace)), "\n")
	var kinds []string
	for _, l := range lines {
		for _, k := range []string{"session_start", "task_start", "task_end", "session_end"} {
			if strings.Contains(l, `"event_type":"`+k+`"`) {
				kinds = append(kinds, k)
			}
		}
	}
	want := "session_start task_start task_end task_start task_end session_end"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("context trace: %s\nwant %s", got, want)
	}
	if !strings.Contains(lines[0], `"context_id":"ctx_c"`) {
		t.Errorf("session_start does not name its context: %s", lines[0])
	}
}

// TestContextIdleAndEviction: an idle context's session ends after ContextIdle; beyond
// MaxContexts the least recently used idle context ends to make room.
func TestContextIdleAndEviction(t *testing.T) {
	e, _ := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	ended := make(chan string, 8)
	h := hostGatewayCapsuleWith(t, e, "", ServeOptions{MaxContexts: 2, ContextIdle: time.Hour, Session: SessionConfig{Sinks: []Sink{endSink(ended)}}})
	defer h.Close()
	for _, c := range []string{"ctx_1", "ctx_2", "ctx_3"} {
		if out := h.RunTask(context.Background(), TaskRequest{ContextID: c, Text: "hi"}); out.State != StateCompleted {
			t.Fatalf("%s: %+v", c, out)
		}
	}
	if id := recvString(t, ended); id != "ses" {
		t.Fatalf("ended %q", id)
	}
	if n := h.Contexts(); n != 2 {
		t.Errorf("%d contexts open after eviction, want 2", n)
	}

	h2 := hostGatewayCapsuleWith(t, e, "", ServeOptions{ContextIdle: time.Millisecond, Session: SessionConfig{Sinks: []Sink{endSink(ended)}}})
	defer h2.Close()
	h2.RunTask(context.Background(), TaskRequest{ContextID: "ctx_idle", Text: "hi"})
	recvString(t, ended) // the idle timer ended it; it was forgotten before its session_end
	if n := h2.Contexts(); n != 0 {
		t.Errorf("%d contexts open after the idle timeout", n)
	}
}

// endSink reports every session_end it sees.
type endSink chan string

func (s endSink) Event(e *Event) error {
	if e.Type == EventSessionEnd {
		s <- "ses"
	}
	return nil
}

func recvString(t *testing.T, c <-chan string) string {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(time.Minute):
		t.Fatal("timed out")
		return ""
	}
}

// TestContextIDIsData: a client's context id never becomes a path: the session's folder
// is named by a digest of it (contextFolder).
func TestContextIDIsData(t *testing.T) {
	e, _ := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	h := hostGatewayCapsuleWith(t, e, "", ServeOptions{})
	defer h.Close()
	out := h.RunTask(context.Background(), TaskRequest{ContextID: "../../../escape", Text: "hi"})
	if out.State != StateCompleted {
		t.Fatalf("%+v", out)
	}
	if base := filepath.Base(out.Layout.Root); base != contextFolder("../../../escape") || len(base) != len("ctx_")+32 || strings.Contains(out.Layout.Root, "escape") {
		t.Errorf("the session lives at %s", out.Layout.Root)
	}
}

// TestContextsArePerPrincipal: one context id used by two principals is two sessions;
// the same principal's second task joins its own.
func TestContextsArePerPrincipal(t *testing.T) {
	e, _ := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	h := hostGatewayCapsuleWith(t, e, "", ServeOptions{})
	defer h.Close()
	run := func(principal string) TaskOutcome {
		out := h.RunTask(context.Background(), TaskRequest{ContextID: "shared", Principal: principal, Text: "hi"})
		if out.State != StateCompleted {
			t.Fatalf("%q: %+v", principal, out)
		}
		return out
	}
	a, b, a2, anon := run("team-a"), run("team-b"), run("team-a"), run("")
	if a.Session == b.Session || a.Session == anon.Session || b.Session == anon.Session {
		t.Errorf("principals shared a session: a %s, b %s, anonymous %s", a.Session, b.Session, anon.Session)
	}
	if a.Session != a2.Session {
		t.Errorf("one principal's context ran in two sessions: %s %s", a.Session, a2.Session)
	}
	if n := h.Contexts(); n != 3 {
		t.Errorf("%d contexts, want 3", n)
	}
}

// TestContextFolderOutlivesSessions: every session of one context opens the context's
// folder — here after the capsule closed and was served again, as in a reload or a
// restart — so a file a task left in the workdir is there for the next task, under
// a new session id; another context, or the same id of another principal, has its own.
func TestContextFolderOutlivesSessions(t *testing.T) {
	e, _ := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	h := hostGatewayCapsuleWith(t, e, "", ServeOptions{})
	first := h.RunTask(context.Background(), TaskRequest{ContextID: "ctx_keep", Text: "hi"})
	if first.State != StateCompleted {
		t.Fatalf("%+v", first)
	}
	if err := os.WriteFile(filepath.Join(first.Layout.Work, "kept.txt"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := e.Serve(context.Background(), h.staged.Manifest, h.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	for _, tt := range []struct {
		name, principal, contextID string
		same                       bool
	}{
		{"same context", "", "ctx_keep", true},
		{"another context", "", "ctx_other", false},
		{"another principal", "team-b", "ctx_keep", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := again.RunTask(context.Background(), TaskRequest{Principal: tt.principal, ContextID: tt.contextID, Text: "hi"})
			if out.State != StateCompleted || out.Session == first.Session {
				t.Fatalf("%+v (the first session was %s)", out, first.Session)
			}
			_, err := os.Stat(filepath.Join(out.Layout.Work, "kept.txt"))
			if got := out.Layout.Root == first.Layout.Root && err == nil; got != tt.same {
				t.Errorf("folder %s (the first %s), kept.txt: %v; want the same folder: %t", out.Layout.Root, first.Layout.Root, err, tt.same)
			}
		})
	}
}

// TestHostWritesStayInWorkdir: links a tool left in the workdir — task.md and out/
// pointing outside it, then task.md as a hard link to a file outside — never lead the
// host's own writes out: when the session ends and its task.md reaches the folder, the
// link is replaced by a file holding the last task's text; the task fails on out/ (its
// threaded result_<task>.txt) rather than write through it; the files outside are
// untouched.
func TestHostWritesStayInWorkdir(t *testing.T) {
	e, _ := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	h := hostGatewayCapsuleWith(t, e, "", ServeOptions{})
	first := h.RunTask(context.Background(), TaskRequest{ContextID: "ctx_links", Text: "hi"})
	if first.State != StateCompleted {
		t.Fatalf("%+v", first)
	}
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim.txt")
	os.WriteFile(victim, []byte("untouched"), 0o644)
	os.WriteFile(filepath.Join(outside, "result.txt"), []byte("untouched"), 0o644)
	work := first.Layout.Work
	os.Remove(filepath.Join(work, "task.md"))
	os.RemoveAll(filepath.Join(work, "out"))
	if err := os.Symlink(victim, filepath.Join(work, "task.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(work, "out")); err != nil {
		t.Fatal(err)
	}
	out := h.RunTask(context.Background(), TaskRequest{ContextID: "ctx_links", Text: "second task"})
	if out.State != StateFailed || !strings.Contains(out.Result, "escapes") {
		t.Errorf("the task over an out/ link leading outside: %s %q", out.State, out.Result)
	}
	// The session's end writes what its guests last saw to the folder.
	reopen := func() {
		t.Helper()
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		var err error
		if h, err = e.Serve(context.Background(), h.staged.Manifest, h.opts); err != nil {
			t.Fatal(err)
		}
	}
	reopen()
	for _, name := range []string{"victim.txt", "result.txt"} {
		if data, err := os.ReadFile(filepath.Join(outside, name)); err != nil || string(data) != "untouched" {
			t.Errorf("%s outside the workdir: %q %v", name, data, err)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 2 {
		t.Errorf("%d files outside the workdir, want the 2 planted", len(entries))
	}
	fi, err := os.Lstat(filepath.Join(work, "task.md"))
	if data, _ := os.ReadFile(filepath.Join(work, "task.md")); err != nil || !fi.Mode().IsRegular() || string(data) != "second task" {
		t.Errorf("task.md after the session: %v %v %q", fi, err, data)
	}
	// A hard link to a file outside, at task.md, is replaced, not written through.
	os.Remove(filepath.Join(work, "out"))
	os.Mkdir(filepath.Join(work, "out"), 0o755)
	os.Remove(filepath.Join(work, "task.md"))
	if err := os.Link(victim, filepath.Join(work, "task.md")); err != nil {
		t.Fatal(err)
	}
	if out := h.RunTask(context.Background(), TaskRequest{ContextID: "ctx_links", Text: "third task"}); out.State != StateCompleted {
		t.Errorf("the task over a hard-linked task.md: %s %q", out.State, out.Result)
	}
	reopen()
	defer h.Close()
	if data, err := os.ReadFile(victim); err != nil || string(data) != "untouched" {
		t.Errorf("the hard-linked file outside: %q %v", data, err)
	}
	if data, _ := os.ReadFile(filepath.Join(work, "task.md")); string(data) != "third task" {
		t.Errorf("task.md after the third session: %q", data)
	}
}

// TestContextFolderGetsNoTaskFiles: a gateway context's session that starts no subprocess
// leaves no task.md, out/result.txt, out/ or MURMUR.md in its folder when it ends (their text and answer
// are the task's records), where a run's own folder gets both (TestRunOnceScriptCapsule).
func TestContextFolderGetsNoTaskFiles(t *testing.T) {
	e, _ := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	// Not threaded: a threaded capsule keeps each answer in out/result_<task>.txt.
	h := hostGatewayCapsuleLife(t, e, "", "{conversation: stateless}", ServeOptions{})
	out := h.RunTask(context.Background(), TaskRequest{ContextID: "ctx_quiet", Text: "count these words"})
	if out.State != StateCompleted {
		t.Fatalf("%+v", out)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	// Nor its out/, nor the workdir itself: the answer was served from memory, and nothing
	// else needed the folder.
	for _, name := range []string{"task.md", "out/result.txt", "out", "MURMUR.md", "."} {
		if _, err := os.Lstat(filepath.Join(out.Layout.Work, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s in the context's folder after its session: %v, want none", name, err)
		}
	}
	if _, err := os.Stat(out.Layout.Trace); err != nil {
		t.Errorf("the context's trace: %v", err)
	}
	// A guest that looks in the folder finds what it holds for guests, MURMUR.md naming
	// the capsule URL of the task, and out/.
	const url = "http://gw.example/quiet/"
	h, err := e.Serve(context.Background(), h.staged.Manifest, h.opts)
	if err != nil {
		t.Fatal(err)
	}
	look := h.RunTask(context.Background(), TaskRequest{ContextID: "ctx_quiet", Text: "read MURMUR.md", CapsuleURL: url})
	defer h.Close()
	if look.State != StateCompleted || !strings.Contains(look.Result, "- Capsule URL: "+url+"\n") {
		t.Fatalf("the guest reading MURMUR.md: %s %q", look.State, look.Result)
	}
	if fi, err := os.Stat(filepath.Join(look.Layout.Work, "MURMUR.md")); err != nil || fi.Mode().Perm() != 0o444 {
		t.Errorf("MURMUR.md once a guest looked: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(look.Layout.Work, "out")); err != nil || !fi.IsDir() {
		t.Errorf("out/ once a guest looked: %v %v", fi, err)
	}
}
