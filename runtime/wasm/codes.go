package wasm

// Codes of runtime refusals and guest failures (docs/errors.md lists them all).
const (
	CodeCompile     = "E-RUN-001" // a module does not compile
	CodeMemoryFloor = "E-RUN-002" // a module's initial memory exceeds limits.memory_bytes
	CodeGuest       = "E-RUN-003" // a guest call failed (reason deadline, memory_limit, trap, exit or abi)
	CodeEngine      = "E-RUN-004" // the engine could not start (cache folder, WASI)
	CodeExport      = "E-RUN-005" // a module lacks an export the call needs
	CodeMetrics     = "E-RUN-006" // a Prometheus registry holds a different collector under our names

	// World (interface version) refusals at stage.
	CodeExportVersion = "E-RUN-007" // a module exports an interface version this host does not serve
	CodeImport        = "E-RUN-008" // a module imports something its role's world does not offer
)
