package manifest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
)

func env(vars map[string]string) Option {
	return WithLookupEnv(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
}

const base = "name: hello\nversion: 1.0.0\n"

// TestRules holds one row per validation rule of docs/reference/manifest.md: the
// manifest, the code it must be refused with, and where (line:col).
func TestRules(t *testing.T) {
	tests := []struct {
		name, yaml, code, at string
	}{
		{"syntax", "name: [unclosed\n", CodeSyntax, ":1"},
		{"empty file", "", CodeSyntax, ""},
		{"top level not a mapping", "- a\n- b\n", CodeType, ":1:1"},
		{"missing name", "version: 1.0.0\n", CodeMissing, ":1:1"},
		{"missing version", "name: hello\n", CodeMissing, ":1:1"},
		{"name uppercase", "name: Hello\nversion: 1\n", CodeName, ":1:7"},
		{"name leading dash", "name: -hello\nversion: 1\n", CodeName, ":1:7"},
		{"name trailing dash", "name: hello-\nversion: 1\n", CodeName, ":1:7"},
		{"name underscore", "name: hel_lo\nversion: 1\n", CodeName, ":1:7"},
		{"name too long", "name: " + strings.Repeat("a", 101) + "\nversion: 1\n", CodeName, ":1:7"},
		{"version latest", "name: hello\nversion: latest\n", CodeReservedVersion, ":2:10"},
		{"version stable", "name: hello\nversion: stable\n", CodeReservedVersion, ":2:10"},
		{"version edge", "name: hello\nversion: edge\n", CodeReservedVersion, ":2:10"},
		{"wrong type name", "name: [a]\nversion: 1\n", CodeType, ":1:7"},
		{"wrong type artifacts", base + "artifacts: {a: b}\n", CodeType, ":3:12"},
		{"wrong type int", base + "capabilities:\n  limits:\n    memory_bytes: lots\n", CodeType, ":5:19"},
		{"wrong type bool-ish int", base + "inference:\n  driver: {artifact: d}\n  model: m\n  max_turns: 1.5\n", CodeType, ":6:14"},
		{"duplicate key", base + "name: again\n", CodeDuplicateKey, ":3:1"},
		{"unset env", "name: hello\nversion: ${CAPSULE_VERSION_UNSET}\n", CodeUnsetEnv, ":2:10"},
		{"lowercase env", "name: hello\nversion: ${lower}\n", CodeInterpSyntax, ":2:10"},
		{"unterminated env", "name: hello\nversion: \"${OPEN\"\n", CodeInterpSyntax, ":2:10"},
		{"artifact name", base + "artifacts:\n  - {name: Echo, version: 1.0.0}\n", CodeName, ":4:12"},
		{"artifact missing name", base + "artifacts:\n  - {version: 1.0.0}\n", CodeMissing, ":4:5"},
		{"artifact missing version", base + "artifacts:\n  - name: echo\n", CodeVersion, ":4:5"},
		{"artifact reserved version", base + "artifacts:\n  - {name: echo, version: latest}\n", CodeReservedVersion, ":4:27"},
		{"artifact version path", base + "artifacts:\n  - {name: echo, version: ../1}\n", CodeVersion, ":4:27"},
		{"artifact duplicate", base + "artifacts:\n  - {name: echo, version: 1.0.0}\n  - {name: echo, version: 2.0.0}\n", CodeDuplicateArt, ":5:12"},
		{"artifact runtime", base + "artifacts:\n  - {name: echo, version: 1.0.0, runtime: plugin}\n", CodeEnum, ":4:43"},
		{"source on tool", base + "artifacts:\n  - {name: echo, source: ./echo}\n", CodeSourceRole, ":4:26"},
		{"source and version", base + "artifacts:\n  - {name: s, runtime: skill, source: ./s, version: 1.0.0}\n", CodeSourceRole, ":4:53"},
		{"source absolute", base + "artifacts:\n  - {name: s, runtime: skill, source: /etc/s}\n", CodeSourcePath, ":4:39"},
		{"init_snapshot value", base + "artifacts:\n  - {name: echo, version: 1.0.0, init_snapshot: sometimes}\n", CodeEnum, ":4:49"},
		{"init_snapshot on skill", base + "artifacts:\n  - {name: s, runtime: skill, source: ./s, init_snapshot: never}\n", CodeSnapshotRole, ":4:59"},
		{"gateway on tool", base + "artifacts:\n  - name: echo\n    version: 1.0.0\n    gateway: {endpoint: http://x}\n", CodeGatewayRole, ":6:14"},
		{"gateway endpoint url", base + "artifacts:\n  - name: d\n    version: 1.0.0\n    runtime: driver\n    gateway: {endpoint: ftp://x}\n", CodeURL, ":7:25"},
		{"network rule path", base + "capabilities:\n  network:\n    allow:\n      - api.example.com\n      - https://x.example.com/path\n", "E-NET-", ":7:9"},
		{"scope absolute", base + "capabilities:\n  filesystem:\n    scope: /etc\n", CodeScope, ":5:12"},
		{"scope dotdot", base + "capabilities:\n  filesystem:\n    scope: data/../../x\n", CodeScope, ":5:12"},
		{"scope empty", base + "capabilities:\n  filesystem:\n    scope: \"\"\n", CodeScope, ":5:12"},
		{"shell path", base + "capabilities:\n  shell:\n    allow: [git, /bin/sh]\n", CodeShellName, ":5:18"},
		{"shell relative path", base + "capabilities:\n  shell:\n    allow: [./run]\n", CodeShellName, ":5:13"},
		{"shell empty", base + "capabilities:\n  shell:\n    allow: []\n", CodeShellEmpty, ":5:12"},
		{"strip_env glob", base + "capabilities:\n  shell:\n    strip_env: [\"A*B\"]\n", CodeStripGlob, ":5:17"},
		{"min_tier unknown", base + "capabilities:\n  shell:\n    min_tier: strong\n", CodeMinTier, ":5:15"},
		{"env credential exact", base + "capabilities:\n  env:\n    allow: [LANG, GITHUB_TOKEN]\n", CodeCredentialEnv, ":5:19"},
		{"env credential glob", base + "capabilities:\n  env:\n    allow: [MY_SERVICE_API_KEY]\n", CodeCredentialEnv, ":5:13"},
		{"env credential aws", base + "capabilities:\n  env:\n    allow: [AWS_REGION]\n", CodeCredentialEnv, ":5:13"},
		{"env credential strip_env", base + "capabilities:\n  shell:\n    strip_env: [CORP_*]\n  env:\n    allow: [CORP_ID]\n", CodeCredentialEnv, ":7:13"},
		{"env name", base + "capabilities:\n  env:\n    allow: [\"MY-VAR\"]\n", CodeEnvName, ":5:13"},
		{"memory zero", base + "capabilities:\n  limits:\n    memory_bytes: 0\n", CodeLimit, ":5:19"},
		{"deadline negative", base + "capabilities:\n  limits:\n    deadline_seconds: -1\n", CodeLimit, ":5:23"},
		{"resources zero", base + "capabilities:\n  resources:\n    pids: 0\n", CodeLimit, ":5:11"},
		{"driver missing", base + "inference:\n  model: m\n", CodeMissing, ":4:3"},
		{"driver undeclared", base + "inference:\n  driver: {artifact: claude}\n  model: m\n", CodeDriverRef, ":4:22"},
		{"driver not a driver", base + "artifacts:\n  - {name: claude, version: 1.0.0}\ninference:\n  driver: {artifact: claude}\n  model: m\n", CodeDriverRef, ":6:22"},
		{"model missing", base + "artifacts:\n  - {name: d, version: 1.0.0, runtime: driver}\ninference:\n  driver: {artifact: d}\n", CodeModel, ":6:3"},
		{"harness path relative", base + "capabilities:\n  harness:\n    paths: [{path: opt/claude}]\n", CodeHarnessPath, ":5:20"},
		{"harness path unclean", base + "capabilities:\n  harness:\n    paths: [{path: /opt/../etc}]\n", CodeHarnessPath, ":5:20"},
		{"harness access", base + "capabilities:\n  harness:\n    paths: [{path: /opt, access: write}]\n", CodeEnum, ":5:34"},
		{"transport unknown", base + "artifacts:\n  - {name: d, version: 1.0.0, runtime: driver}\ninference:\n  transport: grpc\n  driver: {artifact: d}\n  model: m\n", CodeEnum, ":6:14"},
		{"two prompt sources", base + "artifacts:\n  - {name: d, version: 1.0.0, runtime: driver}\ninference:\n  driver: {artifact: d}\n  model: m\n  system_prompt: hi\n  system_prompt_file: p.md\n", CodePromptSources, ":9:23"},
		{"prompt artifact not skill", base + "artifacts:\n  - {name: d, version: 1.0.0, runtime: driver}\ninference:\n  driver: {artifact: d}\n  model: m\n  system_prompt_artifact: d\n", CodePromptArtifact, ":8:27"},
		{"prompt file absolute", base + "artifacts:\n  - {name: d, version: 1.0.0, runtime: driver}\ninference:\n  driver: {artifact: d}\n  model: m\n  system_prompt_file: /p.md\n", CodeSourcePath, ":8:23"},
		{"endpoint conflict", base + "artifacts:\n  - name: d\n    version: 1.0.0\n    runtime: driver\n    gateway: {endpoint: \"http://a\"}\ninference:\n  driver: {artifact: d}\n  model: m\n  endpoint: http://b\n", CodeEndpointConflict, ":11:13"},
		{"max_turns zero", base + "artifacts:\n  - {name: d, version: 1.0.0, runtime: driver}\ninference:\n  driver: {artifact: d}\n  model: m\n  max_turns: 0\n", CodeRange, ":8:14"},
		{"max_tokens negative", base + "artifacts:\n  - {name: d, version: 1.0.0, runtime: driver}\ninference:\n  driver: {artifact: d}\n  model: m\n  max_tokens: -5\n", CodeRange, ":8:15"},
		{"threshold over one", base + "artifacts:\n  - {name: d, version: 1.0.0, runtime: driver}\ninference:\n  driver: {artifact: d}\n  model: m\n  compaction: {threshold: 1.5}\n", CodeRange, ":8:27"},
		{"task_acceptance", base + "lifecycle:\n  task_acceptance: many\n", CodeEnum, ":4:20"},
		{"after_task", base + "lifecycle:\n  after_task: stay\n", CodeEnum, ":4:15"},
		{"conversation", base + "lifecycle:\n  conversation: forked\n", CodeEnum, ":4:17"},
		{"queue_depth zero", base + "lifecycle:\n  queue_depth: 0\n", CodeRange, ":4:16"},
		{"hook grants on a tool", base + "artifacts:\n  - name: t\n    version: 1.0.0\n    capabilities: {task_io: {read: true}}\n", CodeHookGrants, ":6:19"},
		{"hook env wider", base + "capabilities:\n  env:\n    allow: [LANG]\nartifacts:\n  - name: h\n    version: 1.0.0\n    runtime: hook\n    capabilities: {env: {allow: [LANG, TZ]}}\n", CodeHookGrants, ":10:40"},
		{"hook memory wider", base + "capabilities:\n  limits:\n    memory_bytes: 1000\nartifacts:\n  - name: h\n    version: 1.0.0\n    runtime: hook\n    capabilities: {limits: {memory_bytes: 2000}}\n", CodeHookGrants, ":10:43"},
		{"hook deadline wider", base + "artifacts:\n  - name: h\n    version: 1.0.0\n    runtime: hook\n    capabilities: {limits: {deadline_seconds: 31}}\n", CodeHookGrants, ":7:47"},
		{"input_timeout zero", base + "lifecycle:\n  input_timeout_secs: 0\n", CodeRange, ":4:23"},
		{"context max_tokens", base + "context:\n  max_tokens: 0\n", CodeRange, ":4:15"},
		{"trace capture", base + "trace:\n  capture: all\n", CodeEnum, ":4:12"},
		{"otel endpoint", base + "observability:\n  otel_endpoint: localhost:4318\n", CodeURL, ":4:18"},
		{"install tool entry", base + "capabilities:\n  install:\n    tool: [wordcount, \"a*b\"]\n", CodeInstallPattern, ":5:23"},
		{"install skill entry", base + "capabilities:\n  install:\n    skill:\n      - \"*\"\n      - Foo*\n", CodeInstallPattern, ":7:9"},
		{"install not a list", base + "capabilities:\n  install:\n    tool: wordcount\n", CodeType, ":5:11"},
		{"peer name", base + "peers:\n  - {name: Sum_1, url: \"http://127.0.0.1:9/a/\"}\n", CodePeer, ":4:12"},
		{"peer twice", base + "capabilities:\n  network: {allow: [\"127.0.0.1:9\"]}\npeers:\n  - {name: b, url: \"http://127.0.0.1:9/b/\"}\n  - {name: b, url: \"http://127.0.0.1:9/c/\"}\n", CodePeer, ":7:12"},
		{"peer url credentials", base + "peers:\n  - name: b\n    url: \"http://u:p@127.0.0.1:9/b/\"\n", CodePeer, ":5:10"},
		{"peer url scheme", base + "peers:\n  - name: b\n    url: grpc://127.0.0.1:9\n", CodePeer, ":5:10"},
		{"peer not allowed", base + "capabilities:\n  network: {allow: [\"127.0.0.1:8\"]}\npeers:\n  - name: b\n    url: \"http://127.0.0.1:9/b/\"\n", CodePeerNotAllowed, ":7:10"},
		{"peer https port", base + "capabilities:\n  network: {allow: [\"http://peer.example\"]}\npeers:\n  - name: b\n    url: https://peer.example/b/\n", CodePeerNotAllowed, ":7:10"},
		{"peer_depth zero", base + "capabilities:\n  limits:\n    peer_depth: 0\n", CodeLimit, ":5:17"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "murmur.yaml", env(nil))
			if err == nil {
				t.Fatalf("accepted; want %s", tt.code)
			}
			var hit *errs.Error
			for _, e := range err.(errs.List) {
				if strings.HasPrefix(e.Code, tt.code) {
					hit = e
					break
				}
			}
			if hit == nil {
				t.Fatalf("want code %s, got:\n%v", tt.code, err)
			}
			if want := "murmur.yaml" + tt.at; hit.Pos != want {
				t.Errorf("position = %q, want %q (%v)", hit.Pos, want, hit)
			}
			if hit.Msg == "" || (hit.Fix == "" && !strings.HasPrefix(hit.Code, "E-NET")) {
				t.Errorf("error lacks message or fix: %v", hit)
			}
		})
	}
}

