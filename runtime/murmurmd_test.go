package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
)

// packed returns a resolved artifact whose archive holds murmur.yaml and file.
func packed(t *testing.T, yaml, file string) registry.Resolved {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(file)), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"murmur.yaml": yaml, file: "payload"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data, am, err := registry.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := registry.OpenArchive(data)
	if err != nil {
		t.Fatal(err)
	}
	return registry.Resolved{Name: am.Name, Version: am.Version, Role: am.Runtime, Archive: a}
}

// TestMurmurMD: MURMUR.md holds the capsule URL, the model, the context budget and whether
// compaction is on, and every tool offered with its kind, for each capsule shape.
func TestMurmurMD(t *testing.T) {
	wasmTool := packed(t, "name: wordcount\nversion: 1.0.0\nruntime: tool\ndescription: |\n  Counts words.\n  # Not a heading `x`\n", "wordcount.wasm")
	nativeTool := packed(t, "name: fixture\nversion: 0.1.0\nruntime: tool\nimplementation: native\ndescription: Creates directories.\n", "bin/fixture")
	skill := packed(t, "name: tone\nversion: 1.0.0\nruntime: skill\ndescription: How to sound.\n", "skill.md")
	bare := packed(t, "name: bare\nversion: 1.0.0\nruntime: skill\n", "skill.md")
	agent := func(shell ...string) *manifest.Manifest {
		m := &manifest.Manifest{Name: "seed", Version: "2.0.0", Inference: &manifest.Inference{Model: "claude-sonnet-4-5"}}
		m.Capabilities.Shell.Allow = shell
		return m
	}
	budget := agent()
	budget.Context = &manifest.ContextConfig{MaxTokens: 120000}
	compacting := agent()
	compacting.Context = &manifest.ContextConfig{MaxTokens: 64000}
	compacting.Inference.Compaction = &manifest.Compaction{Threshold: 0.9}
	noModel := agent()
	noModel.Inference.Model = ""
	for _, tc := range []struct {
		name      string
		staged    *Staged
		url       string
		want, not []string
	}{
		{"agent, no tools, capsule run", &Staged{Manifest: agent()}, "", []string{
			"# MURMUR.md: seed 2.0.0\n", "- Session: ses_x\n", "- Capsule URL: none (not served over A2A)\n",
			"- Model: claude-sonnet-4-5\n", "- Context budget: not set (compaction off)\n", "## Tools\n\n- none\n",
			"through the tool-calling interface"}, []string{"tool-registry"}},
		{"agent in the gateway", &Staged{Manifest: budget}, "https://agents.example.com/agents/seed/", []string{
			"- Capsule URL: https://agents.example.com/agents/seed/\n",
			"- Context budget: 120000 tokens (compaction on: the conversation is summarised once a turn's input reaches 117600 tokens)\n"}, nil},
		{"compaction configured", &Staged{Manifest: compacting}, "", []string{
			"- Context budget: 64000 tokens (compaction on: the conversation is summarised once a turn's input reaches 57600 tokens)\n"}, nil},
		{"model left to the driver", &Staged{Manifest: noModel}, "", []string{"- Model: the driver's default\n"}, nil},
		{"every kind", &Staged{Manifest: agent("bash", "git", "fixture"), Artifacts: []registry.Resolved{wasmTool, nativeTool, skill, bare}}, "", []string{
			"- `bare` (skill) guidance (call by name to load guidance)\n",
			"- `bash` (shell) runs bash in the workdir: pass a whole script in `command`; the interpreter runs it\n",
			"- `fixture` (native) Creates directories.\n",
			"- `git` (shell) runs git in the workdir: pass its arguments (not the binary's name) in `command`; no shell\n",
			"- `tone` (skill) How to sound. (call by name to load guidance)\n",
			"- `wordcount` (wasm) Counts words. # Not a heading x\n"},
			[]string{"(shell) runs fixture", "\n# Not", "- none"}},
		{"script capsule", &Staged{Manifest: &manifest.Manifest{Name: "script", Version: "1.0.0"}, Artifacts: []registry.Resolved{wasmTool, nativeTool, skill}}, "", []string{
			"- Model: none (a script capsule: its own module drives the tools)\n",
			"## Tools\n\n- `wordcount` (wasm) Counts words. # Not a heading x\n\n",
			"murmur:tool-registry/invoke"}, []string{"`tone`", "`fixture`", "tool-calling interface"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(murmurMD(tc.staged, "ses_x", tc.url))
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in\n%s", w, got)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("holds %q:\n%s", n, got)
				}
			}
		})
	}
}

// TestWriteMurmurMD: MURMUR.md is written read-only and rewritten over itself (as when
// the gateway learns the capsule URL), leaving no temporary file.
func TestWriteMurmurMD(t *testing.T) {
	work := t.TempDir()
	s := &Staged{Manifest: &manifest.Manifest{Name: "seed", Version: "1.0.0", Inference: &manifest.Inference{}}}
	// Created in place in a new workdir, then rewritten over itself.
	for i, url := range []string{"", "https://a.example/x/"} {
		if err := writeMurmurMD(work, murmurMD(s, "ses_x", url), i == 0); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(filepath.Join(work, "MURMUR.md")); err != nil || fi.Mode().Perm() != 0o444 {
			t.Fatalf("MURMUR.md after write %d: %v %v", i, fi, err)
		}
	}
	// In place only where nothing is: a leftover file is never written through.
	if err := writeMurmurMD(work, murmurMD(s, "ses_x", ""), true); err == nil {
		t.Error("MURMUR.md created in place over an existing one")
	}
	fi, err := os.Stat(filepath.Join(work, "MURMUR.md"))
	if err != nil || fi.Mode().Perm() != 0o444 {
		t.Fatalf("MURMUR.md: %v %v", fi, err)
	}
	b, _ := os.ReadFile(filepath.Join(work, "MURMUR.md"))
	if !strings.Contains(string(b), "- Capsule URL: https://a.example/x/\n") {
		t.Errorf("not rewritten:\n%s", b)
	}
	if entries, _ := os.ReadDir(work); len(entries) != 1 {
		t.Errorf("workdir holds %v", entries)
	}
}
