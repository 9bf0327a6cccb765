package escape

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// Part rows send a task's message parts to a capsule served by the real runtime (a
// script capsule, runtime.Serve), as the gateway hands them on: files whose names try to
// land outside the task's in/ folder, and file URIs the runtime would fetch for the
// capsule (FetchFile) aimed where its network grant does not reach. Sentinels: every file
// the runtime writes must be under the session's work/in/, nothing may appear beside the
// work root, and the network sentinel must never be reached.

type partsFixture struct {
	hosted   *runtime.Hosted
	root     string // holds the work root alone
	workRoot string
}

func (s *suite) partsFix(t *testing.T) *partsFixture {
	if s.parts != nil {
		return s.parts
	}
	n := s.netFix(t)
	ctx := context.Background()
	rt, err := runtime.New(ctx, wasm.WithCacheDir(guestbuild.WazeroCache()))
	if err != nil {
		t.Fatal(err)
	}
	s.top.Cleanup(func() { rt.Close(ctx) })
	base := s.top.TempDir()
	dir := filepath.Join(base, "capsule")
	os.MkdirAll(dir, 0o755)
	// The capsule may reach the allowed server only: the sentinel is loopback too, on
	// another port.
	os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte(fmt.Sprintf(`name: escape-parts
version: 1.0.0
capabilities:
  network: {allow: ["http://127.0.0.1:%s"]}
  limits: {memory_bytes: 134217728, deadline_seconds: 60}
`, n.allowedPort)), 0o644)
	os.WriteFile(filepath.Join(dir, "capsule.wasm"), guestbuild.Wasm(t, "../testguests/lister"), 0o644)
	m, err := manifest.Load(filepath.Join(dir, "murmur.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f := &partsFixture{root: filepath.Join(base, "sessions")}
	f.workRoot = filepath.Join(f.root, "work")
	os.MkdirAll(f.workRoot, 0o755)
	f.hosted, err = rt.Serve(ctx, m, runtime.ServeOptions{Registry: registry.NewLocal(filepath.Join(base, "reg")), Session: runtime.SessionConfig{WorkRoot: f.workRoot}})
	if err != nil {
		t.Fatal(err)
	}
	s.top.Cleanup(func() { f.hosted.Close() })
	s.parts = f
	return f
}

// fileNameAttack sends a file part named name to the lister capsule and classifies
// where its guest found it: "in/<file>". A copy anywhere else in the guest's "/", or on
// disk outside the session's work/in/, or anything new beside the work root, is an
// escape.
func fileNameAttack(name string) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		f := s.partsFix(t)
		payload := fmt.Sprintf("PAYLOAD-%d", len(name))
		out := f.hosted.RunTask(context.Background(), runtime.TaskRequest{Text: "", MessageID: "m-parts",
			Parts: []runtime.Part{{Kind: "file", Name: name, Bytes: []byte(payload + "\n")}}})
		var where, escaped []string
		for line := range strings.Lines(out.Result) {
			p, content, _ := strings.Cut(strings.TrimSpace(line), " ")
			if content != payload || p == "in/message.json" {
				continue
			}
			if strings.HasPrefix(p, "in/") && !strings.Contains(p[3:], "/") {
				where = append(where, p)
			} else {
				escaped = append(escaped, "the guest found the file at /"+p)
			}
		}
		filepath.WalkDir(f.root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(p)
			if !strings.HasPrefix(string(b), payload) {
				return nil
			}
			rel, _ := filepath.Rel(f.workRoot, p)
			if parts := strings.Split(rel, string(filepath.Separator)); len(parts) != 5 || parts[2] != "work" || parts[3] != "in" {
				escaped = append(escaped, "the file landed on disk at "+rel)
			}
			return nil
		})
		if ents, _ := os.ReadDir(f.root); len(ents) != 1 {
			escaped = append(escaped, fmt.Sprintf("the folder holding the work root now holds %d entries", len(ents)))
		}
		if out.State != runtime.StateCompleted {
			return outcome{class: "task " + out.State + ": " + out.Result, escaped: strings.Join(escaped, "; ")}
		}
		slices.Sort(where)
		class := strings.Join(where, " ")
		if class == "" {
			class = "not found"
		}
		return outcome{class: class, escaped: strings.Join(escaped, "; ")}
	}
}