func TestValidManifestDefaults(t *testing.T) {
	src := `
name: hello
version: 1.0.0
artifacts:
  - name: claude
    version: "0.1.0"
    runtime: driver
  - name: greeting
    runtime: skill
    source: ./skills/greeting
  - name: echo
    version: 1.0.0
inference:
  driver: {artifact: claude}
  model: ${MODEL}
  endpoint: http://127.0.0.1:9999
  api_key: ${ANTHROPIC_API_KEY}
capabilities:
  network:
    allow: [api.example.com, "https://*.example.org"]
  env:
    allow: [LANG]
`
	m, err := Parse([]byte(src), "dir/murmur.yaml", env(map[string]string{"MODEL": "claude-x", "ANTHROPIC_API_KEY": "sk-sentinel"}))
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"model interpolated", m.Inference.Model, "claude-x"},
		{"transport", m.Inference.Transport, "http"},
		{"max_turns", m.Inference.MaxTurns, DefaultMaxTurns},
		{"max_tokens", m.Inference.MaxTokens, DefaultMaxTokens},
		{"echo role", m.Artifact("echo").Runtime, RoleTool},
		{"gateway endpoint from inference", m.Artifact("claude").Gateway.Endpoint, "http://127.0.0.1:9999"},
		{"gateway key from inference", m.Artifact("claude").Gateway.APIKey, "sk-sentinel"},
		{"scope", m.Capabilities.Filesystem.Scope, "."},
		{"memory", m.Capabilities.Limits.MemoryBytes, int64(DefaultMemoryBytes)},
		{"tool deadline", m.Deadline(RoleTool).Seconds(), 600.0},
		{"hook deadline", m.Deadline(RoleHook).Seconds(), 30.0},
		{"acceptance", m.Lifecycle.TaskAcceptance, "single"},
		{"after", m.Lifecycle.AfterTask, "exit"},
		{"queue", m.Lifecycle.QueueDepth, 1},
		{"conversation", m.Lifecycle.Conversation, "stateless"},
		{"capture", m.Trace.Capture, "meta"},
		{"rules", len(m.Capabilities.NetworkRules), 2},
		{"dir", m.Dir, "dir"},
		{"position", m.Position("artifacts[2].name"), "dir/murmur.yaml:11:11"},
		{"agent", m.IsAgent(), true},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestUnknownKeyWarnsWithNearest(t *testing.T) {
	tests := []struct{ yaml, key, near, at string }{
		{base + "capabilites: {}\n", "capabilites", `"capabilities"`, ":3:1"},
		{base + "capabilities:\n  netwrok: {}\n", "capabilities.netwrok", `"network"`, ":4:3"},
		{base + "lifecycle:\n  queue_dept: 2\n", "lifecycle.queue_dept", `"queue_depth"`, ":4:3"},
		{base + "zzzzzzzzzz: 1\n", "zzzzzzzzzz", "known keys here", ":3:1"},
		{base + "capabilities:\n  install:\n    tols: [a]\n", "capabilities.install.tols", `"tool"`, ":5:5"},
		{base + "capabilities:\n  install:\n    skills: [a]\n", "capabilities.install.skills", `"skill"`, ":5:5"},
		{base + "capabilities:\n  instal:\n    tool: [a]\n", "capabilities.instal", `"install"`, ":4:3"},
	}
	for _, tt := range tests {
		m, err := Parse([]byte(tt.yaml), "murmur.yaml", env(nil))
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Warnings) != 1 {
			t.Fatalf("%s: warnings = %v", tt.key, m.Warnings)
		}
		w := m.Warnings[0]
		if w.Code != CodeUnknownKey || w.Path != tt.key || !strings.Contains(w.Fix, tt.near) || w.Pos != "murmur.yaml"+tt.at {
			t.Errorf("warning = %+v", w)
		}
	}
}

