package murmur

// Codes of world (interface version) refusals at stage (docs/errors.md lists them all).
const (
	CodeExport        = "E-RUN-005" // a module lacks an export the call needs
	CodeExportVersion = "E-RUN-007" // a module exports an interface version this host does not serve
	CodeImport        = "E-RUN-008" // a module imports something its role's world does not offer
	CodeHookExport    = "E-RUN-013" // a hook module or component exports no lifecycle function of its binding
)
