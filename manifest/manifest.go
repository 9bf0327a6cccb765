// Package manifest turns a capsule's murmur.yaml into a typed, validated Manifest
// (docs/reference/manifest.md): strict decoding with file:line:col errors, ${ENV}
// interpolation, defaults, and the capability grants every other part enforces.
package manifest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/netpolicy"
)

// MaxFileSize bounds a manifest file; larger files are refused before parsing.
const MaxFileSize = 4 << 20

// Defaults (docs/reference/manifest.md "Defaults").
const (
	DefaultMemoryBytes         = 512 << 20
	DefaultDeadlineSeconds     = 600
	DefaultHookDeadlineSeconds = 30
	DefaultMaxTurns            = 10
	DefaultMaxTokens           = 8192
	DefaultQueueDepth          = 1
	DefaultMaxTaskReopens      = 3
	DefaultCompactionThreshold = 0.98
	DefaultPeerDepth           = 3
	DefaultPeerCalls           = 8
)

// Manifest is a capsule's murmur.yaml, decoded, validated and with defaults applied.
type Manifest struct {
	Name          string         `yaml:"name" required:"true"`
	Version       string         `yaml:"version" required:"true"`
	Artifacts     []ArtifactRef  `yaml:"artifacts"`
	Capabilities  Capabilities   `yaml:"capabilities"`
	Inference     *Inference     `yaml:"inference"`
	Lifecycle     Lifecycle      `yaml:"lifecycle"`
	Context       *ContextConfig `yaml:"context"`
	Trace         Trace          `yaml:"trace"`
	Observability Observability  `yaml:"observability"`
	A2A           A2A            `yaml:"a2a"`
	// Peers are the capsules this one may delegate to (docs/reference/manifest.md
	// "Peers"): the agent loop offers them through its send_message tool.
	Peers []Peer `yaml:"peers"`
	// Exports are what the capsule offers other capsules.
	Exports Exports `yaml:"exports"`

	// File is the path the manifest was read from (as given), Dir its folder.
	File, Dir string
	// Warnings are the non-fatal findings (unknown keys), in file order.
	Warnings []*errs.Error

	pos     map[string]Pos
	written map[string]bool // key paths written with a value (Written)
}

// ArtifactRef is one entry of `artifacts` (docs/reference/manifest.md "Artifacts").
type ArtifactRef struct {
	Name    string         `yaml:"name" required:"true"`
	Version string         `yaml:"version"`
	Runtime Role           `yaml:"runtime"`
	Source  string         `yaml:"source"`
	Gateway *Gateway       `yaml:"gateway"`
	Config  map[string]any `yaml:"config"`
	// Capabilities are what a hook entry grants its hook, within the capsule's own
	// (docs/reference/manifest.md "Hook grants"); nil grants a hook nothing.
	Capabilities *HookGrants `yaml:"capabilities"`
	// InitSnapshot says when the artifact's calls may start from an init snapshot
	// (docs/reference/manifest.md "Artifacts"): InitSnapshotAuto (the default),
	// InitSnapshotAlways or InitSnapshotNever.
	InitSnapshot string `yaml:"init_snapshot"`
}

// The values of artifacts[].init_snapshot.
const (
	InitSnapshotAuto   = "auto"
	InitSnapshotAlways = "always"
	InitSnapshotNever  = "never"
)

// HookGrants are a hook entry's capabilities: each can only narrow the capsule's.
type HookGrants struct {
	// TaskIO.Read lets the hook read the task in scope (murmur:task-io/read).
	TaskIO struct {
		Read bool `yaml:"read"`
	} `yaml:"task_io"`
	// Conversation.Read lets the hook read its context's conversation
	// (murmur:conversation/read).
	Conversation struct {
		Read bool `yaml:"read"`
	} `yaml:"conversation"`
	// Env.Allow names variables of the capsule's env.allow the hook sees.
	Env struct {
		Allow []string `yaml:"allow"`
	} `yaml:"env"`
	// Limits lower the capsule's for this hook's calls; zero keeps the capsule's.
	Limits struct {
		MemoryBytes     int64 `yaml:"memory_bytes"`
		DeadlineSeconds int   `yaml:"deadline_seconds"`
	} `yaml:"limits"`
}

