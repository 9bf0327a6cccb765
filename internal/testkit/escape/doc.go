// Package escape holds capsulegate's escape suite (escape_test.go and its siblings):
// one table of attacks, across every surface a capsule can reach the host through, each
// of which must be blocked and classified. docs/escapes.md describes the suite, how to
// run it and what a new case must assert.
//
// The package itself only names the surfaces, so the table's surface column has one
// spelling everywhere.
package escape

// Surface is the way into the host an escape case attacks: the table's surface column.
type Surface string

// The surfaces of the escape suite.
const (
	WasmCore      Surface = "wasm-core"      // a core-module guest on wazero (preview1, capsulegate imports)
	WasmComponent Surface = "wasm-component" // a component guest (the preview1 adapter over WASI 0.2)
	WASI2Handle   Surface = "wasi2-handle"   // WASI 0.2 resource handles and buffers handed to the host
	Shell         Surface = "shell"          // a shell tool command in the OS sandbox
	Native        Surface = "native"         // a native tool binary in the OS sandbox
	Network       Surface = "network"        // the network policy: rules and the forward proxy
	DNS           Surface = "dns"            // the session's pinning resolver
	Archive       Surface = "archive"        // .mur.zip archives opened, extracted and packed
	A2AInput      Surface = "a2a-input"      // requests to the A2A endpoint
	A2AGateway    Surface = "a2a-gateway"    // requests to the built gateway, on every A2A binding and version
	Harness       Surface = "harness"        // a process capsule's harness CLI in its session's sandbox
	MCPBridge     Surface = "mcp-bridge"     // the per-run MCP server a harness reaches the capsule's tools through
	EdgeAuth      Surface = "edge-auth"      // JWTs presented to a route that verifies them against its issuer's keys
	A2AParts      Surface = "a2a-parts"      // a task message's files and file URIs, as the runtime lands and fetches them
	Registry      Surface = "registry"       // the registry a gateway serves (capsule_registry): uploads, fetches, listings
	Peers         Surface = "peers"          // messages claiming to come from another capsule's runtime
)

// Surfaces lists every surface in the order the suite reports them.
var Surfaces = []Surface{WasmCore, WasmComponent, WASI2Handle, Shell, Native, Network, DNS, Archive, Registry, A2AInput, A2AGateway, A2AParts, Peers, EdgeAuth, Harness, MCPBridge}