// fileURIAttack asks the runtime to fetch a message's file from url for the capsule and
// classifies the refusal; the network sentinel must not be reached, whatever the class.
func fileURIAttack(url string) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		f := s.partsFix(t)
		n := s.netFix(t)
		url = strings.NewReplacer("{sentinel}", n.sentinelPort, "{allowed}", n.allowedPort).Replace(url)
		hits := n.sentinelHits.Load()
		data, _, err := f.hosted.FetchFile(context.Background(), url, 1<<20)
		class := "fetched"
		switch {
		case err == nil:
		case strings.Contains(err.Error(), "not in capabilities.network.allow"):
			class = "refused: not allowed"
		case strings.Contains(err.Error(), "answered HTTP 302"):
			class = "refused: redirect not followed"
		case strings.Contains(err.Error(), "userinfo is not allowed"):
			class = "refused: credentials in the URL"
		case strings.Contains(err.Error(), "http or https"), strings.Contains(err.Error(), "absolute http"):
			class = "refused: not an http(s) URL"
		default:
			class = "refused: " + err.Error()
		}
		escaped := leaked(string(data))
		if got := n.sentinelHits.Load(); got != hits {
			escaped = join(escaped, fmt.Sprintf("the sentinel server was reached %d times", got-hits))
		}
		return outcome{class: class, escaped: escaped}
	}
}

func partsRows() []row {
	names := []struct{ attack, name, want string }{
		{"a file named ../../../../etc/passwd", "../../../../etc/passwd", "in/0-passwd"},
		{"a file named with an absolute path", "/etc/cron.d/evil", "in/0-evil"},
		{"a file named with Windows separators", `..\..\..\windows\system32\evil.dll`, "in/0-evil.dll"},
		{"a file named ..", "..", "in/0-file"},
		{"a file named with a NUL byte", "ok.txt\x00/../../evil", "in/0-evil"},
		{"a file named with a newline and a shell escape", "a\n$(reboot)`id`.txt", "in/0-a___reboot__id_.txt"},
		{"a hidden file (.bashrc)", ".bashrc", "in/0-bashrc"},
		{"a file named by Unicode look-alikes of ../", "\u2025\u2215\u2025\u2215etc\u2215passwd", "in/0-____etc_passwd"},
		{"a file name of 4096 bytes", strings.Repeat("a", 4096) + ".txt", "in/0-" + strings.Repeat("a", 96) + ".txt"},
		{"a file with no name", "", "in/0-file"},
	}
	var rows []row
	for i, c := range names {
		rows = append(rows, row{id: fmt.Sprintf("PT-%02d", i+1), surface: A2AParts, attack: c.attack, want: c.want, run: fileNameAttack(c.name)})
	}
	fetches := []struct{ attack, url, want string }{
		{"a file URI on loopback the grant does not name (the network sentinel)", "http://127.0.0.1:{sentinel}/secret", "refused: not allowed"},
		{"a file URI at the cloud metadata address", "http://169.254.169.254/latest/meta-data/", "refused: not allowed"},
		{"a file URI on localhost by name, the sentinel's port", "http://localhost:{sentinel}/", "refused: not allowed"},
		{"a file URI on the granted host that redirects to the sentinel", "http://127.0.0.1:{allowed}/redirect", "refused: redirect not followed"},
		{"a file:// URI", "file:///etc/passwd", "refused: not an http(s) URL"},
		{"a gopher:// URI", "gopher://127.0.0.1:{allowed}/", "refused: not an http(s) URL"},
		{"a file URI with credentials", "http://user:pw@127.0.0.1:{sentinel}/", "refused: credentials in the URL"},
	}
	for i, c := range fetches {
		rows = append(rows, row{id: fmt.Sprintf("PT-%02d", len(names)+i+1), surface: A2AParts, attack: c.attack, want: c.want, run: fileURIAttack(c.url)})
	}
	return rows
}