// Gateway is where the host sends a driver's requests and the key it adds to them.
type Gateway struct {
	Endpoint string `yaml:"endpoint"`
	APIKey   string `yaml:"api_key"`
}

// Capabilities are the grants of docs/reference/manifest.md "Capabilities"; absent means
// nothing granted.
type Capabilities struct {
	Network struct {
		Allow []string `yaml:"allow"`
	} `yaml:"network"`
	Filesystem struct {
		Scope string `yaml:"scope"`
	} `yaml:"filesystem"`
	Shell struct {
		Allow    []string `yaml:"allow"`
		StripEnv []string `yaml:"strip_env"`
		// MinTier is the weakest sandbox tier the capsule accepts for its shell and native
		// tools (docs/reference/manifest.md "Capabilities"; the tiers: docs/sandbox.md):
		// "env-only", "scoped" or "sealed"; empty accepts any.
		MinTier string `yaml:"min_tier"`
	} `yaml:"shell"`
	Env struct {
		Allow []string `yaml:"allow"`
	} `yaml:"env"`
	Limits struct {
		MemoryBytes     int64 `yaml:"memory_bytes"`
		DeadlineSeconds int   `yaml:"deadline_seconds"`
		// PeerDepth bounds how deep a chain of peer tasks may go through this capsule
		// (A → B is depth 1), PeerCalls how many peer messages one task may send.
		PeerDepth int `yaml:"peer_depth"`
		PeerCalls int `yaml:"peer_calls"`
	} `yaml:"limits"`
	Resources Resources `yaml:"resources"`
	// Harness grants a process transport's harness CLI what it needs outside its run
	// folder (docs/reference/manifest.md "Capabilities").
	Harness struct {
		Paths []HarnessPath `yaml:"paths"`
	} `yaml:"harness"`
	// Install lets the capsule pull artifacts at run time through Murmur's artifact
	// manager (docs/reference/manifest.md "Install grants"); empty grants nothing.
	Install Install `yaml:"install"`

	// NetworkRules is Network.Allow parsed by netpolicy.
	NetworkRules netpolicy.Rules `yaml:"-"`
}

// Install is capabilities.install: per role, the artifact names the capsule may pull at
// run time, each entry an artifact name, a prefix ending in '*', or '*' alone
// (InstallPatternMatches). Only tools and skills may be pulled.
type Install struct {
	Tool  []string `yaml:"tool"`
	Skill []string `yaml:"skill"`
}

// HarnessPath is a path a harness may use: Access is read (the default) or read-write.
type HarnessPath struct {
	Path   string `yaml:"path" required:"true"`
	Access string `yaml:"access"`
}

// Grants reports whether the grant covers access to p: the same path or a folder above
// it, with read-write covering read.
func (h HarnessPath) Grants(p, access string) bool {
	if h.Access != "read-write" && access == "read-write" {
		return false
	}
	return p == h.Path || strings.HasPrefix(p, strings.TrimSuffix(h.Path, "/")+"/")
}

// Resources are the native subprocess limits (docs/reference/manifest.md "Capabilities");
// zero means the default.
type Resources struct {
	Processes         int64 `yaml:"processes"`
	OpenFiles         int64 `yaml:"open_files"`
	FileSizeBytes     int64 `yaml:"file_size_bytes"`
	CPUSeconds        int64 `yaml:"cpu_seconds"`
	AddressSpaceBytes int64 `yaml:"address_space_bytes"`
	MemoryBytes       int64 `yaml:"memory_bytes"`
	Pids              int64 `yaml:"pids"`
	// The session's cgroup, bounding all its commands together (docs/sandbox.md
	// "Cgroups"), by Murmur's names.
	CgroupMemoryBytes   int64 `yaml:"cgroup_memory_bytes"`
	CgroupPidsMax       int64 `yaml:"cgroup_pids_max"`
	CgroupCPUPercent    int64 `yaml:"cgroup_cpu_percent"`
	CgroupIOBytesPerSec int64 `yaml:"cgroup_io_bytes_per_sec"`
}

