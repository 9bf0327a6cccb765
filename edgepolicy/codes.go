package edgepolicy

// Part names this package in every error it returns.
const Part = "policy"

// Stable codes of the policy refusals (docs/errors.md lists them all).
const (
	// CodeCompile is an expression that does not parse or type-check, or is over 4 KiB.
	CodeCompile = "E-POL-001"
	// CodeType is an allow expression that is not bool, or an egress expression that is not a list of strings.
	CodeType = "E-POL-002"
	// CodeEval is an evaluation that failed at request time, on which the request is refused.
	CodeEval = "E-POL-003"
	// CodeEgress is a constant egress entry that is not a valid network.allow rule.
	CodeEgress = "E-POL-004"
)

// MaxExprSize is the largest expression Compile accepts, in bytes: a route's policy is a
// few lines, and the bound keeps parsing and checking cheap at config load.
const MaxExprSize = 4 << 10

// CostLimit is the evaluation cost at which a request's evaluation stops and is refused,
// in CEL's cost units (about one per operation, more for string and list work): far above
// any real policy, far below what would hold a request up.
const CostLimit = 100_000