func TestInterpolation(t *testing.T) {
	vars := map[string]string{"A": "x", "B_2": "y"}
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"${A}", "x"},
		{"pre-${A}-${B_2}-post", "pre-x-y-post"},
		{"$${A}", "${A}"},
		{"cost $5", "cost $5"},
	}
	for _, tt := range tests {
		m, err := Parse([]byte("name: hello\nversion: \""+tt.in+"\"\n"), "m.yaml", env(vars))
		if err != nil {
			t.Fatalf("%q: %v", tt.in, err)
		}
		if m.Version != tt.want {
			t.Errorf("%q → %q, want %q", tt.in, m.Version, tt.want)
		}
	}
	// Interpolation also reaches free-form config maps.
	m, err := Parse([]byte(base+"artifacts:\n  - {name: e, version: 1.0.0, config: {k: [\"${A}\"]}}\n"), "m.yaml", env(vars))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(m.Artifacts[0].Config["k"]); got != "[x]" {
		t.Errorf("config = %s", got)
	}
}

func TestErrorsAreAllReported(t *testing.T) {
	_, err := Parse([]byte("name: Bad_Name\nversion: latest\ncapabilities:\n  limits: {memory_bytes: 0}\n"), "m.yaml", env(nil))
	got := errs.Codes(err)
	want := []string{CodeName, CodeReservedVersion, CodeLimit}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("codes = %v, want %v", got, want)
	}
}

