package wasm

// Codes of runtime refusals and guest failures (docs/errors.md lists them all; the
// world refusals are package murmur's).
const (
	CodeCompile     = "E-RUN-001" // a module does not compile
	CodeMemoryFloor = "E-RUN-002" // a module's initial memory exceeds limits.memory_bytes
	CodeGuest       = "E-RUN-003" // a guest call failed (reason deadline, memory_limit, trap, exit or abi)
	CodeEngine      = "E-RUN-004" // the engine could not start (cache folder, WASI)
	CodeMetrics     = "E-RUN-006" // a Prometheus registry holds a different collector under our names
)

// Component refusals at stage (the component package's parse and plan codes are
// E-COMP-001 to 009).
const (
	CodeCompImport  = "E-COMP-010" // a component imports an interface, function or version this host does not serve to its role
	CodeCompType    = "E-COMP-011" // an imported function's type is not the one the host serves
	CodeCompExport  = "E-COMP-012" // the role's run export (a hook's lifecycle function, a process driver's function) is missing, of another type, or a lift the host cannot call directly
	CodeCompGraph   = "E-COMP-013" // the instantiation graph needs something the instantiator does not do (defined resources, non-UTF-8 strings, global imports, …)
	CodeCompAdapter = "E-COMP-014" // the preview1 adapter cannot be bypassed (preview1 imported by another module than main, or a function the preview1 host lacks)
)
