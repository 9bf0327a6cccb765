package shell

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/capsulegate/capsulegate/errs"
)

// OutputCap is how much of each output stream a result keeps
// (docs/reference/driver-protocol.md "Tool results").
const OutputCap = 16 << 10

// Caps on what the gateway keeps of a command: the full log of one stream, and the stdout
// of a native tool (its result).
const (
	maxFullLog      = 256 << 20
	maxNativeOutput = 8 << 20
)

// Inside the sealed tier the proxy and resolver answer on fixed loopback ports.
const (
	innerProxyPort = 3128
	innerDNSPort   = 53
)

// sandboxPATH is every subprocess's PATH, and where shell.allow names are looked up.
const sandboxPATH = "/usr/local/bin:/usr/bin:/bin"

// Limits are the resource limits of every subprocess (docs/sandbox.md "Limits and
// output"); zero means the default.
type Limits struct {
	Processes    int64 // RLIMIT_NPROC, counted per sandbox in the sealed tier; default 128
	OpenFiles    int64 // RLIMIT_NOFILE; default 1024
	FileSize     int64 // RLIMIT_FSIZE in bytes; default 4 GiB
	CPUSeconds   int64 // RLIMIT_CPU per process; default 3600
	AddressSpace int64 // RLIMIT_AS in bytes; default 2 GiB
}

func (l Limits) withDefaults() Limits {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.Processes, 128)
	def(&l.OpenFiles, 1024)
	def(&l.FileSize, 4<<30)
	def(&l.CPUSeconds, 3600)
	def(&l.AddressSpace, 2<<30)
	return l
}

// Config describes one session's sandbox.
type Config struct {
	Workdir     string   // the accessible workdir: every command's working directory and the only writable place
	Records     string   // the session's records folder: holds the sandbox's sockets, never visible to tools
	Env         []string // the environment, scrubbed by the caller (docs/reference/guest-abi.md "Environment"); HOME, PATH, TMPDIR and proxy variables are set here
	Allow       []string // shell.allow: bare binary names, looked up on /usr/local/bin:/usr/bin:/bin
	ProxyAddr   string   // host:port of the netpolicy proxy on host loopback; "" = no network
	DNSAddr     string   // host:port of the pinning resolver's TCP listener; "" = no DNS; used with ProxyAddr
	MinTier     string   // "" or the weakest tier the capsule accepts: "env-only", "scoped", "sealed"
	Limits      Limits   // resource limits; zero fields take the defaults (docs/sandbox.md "Limits and output")
	WrapperPath string   // the binary that calls MaybeWrapper (CheckHelper); "" = HelperName next to this executable, else this executable
	// Cgroup bounds all the session's commands together (memory, pids, CPU); zero: no
	// cgroup. A host that cannot apply it refuses the sandbox (E-SEC-006).
	Cgroup CgroupLimits

	probe      func(wrapper, workdir, private string) TierReport // tests simulate hosts with it
	tier       string                                            // tests force a weaker tier with it
	executable func() (string, error)                            // tests place the gateway elsewhere; nil = os.Executable
}

// Result is the outcome of one tool call.
type Result struct {
	Text     string            // what the model reads
	Status   string            // "passed", "failed" or "error"
	Metadata map[string]string // full_output_path when output was cut; summary for native tools
	Binary   string            // the shell binary or native tool name
	Command  string            // the command as the trace records it, at most 200 bytes
	ExitCode int               // 128+signal when killed; -1 when it never ran
	Bytes    int64             // bytes the command wrote to stdout and stderr
	Duration time.Duration

	// What a shell command ran and wrote, for on-shell hooks: its plan (Plan; the whole
	// command, unlike Command) and each stream's kept head (at most OutputCap bytes)
	// with its full size.
	Planned                  Command
	Stdout, Stderr           string
	StdoutBytes, StderrBytes int64
}

// Sandbox runs one session's shell and native tools.
type Sandbox struct {
	cfg     Config
	report  TierReport
	wrap    Wrapper
	wrapper string            // wrap.Path
	private string            // records/sandbox-<id>: sockets, the sealed root's mountpoint, spill files
	paths   map[string]string // shell.allow name -> absolute path; "" when not found
	missing []string
	env     []string

	cg *cgroups // the session's cgroup, when Config.Cgroup asks for one

	mu        sync.Mutex
	bridges   []*bridge
	closed    bool
	spare     *launch        // a wrapper started for the next command without stdin
	filling   sync.WaitGroup // refills under way; Close waits for them
	refilling chan struct{}  // closed when the refill under way has its wrapper; nil: none
}