// Inference configures an agent capsule's model access (docs/reference/manifest.md
// "Inference").
type Inference struct {
	Transport            string      `yaml:"transport"`
	Driver               DriverRef   `yaml:"driver" required:"true"`
	Model                string      `yaml:"model"`
	Endpoint             string      `yaml:"endpoint"`
	APIKey               string      `yaml:"api_key"`
	MaxTurns             int         `yaml:"max_turns"`
	MaxTokens            int         `yaml:"max_tokens"`
	SystemPrompt         string      `yaml:"system_prompt"`
	SystemPromptFile     string      `yaml:"system_prompt_file"`
	SystemPromptArtifact string      `yaml:"system_prompt_artifact"`
	Compaction           *Compaction `yaml:"compaction"`
}

// DriverRef names the driver artifact and its configuration.
type DriverRef struct {
	Artifact string         `yaml:"artifact" required:"true"`
	Config   map[string]any `yaml:"config"`
}

// Compaction configures how the agent loop compacts a conversation that nears
// context.max_tokens (docs/reference/manifest.md "Inference").
type Compaction struct {
	Threshold     float64 `yaml:"threshold"`
	Model         string  `yaml:"model"`
	SystemPrompt  string  `yaml:"system_prompt"`
	DumpSummaries bool    `yaml:"dump_summaries"`
}

// Lifecycle says how a capsule takes tasks (docs/reference/manifest.md "Lifecycle").
type Lifecycle struct {
	TaskAcceptance   string `yaml:"task_acceptance"`
	AfterTask        string `yaml:"after_task"`
	QueueDepth       int    `yaml:"queue_depth"`
	InputTimeoutSecs int    `yaml:"input_timeout_secs"`
	Conversation     string `yaml:"conversation"`
	// MaxTaskReopens bounds how often on-task-end hooks may reopen one task.
	MaxTaskReopens int `yaml:"max_task_reopens"`
}

// ContextConfig bounds the conversation context: its token budget, against which
// compaction fires.
type ContextConfig struct {
	MaxTokens int `yaml:"max_tokens"`
}

// Trace says how much of each event the trace keeps.
type Trace struct {
	Capture string `yaml:"capture"`
}

// A2A is what a capsule takes and gives over A2A beyond text (docs/reference/manifest.md
// "A2A"): the media types of the files and data it reads, how much, and which files of
// its out/ folder become artifacts of its tasks.
type A2A struct {
	InputModes      []string `yaml:"input_modes"`
	OutputModes     []string `yaml:"output_modes"`
	MaxFileBytes    int64    `yaml:"max_file_bytes"`
	MaxMessageBytes int64    `yaml:"max_message_bytes"`
	Outputs         []Output `yaml:"outputs"`
}

// Output is one file a task may leave in out/ for its client: an artifact of the task when
// the file is there once the task completed.
type Output struct {
	// File is the file's name below out/ ("report.pdf", "charts/a.png").
	File string `yaml:"file" required:"true"`
	// Name is the artifact's name; the file's name when empty.
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// MediaType is the file part's media type; from the name's extension when empty.
	MediaType string `yaml:"media_type"`
	// As is how the file is given: "file" (the default), "data" (its JSON as a data part)
	// or "text" (its UTF-8 text as a text part).
	As string `yaml:"as"`
}

// Output kinds (Output.As).
const (
	OutputFile = "file"
	OutputData = "data"
	OutputText = "text"
)

// Peer is one capsule this one may send messages to.
type Peer struct {
	// Name is what the model calls it in send_message ([a-z0-9-]).
	Name string `yaml:"name" required:"true"`
	// URL is the peer's A2A endpoint, its agent card at URL/.well-known/agent-card.json.
	URL         string `yaml:"url" required:"true"`
	Description string `yaml:"description"`
}

// Exports are what a capsule offers other capsules (docs/reference/manifest.md "Peers").
type Exports struct {
	PeerTasks struct {
		// Accept lets other capsules' runtimes send this capsule tasks; refused otherwise.
		Accept bool `yaml:"accept"`
	} `yaml:"peer_tasks"`
}

// Peer returns the declared peer named name, or nil.
func (m *Manifest) Peer(name string) *Peer {
	for i := range m.Peers {
		if m.Peers[i].Name == name {
			return &m.Peers[i]
		}
	}
	return nil
}

// Observability configures exporters [P2].
type Observability struct {
	OtelEndpoint string `yaml:"otel_endpoint"`
}

// Option adjusts how a manifest is read.
type Option func(*options)

type options struct {
	lookupEnv func(string) (string, bool)
	noKeys    bool
}

