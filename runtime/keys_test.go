package runtime

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/wasmtest"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
)

// TestEveryManifestKeyHasAFate: every key path the parser accepts is in manifestKeys
// (it takes effect, or draws a stage warning), and manifestKeys names no key the parser
// does not accept. A key under an unhonoured mapping shares that mapping's warning.
func TestEveryManifestKeyHasAFate(t *testing.T) {
	accepted := manifest.KeyPaths()
	if len(accepted) < 50 {
		t.Fatalf("the parser lists only %d key paths", len(accepted))
	}
	for _, k := range accepted {
		if _, ok := manifestKeys[k]; !ok {
			t.Errorf("the parser accepts %q, but runtime/keys.go does not say whether it takes effect or draws a warning", k)
		}
	}
	for k, f := range manifestKeys {
		if !slices.Contains(accepted, k) {
			t.Errorf("runtime/keys.go decides the fate of %q, which the parser does not accept", k)
		}
		if f.under != "" {
			if p := manifestKeys[f.under]; !strings.HasPrefix(k, f.under+".") || p.code != f.code || p.under != "" {
				t.Errorf("%q is under %q, which is not an unhonoured mapping above it with code %s", k, f.under, f.code)
			}
		}
		if f.code != "" && f.under == "" && f.ignored == "" {
			t.Errorf("%q draws %s but does not say what happens instead", k, f.code)
		}
	}
}

// everyKey is a capsule manifest writing every key the parser accepts but two of the
// three system prompt sources (at most one may be written): variants below add each.
const everyKey = `name: every-key
version: 1.0.0
artifacts:
  - name: drv
    version: 1.0.0
    runtime: driver
    gateway: {endpoint: "https://llm.example", api_key: "k"}
  - {name: wc, version: 1.0.0, runtime: tool, config: {lang: en}}
  - {name: notes, source: notes.md, runtime: skill}
  - name: audit
    version: 1.0.0
    runtime: hook
    capabilities: {task_io: {read: true}, conversation: {read: true}, env: {allow: [LANG]}, limits: {memory_bytes: 67108864, deadline_seconds: 10}}
capabilities:
  network: {allow: [example.com, "https://peer.example"]}
  filesystem: {scope: data}
  shell: {allow: [bash], strip_env: ["FOO_*"], min_tier: env-only}
  install: {tool: ["text-*"], skill: [style]}
  env: {allow: [LANG]}
  harness: {paths: [{path: /opt/harness, access: read}]}
  limits: {memory_bytes: 134217728, deadline_seconds: 60, peer_depth: 2, peer_calls: 4}
  resources: {processes: 64, open_files: 256, file_size_bytes: 1048576, cpu_seconds: 60, address_space_bytes: 1073741824, memory_bytes: 1048576, pids: 32, cgroup_memory_bytes: 268435456, cgroup_pids_max: 256, cgroup_cpu_percent: 100, cgroup_io_bytes_per_sec: 1048576}
inference:
  transport: http
  driver: {artifact: drv, config: {temperature: 0}}
  model: m-test
  endpoint: "https://llm.example"
  api_key: "k"
  max_turns: 5
  max_tokens: 1024
  compaction: {threshold: 0.9, model: m-small, system_prompt: sum up, dump_summaries: true}
  %PROMPT%
lifecycle: {task_acceptance: queue, after_task: sleep, queue_depth: 2, input_timeout_secs: 60, conversation: threaded, max_task_reopens: 2}
context: {max_tokens: 100000}
trace: {capture: content}
observability: {otel_endpoint: "https://otel.example"}
a2a:
  input_modes: [application/pdf]
  output_modes: [image/png]
  max_file_bytes: 1024
  max_message_bytes: 2048
  outputs: [{file: report.pdf, name: report, description: the report, media_type: application/pdf, as: file}]
peers: [{name: summarizer, url: "https://peer.example/agents/s/", description: summarises}]
exports: {peer_tasks: {accept: true}}
`

