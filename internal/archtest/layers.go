// Package archtest pins the shape of the repository: the layer table below, which
// docs/architecture.md shows and its tests hold against the real import graph; that
// nothing but caddymodule/... and cmd/caddy depends on Caddy or on caddymodule, so the
// runtime side works without them; that no exported identifier of a public package
// mentions a type of an internal package (InternalLeaks); and that every citation of a
// repository doc names a file and heading that exist, and none cites a document the
// repository does not hold.
package archtest

import (
	"fmt"
	"sort"
	"strings"
)

// Module is the module path every table path is relative to.
const Module = "github.com/capsulegate/capsulegate"

// Layers, lowest first: a package may import its own layer and those below it, never
// one above. Test kits stand outside the layers.
const (
	LayerHelpers   = 1 // helpers (internal, but for the public errs): anyone may use them
	LayerLibraries = 2 // standalone libraries and contracts: no project package above helpers
	LayerCore      = 3 // the manifest, the engine, the A2A server, the shell sandbox, example guests
	LayerHosts     = 4 // what builds on the core: registry, Murmur's host side, the credential gateway
	LayerRuntime   = 5 // capsules' sessions and tasks
	LayerGlue      = 6 // the Caddy glue and the CLI
	LayerMains     = 7 // binaries
	LayerKit       = 0 // test kits and tools: only tests and other kits import them; they may import any layer
)

// LayerNames names each layer as the architecture page shows it.
var LayerNames = map[int]string{
	LayerHelpers:   "1 helpers",
	LayerLibraries: "2 libraries",
	LayerCore:      "3 core",
	LayerHosts:     "4 hosts",
	LayerRuntime:   "5 runtime",
	LayerGlue:      "6 glue",
	LayerMains:     "7 mains",
	LayerKit:       "test kits",
}

// Row is one row of the architecture page's package table: a package (Path) or every
// package below a folder (Path ending in "/..."), its layer and its one job.
type Row struct {
	Path  string
	Layer int
	Job   string
}