// WithLookupEnv replaces os.LookupEnv as the source of ${NAME} values.
func WithLookupEnv(f func(string) (string, bool)) Option {
	return func(o *options) { o.lookupEnv = f }
}

// WithoutGatewayKeys reads the manifest for work that never sends a model request
// (install, verify): a ${NAME} in a gateway api_key is not looked up, so its variable
// may be unset, and the key reads as empty. Only staging to run needs the key.
func WithoutGatewayKeys() Option {
	return func(o *options) { o.noKeys = true }
}

// Load reads and parses the manifest at path.
func Load(path string, opts ...Option) (*Manifest, error) {
	data, err := readCapped(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path, opts...)
}

// readCapped reads a file refusing anything over MaxFileSize.
func readCapped(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, errs.Wrap(err, CodeSyntax, "manifest", fmt.Sprintf("cannot read %s", path), "check the path and its permissions")
	}
	if fi.IsDir() {
		return nil, errs.New(CodeSyntax, "manifest", fmt.Sprintf("%s is a folder, not a file", path), "name the murmur.yaml file itself")
	}
	if fi.Size() > MaxFileSize {
		return nil, errs.New(CodeTooLarge, "manifest", fmt.Sprintf("%s is %d bytes, over the %d-byte limit", path, fi.Size(), MaxFileSize), "keep manifests small; move long prompts to a skill or system_prompt_file")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, errs.Wrap(err, CodeSyntax, "manifest", fmt.Sprintf("cannot read %s", path), "check the path and its permissions")
	}
	return data, nil
}

// Parse decodes and validates manifest bytes; file names the source in errors and
// anchors relative paths. Errors are an errs.List holding every problem found.
func Parse(data []byte, file string, opts ...Option) (*Manifest, error) {
	o := options{lookupEnv: os.LookupEnv}
	for _, opt := range opts {
		opt(&o)
	}
	if len(data) > MaxFileSize {
		return nil, errs.New(CodeTooLarge, "manifest", fmt.Sprintf("%s is %d bytes, over the %d-byte limit", file, len(data), MaxFileSize), "keep manifests small")
	}
	d := newDecoder(file, o.lookupEnv)
	d.noKeys = o.noKeys
	root := d.parseYAML(data)
	if root == nil {
		return nil, d.errs
	}
	m := &Manifest{File: file, Dir: filepath.Dir(file)}
	d.decode(root, reflect.ValueOf(m).Elem(), "")
	if len(d.errs) == 0 {
		v := validator{d: d, root: root, m: m}
		v.validate()
	}
	if len(d.errs) > 0 {
		return nil, d.errs
	}
	m.Warnings = d.warns
	m.pos = d.pos
	m.written = d.written
	m.applyDefaults()
	return m, nil
}

// applyDefaults fills in absent keys (docs/reference/manifest.md "Defaults").
func (m *Manifest) applyDefaults() {
	for i := range m.Artifacts {
		if m.Artifacts[i].Runtime == "" {
			m.Artifacts[i].Runtime = RoleTool
		}
	}
	c := &m.Capabilities
	if c.Filesystem.Scope == "" {
		c.Filesystem.Scope = "."
	}
	if c.Limits.MemoryBytes == 0 {
		c.Limits.MemoryBytes = DefaultMemoryBytes
	}
	for i := range c.Harness.Paths {
		if c.Harness.Paths[i].Access == "" {
			c.Harness.Paths[i].Access = "read"
		}
	}
	if inf := m.Inference; inf != nil {
		if inf.Transport == "" {
			inf.Transport = "http"
		}
		if inf.MaxTurns == 0 {
			inf.MaxTurns = DefaultMaxTurns
		}
		if inf.MaxTokens == 0 {
			inf.MaxTokens = DefaultMaxTokens
		}
		if inf.Compaction != nil && inf.Compaction.Threshold == 0 {
			inf.Compaction.Threshold = DefaultCompactionThreshold
		}
		// Older manifests put the endpoint on inference: it is the driver's gateway.
		if inf.Endpoint != "" || inf.APIKey != "" {
			if a := m.Artifact(inf.Driver.Artifact); a != nil {
				if a.Gateway == nil {
					a.Gateway = &Gateway{}
				}
				if a.Gateway.Endpoint == "" {
					a.Gateway.Endpoint = inf.Endpoint
				}
				if a.Gateway.APIKey == "" {
					a.Gateway.APIKey = inf.APIKey
				}
			}
		}
	}
	l := &m.Lifecycle
	if l.TaskAcceptance == "" {
		l.TaskAcceptance = "single"
	}
	if l.AfterTask == "" {
		l.AfterTask = "exit"
	}
	if l.QueueDepth == 0 {
		l.QueueDepth = DefaultQueueDepth
	}
	if l.MaxTaskReopens == 0 {
		l.MaxTaskReopens = DefaultMaxTaskReopens
	}
	if lim := &m.Capabilities.Limits; lim.PeerDepth == 0 {
		lim.PeerDepth = DefaultPeerDepth
	}
	if lim := &m.Capabilities.Limits; lim.PeerCalls == 0 {
		lim.PeerCalls = DefaultPeerCalls
	}
	if l.Conversation == "" {
		l.Conversation = "stateless"
	}
	if m.Trace.Capture == "" {
		m.Trace.Capture = "meta"
	}
}