func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString(base + "artifacts:\n  - name: e\n    version: 1.0.0\n    config:\n      a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "      a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	_, err := Parse([]byte(b.String()), "m.yaml", env(nil))
	if errs.Code(err) != CodeTooLarge {
		t.Fatalf("want %s, got %v", CodeTooLarge, err)
	}
}

func TestCredentialShaped(t *testing.T) {
	tests := []struct {
		name  string
		extra []string
		want  bool
	}{
		{"ANTHROPIC_API_KEY", nil, true}, {"KUBECONFIG", nil, true}, {"X_TOKEN", nil, true},
		{"DB_PASSWORD", nil, true}, {"APP_SECRET", nil, true}, {"AWS_REGION", nil, true},
		{"LANG", nil, false}, {"TOKENIZER", nil, false}, {"MY_VAR", []string{"MY_*"}, true},
		{"X_CREDS_Y", []string{"*CREDS*"}, true}, {"PATH", []string{"*_X"}, false},
	}
	for _, tt := range tests {
		if got := CredentialShaped(tt.name, tt.extra); got != tt.want {
			t.Errorf("CredentialShaped(%s, %v) = %v", tt.name, tt.extra, got)
		}
	}
}

func TestArtifactManifest(t *testing.T) {
	tests := []struct {
		yaml, code string
	}{
		{"name: echo\nversion: 1.0.0\n", ""},
		{"name: echo\nversion: 1.0.0\nruntime: skill\n", ""},
		{"name: echo\nversion: 1.0.0\nimplementation: native\n", ""},
		{"name: echo\n", CodeMissing},
		{"name: Echo\nversion: 1.0.0\n", CodeName},
		{"name: echo\nversion: latest\n", CodeReservedVersion},
		{"name: echo\nversion: a/b\n", CodeVersion},
		{"name: echo\nversion: 1.0.0\nruntime: x\n", CodeEnum},
		{"name: echo\nversion: 1.0.0\nruntime: driver\nimplementation: native\n", CodeEnum},
		{"name: echo\nversion: 1.0.0\nruntime: skill\nimplementation: wasm\n", CodeEnum},
		{"name: echo\nversion: 1.0.0\ninput_schema: [a]\n", CodeType},
		{"name: d\nversion: 1.0.0\nruntime: driver\nupstream_auth: {header: x-api-key, value: \"{key}\"}\n", ""},
		{"name: d\nversion: 1.0.0\nruntime: driver\nupstream_auth: {header: Authorization, value: \"Token {key}\"}\n", ""},
		{"name: d\nversion: 1.0.0\nruntime: tool\nupstream_auth: {header: x-api-key, value: \"{key}\"}\n", CodeUpstreamAuth},
		{"name: d\nversion: 1.0.0\nruntime: driver\nupstream_auth: {header: \"x api key\", value: \"{key}\"}\n", CodeUpstreamAuth},
		{"name: d\nversion: 1.0.0\nruntime: driver\nupstream_auth: {header: x-api-key, value: \"sk-fixed\"}\n", CodeUpstreamAuth},
		{"name: d\nversion: 1.0.0\nruntime: driver\nupstream_auth: {header: x-api-key, value: \"{key}{key}\"}\n", CodeUpstreamAuth},
		{"name: d\nversion: 1.0.0\nruntime: driver\nupstream_auth: {header: x-api-key}\n", CodeMissing},
		// Hook keys: their words, then their pairings (docs/reference/manifest.md "The artifact manifest").
		{"name: h\nversion: 1.0.0\nruntime: hook\n", ""},
		{"name: h\nversion: 1.0.0\nruntime: hook\nbinding: on-tool-call\ncommit_policy: deny\n", ""},
		{"name: h\nversion: 1.0.0\nruntime: hook\nbinding: on-shell\ncommit_policy: deny\n", ""},
		{"name: h\nversion: 1.0.0\nruntime: hook\nbinding: on-stage\ncommit_policy: write-manifests\n", ""},
		{"name: h\nversion: 1.0.0\nruntime: hook\nbinding: on-compaction\ncommit_policy: replace-context\n", ""},
		{"name: h\nversion: 1.0.0\nruntime: hook\nbinding: on-task-end\ncommit_policy: reopen-task\n", ""},
		{"name: h\nversion: 1.0.0\nruntime: hook\nexecution_mode: async\non_overflow: block\n", ""},
		{"name: h\nversion: 1.0.0\nruntime: hook\nexecution_mode: async\ncommit_policy: none\n", ""},
		{"name: h\nversion: 1.0.0\nruntime: hook\nbinding: on-tool\n", CodeEnum},
		{"name: h\nversion: 1.0.0\nruntime: hook\nexecution_mode: later\n", CodeEnum},
		{"name: h\nversion: 1.0.0\nruntime: hook\ncommit_policy: allow\n", CodeEnum},
		{"name: h\nversion: 1.0.0\nruntime: hook\nexecution_mode: async\non_overflow: spill\n", CodeEnum},
		{"name: h\nversion: 1.0.0\nruntime: tool\nbinding: on-tool-call\n", CodeHookPairing},
		{"name: h\nversion: 1.0.0\ncommit_policy: none\n", CodeHookPairing},
		{"name: h\nversion: 1.0.0\nruntime: hook\nbinding: on-stage\nexecution_mode: async\n", CodeHookPairing},
		{"name: h\nversion: 1.0.0\nruntime: hook\nbinding: on-tool-call\nexecution_mode: async\ncommit_policy: deny\n", CodeHookPairing},
		{"name: h\nversion: 1.0.0\nruntime: hook\nbinding: on-task-end\ncommit_policy: deny\n", CodeHookPairing},
		{"name: h\nversion: 1.0.0\nruntime: hook\ncommit_policy: deny\n", CodeHookPairing},
		{"name: h\nversion: 1.0.0\nruntime: hook\nbinding: on-tool-call\ncommit_policy: reopen-task\n", CodeHookPairing},
		{"name: h\nversion: 1.0.0\nruntime: hook\nbinding: on-inference\ncommit_policy: replace-context\n", CodeHookPairing},
		{"name: h\nversion: 1.0.0\nruntime: hook\nbinding: on-compaction\ncommit_policy: write-manifests\n", CodeHookPairing},
		{"name: h\nversion: 1.0.0\nruntime: hook\non_overflow: drop\n", CodeHookPairing},
	}
	for _, tt := range tests {
		a, _, err := ParseArtifactManifest([]byte(tt.yaml), "murmur.yaml")
		if got := errs.Code(err); got != tt.code {
			t.Errorf("%q: code %q, want %q (%v)", tt.yaml, got, tt.code, err)
		}
		if err == nil && a.Implementation == "" && a.Runtime != RoleSkill {
			t.Errorf("%q: no implementation default", tt.yaml)
		}
	}
	h, _, err := ParseArtifactManifest([]byte("name: h\nversion: 1.0.0\nruntime: hook\nexecution_mode: async\n"), "m")
	if err != nil || h.ExecutionMode != ModeAsync || h.CommitPolicy != CommitNone || h.OnOverflow != OverflowDrop || !h.Binds(BindToolCall) {
		t.Errorf("async hook defaults: got %+v, %v", h, err)
	}
	a, _, err := ParseArtifactManifest([]byte("name: echo\nversion: 1.0.0\ndescription: ${NOT_EXPANDED}\ninput_schema: {type: object, properties: {n: {type: integer}}}\n"), "m")
	if err != nil || a.Description != "${NOT_EXPANDED}" || a.InputSchema["type"] != "object" {
		t.Errorf("got %+v, %v", a, err)
	}
}

