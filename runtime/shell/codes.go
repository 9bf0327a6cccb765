package shell

// Codes of the sandbox's refusals (E-SEC-…) and warnings (W-SEC-…), listed in docs/errors.md.
const (
	CodeMinTier = "E-SEC-001" // the host cannot give the tier Config.MinTier demands
	CodeConfig  = "E-SEC-002" // a Config value is unusable
	CodeStart   = "E-SEC-003" // the sandbox could not start a command
	CodeBridge  = "E-SEC-004" // the sandbox's sockets cannot be created in the records folder
	CodeHelper  = "E-SEC-005" // the configured wrapper (sandbox_helper) is missing, not executable, or speaks another protocol
	CodeCgroup  = "E-SEC-006" // cgroup limits are asked for and cannot be applied on this host

	WarnWeakTier    = "W-SEC-001" // a tier weaker than sealed applies
	WarnNoBinary    = "W-SEC-002" // a shell.allow binary is not on the sandbox's PATH
	WarnNetwork     = "W-SEC-003" // an interpreter with network rules, and a tier that cannot confine its connections
	WarnSelfWrapper = "W-SEC-004" // no usable helper next to the gateway: its own binary is the wrapper, slower
)

const part = "sandbox"