// TestStageWarnsForEveryUnhonouredKey stages manifests that together write every key
// the parser accepts, and checks that each draws no warning for the keys that take
// effect and exactly one for each that does not; hook artifacts, which run, draw none.
func TestStageWarnsForEveryUnhonouredKey(t *testing.T) {
	e, _ := newRuntime(t)
	reg := registry.NewLocal(filepath.Join(t.TempDir(), "reg"))
	run := toolModule("murmur:tool/run@0.1.0#run", 1)
	publishWasm(t, reg, "drv", "driver", run)
	publishWasm(t, reg, "wc", "tool", run)
	publishWasm(t, reg, "audit", "hook", wasmtest.Module{Funcs: []wasmtest.Func{{Export: "murmur:hook/lifecycle@0.9.0#on-session-end", Body: wasmtest.Nop}}, MemoryPages: 1}.Encode())
	allCodes := []string{WarnArtifactConfig, WarnAfterTask,
		WarnResourceMemory, WarnResourcePids, WarnCgroupIO}

	tests := []struct {
		name string
		doc  string
		want []string // warning codes, in order
	}{
		{"every key, inline prompt", strings.Replace(everyKey, "%PROMPT%", "system_prompt: be brief", 1), allCodes},
		{"every key, prompt file", strings.Replace(everyKey, "%PROMPT%", "system_prompt_file: prompt.md", 1), allCodes},
		{"every key, prompt skill", strings.Replace(everyKey, "%PROMPT%", "system_prompt_artifact: notes", 1), allCodes},
		{"only honoured keys", `name: plain
version: 1.0.0
artifacts:
  - {name: drv, version: 1.0.0, runtime: driver, gateway: {endpoint: "https://llm.example", api_key: "k"}}
  - {name: wc, version: 1.0.0, init_snapshot: never}
inference: {driver: {artifact: drv}, model: m-test}
trace: {capture: meta}
`, nil},
		{"config on two artifacts is one warning", `name: two
version: 1.0.0
artifacts:
  - {name: drv, version: 1.0.0, runtime: driver, config: {a: 1}, gateway: {endpoint: "https://llm.example"}}
  - {name: wc, version: 1.0.0, config: {b: 2}}
inference: {driver: {artifact: drv}, model: m-test}
`, []string{WarnArtifactConfig}},
	}
	written := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "notes.md"), []byte("notes"), 0o644)
			os.WriteFile(filepath.Join(dir, "prompt.md"), []byte("be brief"), 0o644)
			mpath := filepath.Join(dir, "murmur.yaml")
			os.WriteFile(mpath, []byte(tt.doc), 0o644)
			m, err := manifest.Load(mpath)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Warnings) > 0 {
				t.Fatalf("the manifest itself warns: %v", m.Warnings)
			}
			// What the fate table expects of the keys this manifest writes.
			var fromTable []string
			for _, k := range manifest.KeyPaths() {
				if len(m.Written(k)) == 0 {
					continue
				}
				written[k] = true
				if f := manifestKeys[k]; f.code != "" && !slices.Contains(fromTable, f.code) {
					fromTable = append(fromTable, f.code)
				}
			}
			slices.Sort(fromTable)
			staged, err := e.Stage(context.Background(), m, StageOptions{Registry: reg})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range staged.Warnings {
				got = append(got, w.Code)
				if w.Pos == "" || !strings.HasPrefix(w.Pos, mpath+":") || w.Path == "" || !strings.Contains(w.Msg, laterRelease) {
					t.Errorf("warning %s does not say where and until when: %v", w.Code, w)
				}
			}
			if !slices.Equal(got, tt.want) || !slices.Equal(got, fromTable) {
				t.Errorf("warnings %v, want %v (the fate table says %v)", got, tt.want, fromTable)
			}
		})
	}
	for _, k := range manifest.KeyPaths() {
		if !written[k] {
			t.Errorf("no manifest of this test writes %q: add it, so its fate is checked", k)
		}
	}
}
