package a2a

// Codes of the configuration refusals NewHandler and Update return (docs/errors.md).
const (
	CodeNoExecutor  = "E-A2A-001"
	CodeAcceptance  = "E-A2A-002"
	CodeRange       = "E-A2A-003"
	CodeCard        = "E-A2A-004"
	CodeMetrics     = "E-A2A-005"
	CodeBearerToken = "E-A2A-006"
	CodePublicURL   = "E-A2A-007"
	CodeInputs      = "E-A2A-008"
)
