package runtime

// Codes of the runtime's refusals (docs/errors.md); the engine's are in runtime/wasm.
const (
	CodeWorkdir      = "E-RUN-009" // a session's folders cannot be created
	CodeScriptModule = "E-RUN-010" // a script capsule without exactly one module beside its manifest
	CodeTrace        = "E-RUN-012" // a trace write failed: the session fails, events are never dropped
)