// Table is the layer table: every package of the module falls under exactly one row (an
// exact path before a folder's "/...").
var Table = []Row{
	{"errs", LayerHelpers, "coded errors: a stable code, what was wrong, where, and the fix; public, as every public API returns them"},
	{"internal/wasmbin", LayerHelpers, "one reader and writer of the parts of the wasm binary format the module rewrites need"},
	{"internal/mediatype", LayerHelpers, "media types as the manifest, the A2A layer and the runtime read them: a declared type or range checked, a file's type told from its name"},
	{"internal/jsontext", LayerHelpers, "append JSON text by hand where every task writes the same small shape, byte for byte what encoding/json writes, and compact JSON"},
	{"internal/clip", LayerHelpers, "shorten untrusted text for errors and logs without splitting a UTF-8 sequence"},
	{"internal/ids", LayerHelpers, "the ids of sessions, contexts, tasks, messages and events: a prefix and a UUIDv7"},
	{"internal/artname", LayerHelpers, "the one rule of capsule and artifact names, for the manifest and for the stores that check names without parsing manifests"},
	{"internal/atomicfile", LayerHelpers, "write to a temp file, fsync, then rename: a reader sees the old content or the new"},
	{"internal/otlpexport", LayerHelpers, "the OTLP tracer providers the gateway and `caddy capsule run` export spans with, over HTTP or gRPC by the endpoint's scheme"},
	{"internal/promreg", LayerHelpers, "register Prometheus collectors so that a reload can register them again"},
	{"internal/samefile", LayerHelpers, "whether a file holds given bytes, read in small chunks"},
	{"internal/digest", LayerHelpers, "the one spelling of a sha256: 64 lowercase hex characters, written (Hex) and checked (Valid)"},
	{"internal/filesum", LayerHelpers, "the sha256 of files remembered by their identity (device, inode, size, times), as git's index does"},
	{"internal/gather", LayerHelpers, "the batch of a group commit: the first write, then more until a window passes, a waiting caller hurries it, or it is full"},
	{"netpolicy", LayerLibraries, "network rules, the policy proxy and the DNS-pinning resolver"},
	{"edgeauth", LayerLibraries, "who a gateway caller is beyond static tokens: JWTs verified against their issuer's JWKS (cached, refreshed at a bounded rate, asymmetric algorithms only) and verified mTLS client certificates, as a principal and its claims"},
	{"edgepolicy", LayerLibraries, "per-route CEL policies: who may call which capsule method, and the network rules their tasks are narrowed to; compiled at config load, deny on evaluation error"},
	{"wit", LayerLibraries, "the WIT contract files"},
	{"wit/abi", LayerLibraries, "the component model's canonical ABI (lift and lower over a guest's memory) and the Go types of the Murmur WIT records"},
	{"wit/guest/...", LayerLibraries, "the SDK Go guests build against: `tool`, `capsule`, `hook`, `process` (process drivers)"},
	{"runtime/wasm/component", LayerLibraries, "WebAssembly components (as wit-component emits for `wasm32-wasip2`): parse them and resolve an instantiation plan — the world's imports and exports with versions and WIT types, core instantiations, canon lowerings and liftings — for the engine to run; no engine dependency"},
	{"runtime/wasm/wasip2", LayerLibraries, "WASI 0.2 (cli, io, clocks, random, filesystem, http) at the canonical ABI's core level for components: one `Host` per component instance owns its bounded handle table"},
	{"mcpbridge", LayerLibraries, "serves a capsule's tools to a harness CLI over MCP, per run: one loopback Streamable HTTP server behind a per-run bearer token, calling the gateway's own dispatcher for each tool"},
	{"replay", LayerLibraries, "the stand-in model provider that answers from cassettes"},
	{"manifest", LayerCore, "`murmur.yaml` → a typed `Manifest`, every mistake at `file:line:col` with a code"},
	{"runtime/wasm", LayerCore, "the engine: compile modules (with the rewrites that make instances start fast), call them with grants and limits, init snapshots, warm and held instances and their reset, components' instance graphs (their world checked by the `World` the caller gives), the host interfaces installed on it (`WithHost`: typed host functions lifted and lowered through the canonical ABI; `Instance.CallLifted` for the guest's exports), classify and count every failure; it knows modules and calls, neither manifests nor the network policy"},
	{"runtime/shell", LayerCore, "shell and native tools as OS-sandboxed subprocesses"},
	{"a2a", LayerCore, "the A2A protocol as a plain `http.Handler`: card, JSON-RPC, HTTP+JSON and gRPC, SSE, message parts and artifacts (large files at signed URLs), principals and the edge's decisions on them (credentials, policy, limits, overload shedding), push notifications, the task registry and the scheduler; it defines `Executor`"},
	{"examples/...", LayerCore, "example capsules, guests and drivers"},
	{"runtime/wasm/murmur", LayerHosts, "Murmur's host side on the engine: the `murmur:*` and `capsulegate:http/*` imports it installs (`Install`), the tool, script, hook and process-driver call protocols (`CallTool`, `RunScript`, `CallHook`, `OpenDriver`), provider egress with credentials under the network policy (`Outgoing`), and the world checks (`CheckWorld`; a component's at compile, `Compile`)"},
	{"registry", LayerHosts, "where artifacts come from and whether to trust them: `.mur.zip` archives (safe open, pack), registries (a folder, OCI, Nexus as client and `NexusServer`), the sha256-keyed artifact cache, `murmur.lock`"},
	{"runtime/credgate", LayerHosts, "a process capsule's credential gateway: the loopback provider URL a harness CLI is given, forwarding through the driver's outgoing HTTP, which adds the key"},
	{"runtime", LayerRuntime, "capsules: stage them, serve them to the gateway, run their sessions and tasks — the agent loop, tool dispatch, the shell tools' sandbox, the event stream and its sinks"},
	{"peer", LayerRuntime, "the A2A client capsules delegate through (`runtime.Peers`): the peer's card and a binding it lists, through the sender's network policy or in-process to this gateway's own server, the peer headers and the operator's credential"},
	{"caddymodule", LayerGlue, "the Caddy glue: the `capsule` app, the `capsule`, `capsule_replay`, `capsule_ready` and `capsule_registry` handlers, the Caddyfile directives, the `caddy capsule …` commands, metrics on Caddy's registry"},
	{"cmd/caddy", LayerMains, "`main`: Caddy, its standard modules and ours"},
	{"cmd/capsulegate-sandbox", LayerMains, "`main`: the sandbox helper that shell tool commands start"},
	{"", LayerMains, "the module's root package, so `xcaddy --with` can plug `caddymodule` in"},
	{"internal/archtest", LayerKit, "this table, checked against the import graph and docs/architecture.md"},
	{"internal/cmd/...", LayerKit, "tools: the benchmarks' load generator (`a2aload`), one gateway hosting many capsules, measured (`capsuleflood`)"},
	{"internal/testkit/cmd/...", LayerKit, "test tools: a component's world and plan printed (`compdump`), the pinned harness CLIs installed for tests (`harnesses`)"},
	{"e2e", LayerKit, "the end-to-end tests: the real gateway binary, built once per test run from `cmd/caddy` with the sandbox helper beside it, driven through its commands and served as Caddy"},
	{"internal/testkit/escape", LayerKit, "the escape suite (docs/escapes.md)"},
	{"internal/testkit/guestbuild", LayerKit, "build wasm guests from source for tests, cached by content"},
	{"internal/testkit/harnesstest", LayerKit, "the pinned harness CLIs, a stand-in provider and tool bridge for process-driver tests"},
	{"internal/testkit/jwttest", LayerKit, "JWTs for the edge's tests: signed with a real key, or put together by hand as a forger would"},
	{"runtime/wasm/guestfs", LayerLibraries, "the guest's `/`: one host folder served to a guest as a wazero `sys.FS` on `os.Root`, so no path or planted link resolves outside it, with the task's own files held in memory (`Held`) and the folder made and opened when a guest first reaches it (`Dir`)"},
	{"taskstore", LayerLibraries, "the task store's contract: the records (tasks with their owners, event journals, threaded turns, push configs and their cursors, blobs, the index) and `Store`, the interface `a2a` keeps tasks through; `Fleet`, a store several gateways share: who runs which task, claims in each context's order, leases, signals between the replicas"},
	{"taskstore/storetest", LayerKit, "the task store's conformance table, which any `taskstore.Store` passes by calling `storetest.Run` (public, not under internal/, so stores outside the module can run it)"},
	{"taskdb", LayerLibraries, "the durable task store behind `taskstore.Store`: one bbolt file of task records, their journals, threaded turns, push configs, large files (blobs) and an index, written by one group-committing writer through a log it checkpoints into the file"},
	{"pgstore", LayerLibraries, "the task store on PostgreSQL behind `taskstore.Store`: the same records as rows of `capsulegate_*` tables, group-committed one round trip per batch, the writes a database gone away missed kept and written once it is back, the schema migrated forward at open, shared by the replicas of a fleet (`taskstore.Fleet`): leases, claims, signals over LISTEN/NOTIFY; push configs sealed with the app's `store_key`"},
	{"caddymodule/cli", LayerGlue, "what the `caddy capsule …` subcommands do (pack, publish, install, verify, run, doctor, store check, compact and migrate), free of Caddy and cobra so tests drive it directly"},
	{"internal/testkit/ocitest", LayerKit, "a real OCI registry for tests (Debian's `docker-registry`) on a free loopback port, run as an unprivileged user when the tests run as root, with its storage folder exposed (tampering tests) and stop/restart (outage tests)"},
	{"internal/testkit/otlptest", LayerKit, "a real OTLP/HTTP trace receiver on a loopback port: decodes protobuf or JSON (gzipped or not) with its own wire-format reader, sharing no code with the exporter, and holds the spans for tests to check"},
	{"internal/testkit/pgtest", LayerKit, "real PostgreSQL for tests (the binaries of Debian's postgresql package): a throwaway cluster on a free loopback port, run as an unprivileged user when the tests run as root; one per test (`Start`) or a fresh database on one cluster the test binary shares (`NewDatabase`)"},
	{"internal/testkit/ports", LayerKit, "loopback ports below the ephemeral range for servers tests stop and start again (a gateway, a database)"},
	{"internal/testkit/serverproc", LayerKit, "what the real-server test kits (`ocitest`, `pgtest`) share: the unprivileged account a server runs as when the tests run as root, and the tail of its log for error messages"},
	{"internal/testkit/syncbuf", LayerKit, "a buffer a child process writes while tests read it"},
	{"internal/testkit/testguests", LayerKit, "the test guests' sources"},
	{"internal/testkit/wasmtest", LayerKit, "tiny wasm modules encoded by hand in tests"},
	{"internal/testkit/warmcache", LayerKit, "compile Go guests into a wazero cache without the race detector, for the TestMains that share one (guestbuild.WarmCache)"},
	{"internal/testkit/watbuild", LayerKit, "assemble wasm text-format guests with jco, cached by content"},
	{"internal/testkit/upstream", LayerKit, "upstream Murmur's own fixtures from the git mirror MURMUR_MIRROR names: the one set of tests allowed to skip in CI, saying so on stderr"},
	{"internal/testkit/witcheck", LayerKit, "parse `wit/*.wit` and hold its records, variants, enums, flags and aliases against the Go copies: the host's types and `abi.Type` descriptors, the guest SDK's types"},
}

