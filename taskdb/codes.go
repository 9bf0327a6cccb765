package taskdb

import "github.com/capsulegate/capsulegate/taskstore"

// Codes of the task store's refusals (docs/errors.md).
const (
	CodeNotAStore  = taskstore.CodeNotAStore // damaged, truncated or another format
	CodeLocked     = "E-STORE-002"           // another process holds the file
	CodeBadID      = taskstore.CodeBadID     // an id empty or over MaxIDLen
	CodeOpen       = "E-STORE-004"           // the file cannot be opened or created
	CodeCommit     = "E-STORE-005"           // a commit failed: its writes are lost
	CodeClosed     = taskstore.CodeClosed    // a write after Close
	CodeBadRecord  = "E-STORE-007"           // a stored record cannot be read
	CodeOption     = "E-STORE-008"           // a negative option
	CodeReadOnly   = "E-STORE-009"           // a write on a read-only store
	CodeCompacting = "E-STORE-010"           // compacting failed; the original is untouched
	CodeNoTask     = taskstore.CodeNoTask    // a push config for a task the store does not hold
)
