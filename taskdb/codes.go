package taskdb

// Codes of the bbolt store's own refusals (docs/errors.md); those every store shares —
// E-STORE-001, -003, -006, -011 — are taskstore's (taskstore.CodeNotAStore …).
const (
	CodeLocked     = "E-STORE-002" // another process holds the file
	CodeOpen       = "E-STORE-004" // the file cannot be opened or created
	CodeCommit     = "E-STORE-005" // a commit failed: its writes are lost
	CodeBadRecord  = "E-STORE-007" // a stored record cannot be read
	CodeOption     = "E-STORE-008" // a negative option
	CodeReadOnly   = "E-STORE-009" // a write on a read-only store
	CodeCompacting = "E-STORE-010" // compacting failed; the original is untouched
)
