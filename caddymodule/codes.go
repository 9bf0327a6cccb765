package caddymodule

// Stable codes of the capsule app's and handler's refusals (docs/errors.md lists them all).
const (
	CodeAppConfig     = "E-RUN-020" // a capsule app configuration that cannot work
	CodeHandlerConfig = "E-RUN-021" // a capsule handler whose settings cannot work
)