func TestUpstreamAuthHeaders(t *testing.T) {
	for _, tc := range []struct {
		u    UpstreamAuth
		want [2]string
	}{
		{DefaultUpstreamAuth, [2]string{"Authorization", "Bearer sk-1"}},
		{UpstreamAuth{Header: "x-api-key", Value: "{key}"}, [2]string{"x-api-key", "sk-1"}},
	} {
		if got := tc.u.Headers("sk-1"); len(got) != 1 || got[0] != tc.want {
			t.Errorf("%+v: %v, want %v", tc.u, got, tc.want)
		}
	}
}

func TestGatewayKeyNeverPrinted(t *testing.T) {
	const sentinel = "sk-sentinel-4242"
	m, err := Parse([]byte(base+"artifacts:\n  - name: d\n    version: 1.0.0\n    runtime: driver\n    gateway: {endpoint: \"http://127.0.0.1:1\", api_key: \"${KEY}\"}\n"),
		"m.yaml", env(map[string]string{"KEY": sentinel}))
	if err != nil {
		t.Fatal(err)
	}
	g := m.Artifact("d").Gateway
	if g.APIKey != sentinel {
		t.Fatalf("key not interpolated: %q", g.APIKey)
	}
	js, _ := json.Marshal(m)
	for _, out := range []string{fmt.Sprint(g), fmt.Sprintf("%v %+v %#v %s", *g, *g, *g, *g), fmt.Sprintf("%+v", m.Artifacts), string(js)} {
		if strings.Contains(out, sentinel) {
			t.Errorf("key printed: %s", out)
		}
	}
}