// IsAgent reports whether the capsule has an inference block (else it is a script capsule).
func (m *Manifest) IsAgent() bool { return m.Inference != nil }

// Artifact returns the declared artifact with that name, or nil.
func (m *Manifest) Artifact(name string) *ArtifactRef {
	for i := range m.Artifacts {
		if m.Artifacts[i].Name == name {
			return &m.Artifacts[i]
		}
	}
	return nil
}

// Deadline is the wall-clock limit of one call of a guest of that role.
func (m *Manifest) Deadline(role Role) time.Duration {
	if s := m.Capabilities.Limits.DeadlineSeconds; s > 0 {
		return time.Duration(s) * time.Second
	}
	if role == RoleHook {
		return DefaultHookDeadlineSeconds * time.Second
	}
	return DefaultDeadlineSeconds * time.Second
}

// IsProcess reports whether m's inference runs a harness CLI through a process driver
// (inference.transport: process).
func (m *Manifest) IsProcess() bool { return m.Inference != nil && m.Inference.Transport == "process" }

// HookDeadline is the wall-clock limit of one call of hook a: its entry's
// limits.deadline_seconds when written, else the hook role's.
func (m *Manifest) HookDeadline(a *ArtifactRef) time.Duration {
	if a != nil && a.Capabilities != nil && a.Capabilities.Limits.DeadlineSeconds > 0 {
		return time.Duration(a.Capabilities.Limits.DeadlineSeconds) * time.Second
	}
	return m.Deadline(RoleHook)
}

// HookMemory is the memory limit of hook a's instances: its entry's limits.memory_bytes
// when written, else the capsule's.
func (m *Manifest) HookMemory(a *ArtifactRef) int64 {
	if a != nil && a.Capabilities != nil && a.Capabilities.Limits.MemoryBytes > 0 {
		return a.Capabilities.Limits.MemoryBytes
	}
	return m.Capabilities.Limits.MemoryBytes
}

// Position returns where the value at a key path stands in the file ("file:line:col"),
// or the file name when the key was absent.
func (m *Manifest) Position(path string) string {
	if p, ok := m.pos[path]; ok {
		return fmt.Sprintf("%s:%d:%d", m.File, p.Line, p.Col)
	}
	return m.File
}

// IsLocal reports whether the artifact is read from a local source rather than a registry.
func (a *ArtifactRef) IsLocal() bool { return a.Source != "" }

// redacted stands in for a secret wherever a Gateway is printed or serialised.
const redacted = "[redacted]"

// String prints the endpoint and hides the key, so logs and traces never carry it.
func (g Gateway) String() string {
	key := ""
	if g.APIKey != "" {
		key = redacted
	}
	return fmt.Sprintf("{endpoint: %s, api_key: %s}", g.Endpoint, key)
}

// GoString hides the key from %#v as well.
func (g Gateway) GoString() string { return "manifest.Gateway" + g.String() }

// MarshalJSON hides the key from JSON output (effective grants in traces, --json).
func (g Gateway) MarshalJSON() ([]byte, error) {
	key := ""
	if g.APIKey != "" {
		key = redacted
	}
	return json.Marshal(struct {
		Endpoint string `json:"endpoint,omitempty"`
		APIKey   string `json:"api_key,omitempty"`
	}{g.Endpoint, key})
}
