package component

// Codes of component refusals (docs/errors.md lists them all).
const (
	CodeHeader      = "E-COMP-001" // not a component: bad magic, version or layer
	CodeMalformed   = "E-COMP-002" // truncated or malformed encoding (section, LEB128, name, trailing bytes)
	CodeUnknown     = "E-COMP-003" // unknown section id, opcode or sort
	CodeIndex       = "E-COMP-004" // an index out of range in its index space
	CodeType        = "E-COMP-005" // a definition does not fit the type of what it refers to
	CodeUnsupported = "E-COMP-006" // a feature this runtime does not run (async, threads, GC types, start)
	CodeValue       = "E-COMP-007" // value definitions, value imports or exports
	CodeLimit       = "E-COMP-008" // nesting, type size or plan size over a limit
	CodePlan        = "E-COMP-009" // the instantiation graph cannot be planned (missing argument, unsupported import kind)
)

const part = "component"