// TestWithoutGatewayKeys: install and verify read a manifest whose key variable is unset;
// every other ${NAME} is still required, and without the option the key is too.
func TestWithoutGatewayKeys(t *testing.T) {
	driver := func(gateway string) string {
		return base + "artifacts:\n  - name: d\n    version: 1.0.0\n    runtime: driver\n    gateway: " + gateway + "\n" +
			"inference: {driver: {artifact: d}, model: m}\n"
	}
	for _, tc := range []struct {
		name, yaml string
		opts       []Option
		code       string // "" = parses
		key        string // then: the key as read
	}{
		{"key unset, keys not needed", driver(`{endpoint: "http://127.0.0.1:1", api_key: "${KEY}"}`), []Option{WithoutGatewayKeys()}, "", ""},
		{"legacy inference.api_key unset", base + "artifacts:\n  - {name: d, version: 1.0.0, runtime: driver}\ninference: {driver: {artifact: d}, model: m, endpoint: \"http://127.0.0.1:1\", api_key: \"Bearer ${KEY}\"}\n",
			[]Option{WithoutGatewayKeys()}, "", "Bearer "},
		{"key unset, needed", driver(`{endpoint: "http://127.0.0.1:1", api_key: "${KEY}"}`), nil, CodeUnsetEnv, ""},
		{"endpoint variable still required", driver(`{endpoint: "${ENDPOINT}", api_key: "${KEY}"}`), []Option{WithoutGatewayKeys()}, CodeUnsetEnv, ""},
		{"version variable still required", "name: hello\nversion: \"${VERSION}\"\n", []Option{WithoutGatewayKeys()}, CodeUnsetEnv, ""},
		{"key syntax still checked", driver(`{endpoint: "http://127.0.0.1:1", api_key: "${key}"}`), []Option{WithoutGatewayKeys()}, CodeInterpSyntax, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.yaml), "m.yaml", append(tc.opts, env(map[string]string{}))...)
			if tc.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				if g := m.Artifact("d").Gateway; g == nil || g.APIKey != tc.key {
					t.Errorf("gateway %v, want key %q", g, tc.key)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.code) {
				t.Fatalf("error %v, want %s", err, tc.code)
			}
		})
	}
}