// New detects and checks the tier, starts the network bridges and returns the sandbox;
// it refuses (E-SEC-001) when the host cannot give cfg.MinTier.
func New(cfg Config) (*Sandbox, error) {
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.MinTier != "" && rank(cfg.MinTier) == 0 {
		return nil, errs.New(CodeConfig, part, fmt.Sprintf("unknown sandbox tier %q", cfg.MinTier), `write "sealed", "scoped" or "env-only"`)
	}
	for _, d := range []struct{ name, path string }{{"workdir", cfg.Workdir}, {"records folder", cfg.Records}} {
		if !filepath.IsAbs(d.path) {
			return nil, errs.New(CodeConfig, part, fmt.Sprintf("the %s %q is not an absolute path", d.name, d.path), "pass an absolute path")
		}
		if st, err := os.Stat(d.path); err != nil || !st.IsDir() {
			return nil, errs.New(CodeConfig, part, fmt.Sprintf("the %s %q is not a folder", d.name, d.path), "create it before the sandbox")
		}
	}
	for _, a := range []struct{ name, addr string }{{"ProxyAddr", cfg.ProxyAddr}, {"DNSAddr", cfg.DNSAddr}} {
		if a.addr == "" {
			continue
		}
		if _, p, err := net.SplitHostPort(a.addr); err != nil || p == "0" {
			return nil, errs.New(CodeConfig, part, fmt.Sprintf("%s %q is not host:port", a.name, a.addr), "pass the listener's address, e.g. 127.0.0.1:3128")
		}
	}
	// The sealed root rebuilds the workdir's path literally: no links in it.
	for _, p := range []*string{&cfg.Workdir, &cfg.Records} {
		real, err := filepath.EvalSymlinks(*p)
		if err != nil {
			return nil, errs.Wrap(err, CodeConfig, part, "cannot resolve "+*p, "pass an existing folder")
		}
		*p = real
	}
	if rel, err := filepath.Rel(cfg.Workdir, cfg.Records); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return nil, errs.New(CodeConfig, part, fmt.Sprintf("the records folder %q is inside the workdir", cfg.Records), "keep the records outside the workdir")
	}
	executable := cfg.executable
	if executable == nil {
		executable = os.Executable
	}
	wrap, err := chooseWrapper(cfg.WrapperPath, executable)
	if err != nil {
		return nil, err
	}
	s := &Sandbox{cfg: cfg, wrap: wrap, wrapper: wrap.Path, paths: map[string]string{}}
	id := make([]byte, 6)
	rand.Read(id)
	s.private = filepath.Join(cfg.Records, "sandbox-"+hex.EncodeToString(id))
	if err := os.Mkdir(s.private, 0o700); err != nil {
		return nil, errs.Wrap(err, CodeBridge, part, "cannot create the sandbox's folder in the records folder", "check that the records folder is writable")
	}
	if err := os.Mkdir(filepath.Join(s.private, "root"), 0o700); err != nil {
		os.RemoveAll(s.private)
		return nil, errs.Wrap(err, CodeBridge, part, "cannot create the sandbox's folder in the records folder", "check that the records folder is writable")
	}
	probe := cfg.probe
	if probe == nil {
		probe = probeHost
	}
	s.report = probe(s.wrapper, cfg.Workdir, s.private)
	if cfg.tier != "" && rank(cfg.tier) < rank(s.report.Tier) {
		s.report.Tier = cfg.tier
		s.report.Reasons = append(s.report.Reasons, "a weaker tier was forced by the caller")
	}
	if err := checkMinTier(s.report, cfg.MinTier); err != nil {
		os.RemoveAll(s.private)
		return nil, err
	}
	if cfg.Cgroup.any() {
		if s.cg, err = newCgroups("capsulegate-"+hex.EncodeToString(id), cfg.Cgroup); err != nil {
			os.RemoveAll(s.private)
			return nil, errs.Wrap(err, CodeCgroup, part, "the capsule's cgroup limits (resources.cgroup_*) cannot be applied on this host",
				"run the gateway where it may create cgroups below its own (root, or a delegated cgroup v2 subtree), or remove the cgroup limits")
		}
		s.report.Cgroups = fmt.Sprintf("v%d", s.cg.version)
	}
	for _, name := range cfg.Allow {
		p := lookPath(name)
		s.paths[name] = p
		if p == "" {
			s.missing = append(s.missing, name)
		}
	}
	home := filepath.Join(cfg.Workdir, ".capsule-home")
	if err := mkdirIn(cfg.Workdir, ".capsule-home/tmp"); err != nil {
		os.RemoveAll(s.private)
		return nil, errs.Wrap(err, CodeConfig, part, "cannot create the subprocesses' HOME "+home, "check that the workdir is writable")
	}
	s.env = s.buildEnv(home)
	if s.report.Tier == TierSealed {
		if err := s.startBridges(); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Tier returns the tier every command of this sandbox runs in.
func (s *Sandbox) Tier() string { return s.report.Tier }

// Report returns the tier detection behind Tier.
func (s *Sandbox) Report() TierReport { return s.report }

// Wrapper returns the binary every command of this sandbox starts as its wrapper.
func (s *Sandbox) Wrapper() Wrapper { return s.wrap }

// Warnings lists what the operator should see at launch (stderr and logs/bootstrap.log):
// W-SEC-001 for a tier weaker than sealed, W-SEC-002 for an allowed binary that is not
// installed, W-SEC-003, W-SEC-004 for the gateway's own binary as the wrapper
// (docs/errors.md "Sandbox (`E-SEC-…`, `W-SEC-…`)"). The network counts as allowed when
// ProxyAddr is set.
func (s *Sandbox) Warnings() []*errs.Error {
	out := warnings(s.report, s.cfg.Allow, s.missing, s.cfg.ProxyAddr != "")
	if w := s.wrap; w.Kind == WrapperSelf {
		if w.Helper == "" {
			w.Helper = "<the gateway's folder>/" + HelperName
		}
		out = append(out, errs.New(WarnSelfWrapper, part,
			fmt.Sprintf("shell and native tools start the gateway's own binary %s as their sandbox wrapper, because %s; "+
				"every command then initialises all of the gateway's packages, twice, which makes it tens of milliseconds slower than with the helper", w.Path, w.Why),
			fmt.Sprintf("install the sandbox helper built from the same source next to the gateway: `go build -o %s %s` (make caddy and make gateway build bin/%s); see docs/operators.md",
				w.Helper, helperImport, HelperName)))
	}
	return out
}

// Close stops the network bridges and removes the sandbox's folder from the records.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	bridges, spare := s.bridges, s.spare
	s.bridges, s.spare, s.closed = nil, nil, true
	s.mu.Unlock()
	s.filling.Wait()
	if spare != nil {
		spare.abandon()
	}
	for _, b := range bridges {
		b.close()
	}
	s.cg.close()
	return os.RemoveAll(s.private)
}