// Package is what the checks read of one package: its module-relative path and the
// module-relative paths of the module's packages it imports, from its own files and
// from its test files.
type Package struct {
	Path        string
	Imports     []string
	TestImports []string // from _test.go files, in the package or an external _test package
}

// rowOf returns the row pkg falls under, or false.
func rowOf(pkg string) (Row, bool) {
	best, found := Row{}, false
	for _, r := range Table {
		if r.Path == pkg {
			return r, true
		}
		if dir, ok := strings.CutSuffix(r.Path, "/..."); ok && (pkg == dir || strings.HasPrefix(pkg, dir+"/")) {
			if !found || len(r.Path) > len(best.Path) {
				best, found = r, true
			}
		}
	}
	return best, found
}

// Violations returns, sorted, every way pkgs break the table: a package no row names, a
// row that names no package, an import from a lower layer to a higher one (test files
// included), and a non-test import of a test kit from outside the kits.
func Violations(pkgs []Package) []string {
	var out []string
	used := map[string]bool{}
	for _, p := range pkgs {
		from, ok := rowOf(p.Path)
		if !ok {
			out = append(out, fmt.Sprintf("package %s is in no row of the layer table (internal/archtest/layers.go): add one", show(p.Path)))
			continue
		}
		used[from.Path] = true
		check := func(imp string, test bool) {
			to, ok := rowOf(imp)
			if !ok || imp == p.Path {
				return
			}
			where := "imports"
			if test {
				where = "imports in a test file"
			}
			switch {
			case from.Layer == LayerKit:
			case to.Layer == LayerKit:
				if !test {
					out = append(out, fmt.Sprintf("%s %s the test kit %s: only tests and kits may", show(p.Path), where, show(imp)))
				}
			case to.Layer > from.Layer:
				out = append(out, fmt.Sprintf("%s (layer %s) %s %s (layer %s): a lower layer may not use a higher one", show(p.Path), LayerNames[from.Layer], where, show(imp), LayerNames[to.Layer]))
			}
		}
		for _, imp := range p.Imports {
			check(imp, false)
		}
		for _, imp := range p.TestImports {
			check(imp, true)
		}
	}
	for _, r := range Table {
		if !used[r.Path] {
			out = append(out, fmt.Sprintf("the layer table's row %s names no package: remove it or fix its path", show(r.Path)))
		}
	}
	sort.Strings(out)
	return out
}

// Edges returns the diagram's arrows, "from to" by row path, sorted: one where a
// package of one row imports (outside its tests) a package of another. Helpers and
// test kits are left out: every layer may use the helpers, and only tests the kits.
func Edges(pkgs []Package) []string {
	set := map[string]bool{}
	for _, p := range pkgs {
		from, ok := rowOf(p.Path)
		if !ok || !inDiagram(from) {
			continue
		}
		for _, imp := range p.Imports {
			if to, ok := rowOf(imp); ok && inDiagram(to) && to.Path != from.Path {
				set[from.Path+" "+to.Path] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for e := range set {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}

func inDiagram(r Row) bool { return r.Layer != LayerHelpers && r.Layer != LayerKit }

// show prints a module-relative path, the root package as the module itself.
func show(path string) string {
	if path == "" {
		return "(the module root)"
	}
	return path
}