// CgroupEvents counts what the session's cgroup limits did so far: processes killed for
// memory, forks refused; zero without a cgroup.
func (s *Sandbox) CgroupEvents() CgroupEvents { return s.cg.events() }

// buildEnv returns the subprocess environment: the caller's, without the names this
// package owns, then those names. NO_PROXY is not set: every destination, localhost
// too, is the network policy's to decide (a rule may name localhost:PORT); only a
// long-running command given loopback ports to reach gets it (Sandbox.Start).
func (s *Sandbox) buildEnv(home string) []string {
	owned := []string{"HOME", "PATH", "TMPDIR", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
		"http_proxy", "https_proxy", "all_proxy", "no_proxy", stageEnv}
	var env []string
	for _, kv := range s.cfg.Env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(owned, k) {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+sandboxPATH, "HOME="+home, "TMPDIR="+filepath.Join(home, "tmp"))
	if s.cfg.ProxyAddr != "" {
		proxy := "http://" + s.cfg.ProxyAddr
		if s.report.Tier == TierSealed {
			proxy = "http://127.0.0.1:" + strconv.Itoa(innerProxyPort)
		}
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
			env = append(env, k+"="+proxy, strings.ToLower(k)+"="+proxy)
		}
	}
	return env
}

// lookPath finds name on the sandbox's PATH: the only folders a sealed subprocess sees.
func lookPath(name string) string {
	if name == "" || strings.ContainsRune(name, '/') {
		return ""
	}
	for _, dir := range filepath.SplitList(sandboxPATH) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// Command is what a shell tool call runs, worked out before it runs (Plan).
type Command struct {
	Binary string   // the shell.allow name the model called
	Path   string   // the binary's absolute path on the sandbox's PATH; "" when not allowed or not found
	Text   string   // the input's command, verbatim
	Argv   []string // what is executed, argv[0] the binary's name; nil when the call is refused
	Script string   // the command when an interpreter runs it as a script; "" otherwise
}

// Plan works out what RunShell runs for input without running it, so a hook can judge
// the call first; refusal is the text the model reads when the call cannot run at all
// (bad input, a binary not allowed or not installed), "" when it can.
func (s *Sandbox) Plan(binary string, input []byte) (cmd Command, refusal string) {
	cmd.Binary = binary
	var in struct {
		Command *string `json:"command"`
	}
	if err := json.Unmarshal(input, &in); err != nil || in.Command == nil || strings.TrimSpace(*in.Command) == "" {
		return cmd, fmt.Sprintf(`tool %s: the input must be {"command": "<non-empty command>"}`, binary)
	}
	cmd.Text = *in.Command
	path, allowed := s.paths[binary]
	cmd.Path = path
	switch {
	case !allowed:
		return cmd, fmt.Sprintf("tool %s: %q is not in capabilities.shell.allow (allowed: %s)", binary, binary, strings.Join(s.cfg.Allow, ", "))
	case path == "":
		return cmd, fmt.Sprintf("tool %s: %q is not installed on the sandbox's PATH (%s)", binary, binary, sandboxPATH)
	}
	switch {
	case binary == "node":
		cmd.Argv, cmd.Script = []string{binary, "-e", cmd.Text}, cmd.Text
	case slices.Contains(interpreters, binary):
		cmd.Argv, cmd.Script = []string{binary, "-c", cmd.Text}, cmd.Text
	default:
		words, err := splitWords(cmd.Text)
		if err != nil {
			return cmd, fmt.Sprintf("tool %s: %v", binary, err)
		}
		if len(words) > 0 && (words[0] == binary || words[0] == path) {
			words = words[1:]
		}
		cmd.Argv = append([]string{binary}, words...)
	}
	return cmd, ""
}

// RunShell runs a shell tool call (docs/sandbox.md "How a command runs"): input is
// {"command": "..."}. Interpreters get `-c <command>` (node: `-e`); other binaries get
// the command split into words with shell quoting rules and no shell, a leading word
// naming the binary itself dropped. A refusal the model should read (bad input, a binary
// not in shell.allow) is a result with status "error"; an error return means the sandbox
// itself failed (E-SEC-003).
func (s *Sandbox) RunShell(ctx context.Context, binary string, input []byte) (Result, error) {
	res := Result{Binary: binary, Status: "error", ExitCode: -1, Metadata: map[string]string{}}
	cmd, refusal := s.Plan(binary, input)
	res.Command, res.Planned = clip(cmd.Text, 200), cmd
	if refusal != "" {
		res.Text = refusal
		return res, nil
	}
	command := cmd.Text
	out, err := s.run(ctx, &runSpec{Path: cmd.Path, Args: cmd.Argv}, nil, OutputCap)
	if err != nil {
		return res, err
	}
	defer out.cleanup()
	res.ExitCode, res.Bytes, res.Duration, res.Status = out.exitCode, out.stdout.total+out.stderr.total, out.duration, "passed"
	res.Stdout, res.Stderr, res.StdoutBytes, res.StderrBytes = string(out.stdout.head), string(out.stderr.head), out.stdout.total, out.stderr.total
	var logRel string
	if out.stdout.cut() || out.stderr.cut() {
		rel, err := s.writeFullLog(command, out)
		if err != nil {
			res.Metadata["full_output_error"] = err.Error()
		} else {
			logRel = rel
			res.Metadata["full_output_path"] = rel
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "$ %s\nExit code: %d\nStdout:\n", command, res.ExitCode)
	writeStream(&b, &out.stdout, logRel)
	b.WriteString("Stderr:\n")
	writeStream(&b, &out.stderr, logRel)
	if out.killed != "" {
		fmt.Fprintf(&b, "[killed: %s]\n", out.killed)
		res.Status = "error"
	}
	res.Text = strings.TrimSuffix(b.String(), "\n")
	return res, nil
}

// writeStream appends a stream's kept bytes and, when it was cut, where the rest is.
func writeStream(b *strings.Builder, c *capture, logRel string) {
	b.Write(c.head)
	if len(c.head) > 0 && c.head[len(c.head)-1] != '\n' {
		b.WriteByte('\n')
	}
	if c.cut() {
		where := "the full output could not be saved"
		if logRel != "" {
			where = "full output in " + logRel
		}
		fmt.Fprintf(b, "[output cut at %d of %d bytes; %s]\n", len(c.head), c.total, where)
	}
}

// writeFullLog writes the complete output to work/logs/shell-<time>.log through an
// os.Root, so a link the tool planted there cannot redirect the gateway's write.
func (s *Sandbox) writeFullLog(command string, out *outcome) (string, error) {
	if err := mkdirIn(s.cfg.Workdir, "logs"); err != nil {
		return "", err
	}
	root, err := os.OpenRoot(s.cfg.Workdir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	stamp := time.Now().UTC().Format("20060102T150405.000000000Z")
	var f *os.File
	var rel string
	for i := 1; ; i++ {
		rel = "logs/shell-" + stamp + ".log"
		if i > 1 {
			rel = fmt.Sprintf("logs/shell-%s-%d.log", stamp, i)
		}
		f, err = root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil || !os.IsExist(err) || i == 100 {
			break
		}
	}
	if err != nil {
		return "", err
	}
	fmt.Fprintf(f, "$ %s\nExit code: %d\nStdout:\n", command, out.exitCode)
	err1 := out.stdout.writeAll(f)
	fmt.Fprintf(f, "\nStderr:\n")
	err2 := out.stderr.writeAll(f)
	if err := f.Close(); err != nil {
		return "", err
	}
	if err1 != nil {
		return "", err1
	}
	if err2 != nil {
		return "", err2
	}
	return rel, nil
}

// RunNative runs the native tool name, the binary at path (tools/<name>/<name>), with
// {"data": "<data as compact JSON text>", "log_path": "<workdir>/logs/<name>-<time>.log"}
// on stdin, as Murmur's native tools read it (docs/reference/driver-protocol.md
// "Dispatch"); data is "{}" when empty. Its stdout is read as {"status","summary","data"};
// any other stdout is passed through as the data. The binary's folder is visible to the
// tool, read-only.
func (s *Sandbox) RunNative(ctx context.Context, name, path string, data json.RawMessage) (Result, error) {
	res := Result{Binary: name, Command: name, Status: "error", ExitCode: -1, Metadata: map[string]string{}}
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() || !filepath.IsAbs(path) {
		res.Text = fmt.Sprintf("native tool %s: its binary %q is missing", name, path)
		return res, nil
	}
	stdin, err := nativeInput(data, filepath.Join(s.cfg.Workdir, "logs", name+"-"+time.Now().UTC().Format("20060102T150405.000000000Z")+".log"))
	if err != nil {
		res.Text = fmt.Sprintf("native tool %s: %v", name, err)
		return res, nil
	}
	mkdirIn(s.cfg.Workdir, "logs") // the tool finds out itself if its log cannot be written
	out, err := s.run(ctx, &runSpec{Path: path, Args: []string{name}, ReadOnly: []string{filepath.Dir(path)}}, stdin, maxNativeOutput)
	if err != nil {
		return res, err
	}
	defer out.cleanup()
	res.ExitCode, res.Bytes, res.Duration = out.exitCode, out.stdout.total+out.stderr.total, out.duration
	switch {
	case out.killed != "":
		res.Text = fmt.Sprintf("native tool %s was killed: %s", name, out.killed)
		return res, nil
	case out.stdout.cut():
		res.Text = fmt.Sprintf("native tool %s wrote %d bytes to stdout, more than the %d a result may hold", name, out.stdout.total, maxNativeOutput)
		return res, nil
	}
	var reply struct {
		Status  string          `json:"status"`
		Summary string          `json:"summary"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(out.stdout.head, &reply); err == nil && (reply.Status == "passed" || reply.Status == "failed" || reply.Status == "error") {
		res.Status = reply.Status
		res.Metadata["summary"] = reply.Summary
		var str string
		if json.Unmarshal(reply.Data, &str) == nil {
			res.Text = str
		} else if len(reply.Data) > 0 && string(reply.Data) != "null" {
			res.Text = string(reply.Data)
		}
		if res.Text == "" {
			res.Text = reply.Summary
		}
		return res, nil
	}
	res.Text, res.Status = string(out.stdout.head), "passed"
	if out.exitCode != 0 {
		res.Status = "error"
		res.Text = fmt.Sprintf("native tool %s exited with code %d\nStdout:\n%s\nStderr:\n%s", name, out.exitCode, out.stdout.head, out.stderr.head)
	}
	return res, nil
}

// nativeInput is a native tool's stdin: data travels as a JSON string holding the
// arguments (Murmur's tool-input.data is a string; its native tools decode it again).
func nativeInput(data json.RawMessage, logPath string) ([]byte, error) {
	text := "{}"
	if len(bytes.TrimSpace(data)) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, data); err != nil {
			return nil, fmt.Errorf("the input is not JSON: %w", err)
		}
		text = b.String()
	}
	return json.Marshal(struct {
		Data    string `json:"data"`
		LogPath string `json:"log_path"`
	}{text, logPath})
}

// mkdirIn creates rel inside dir through an os.Root: links a tool planted in the
// workdir cannot send the gateway's writes elsewhere.
func mkdirIn(dir, rel string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return root.MkdirAll(rel, 0o755)
}

// clip cuts s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// run fills in what every command of this sandbox shares and runs spec.
func (s *Sandbox) run(ctx context.Context, spec *runSpec, stdin []byte, stdoutCap int) (*outcome, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errs.New(CodeStart, part, "the sandbox is closed", "run commands before closing the session")
	}
	full := s.sessionSpec()
	full.Path, full.Args, full.ReadOnly = spec.Path, spec.Args, spec.ReadOnly
	if stdin != nil || len(full.ReadOnly) > 0 {
		return execSpec(ctx, s.wrapper, full, stdin, stdoutCap, s.private)
	}
	if err := ctx.Err(); err != nil {
		return &outcome{exitCode: -1, killed: err.Error()}, nil
	}
	// A command without input or extra folders takes the wrapper started after the
	// previous one: its runtime, namespaces, root and inner stage are ready, so only the
	// command itself remains to be done. Each wrapper runs one command.
	l := s.takeSpare()
	if l == nil {
		var err error
		if l, err = newLaunch(s.wrapper, full, nil); err != nil {
			return nil, startErr(full, err)
		}
	}
	out, err := l.exec(ctx, full, stdoutCap, s.private)
	// The next wrapper starts once this command is over: started with it, it slowed the
	// command down (its new namespaces contend with the teardown of this one's) and
	// commands rarely follow each other at once (a model reads the result first).
	s.mu.Lock()
	if !s.closed && s.refilling == nil {
		s.filling.Add(1)
		s.refilling = make(chan struct{})
		go s.refill(s.refilling)
	}
	s.mu.Unlock()
	return out, err
}

// sessionSpec is the part of a runSpec every command of this sandbox shares.
func (s *Sandbox) sessionSpec() *runSpec {
	spec := &runSpec{Tier: s.report.Tier, Env: s.env, Workdir: s.cfg.Workdir, Limits: s.cfg.Limits, Private: s.private}
	if s.cg != nil {
		spec.Cgroups = s.cg.procsFiles()
	}
	spec.Network, spec.DNS = s.cfg.ProxyAddr != "", s.cfg.ProxyAddr != "" && s.cfg.DNSAddr != ""
	if spec.Network && spec.Tier == TierScoped {
		_, p, _ := net.SplitHostPort(s.cfg.ProxyAddr)
		spec.ProxyPort, _ = strconv.Atoi(p)
	}
	spec.RootMode = os.Geteuid() == 0
	return spec
}

// takeSpare returns the ready wrapper, if there is one alive. A refill under way is
// waited for (it only starts a process): starting another wrapper beside it would have
// two start at once, on the same CPUs, and one of them wasted.
func (s *Sandbox) takeSpare() *launch {
	s.mu.Lock()
	if ch := s.refilling; s.spare == nil && ch != nil {
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
	l := s.spare
	s.spare = nil
	s.mu.Unlock()
	if l != nil && !l.w.alive() {
		l.abandon()
		return nil
	}
	return l
}

// refill starts the wrapper for the next command unless one is ready or the sandbox
// closed, then closes done; on failure the next command starts its own and reports the
// failure.
func (s *Sandbox) refill(done chan struct{}) {
	defer s.filling.Done()
	var l *launch
	s.mu.Lock()
	skip := s.closed || s.spare != nil
	s.mu.Unlock()
	if !skip {
		l, _ = newLaunch(s.wrapper, s.sessionSpec(), nil)
	}
	s.mu.Lock()
	if l != nil && (s.closed || s.spare != nil) {
		defer l.abandon()
	} else if l != nil {
		s.spare = l
	}
	s.refilling = nil
	close(done)
	s.mu.Unlock()
}
