package pgstore

import "github.com/capsulegate/capsulegate/taskstore"

// Codes of the PostgreSQL store's refusals (docs/errors.md). Those every store shares —
// E-STORE-001, -003, -006, -011 — are taskstore's; -002, -005, -007, -008 and -009 mean
// here what they mean for the bbolt store.
const (
	CodeNotAStore   = taskstore.CodeNotAStore
	CodeLocked      = "E-STORE-002" // another gateway holds the database
	CodeCommit      = "E-STORE-005" // the database refused a commit: its writes are lost
	CodeBadRecord   = "E-STORE-007" // a stored row cannot be read
	CodeOption      = "E-STORE-008" // a negative option
	CodeReadOnly    = "E-STORE-009" // a write on a store opened read-only
	CodeNewer       = "E-STORE-012" // the database's schema is newer than this release
	CodeOlder       = "E-STORE-013" // the schema is older and the store was opened read-only: run migrate
	CodeKey         = "E-STORE-014" // store_key missing, too short, or not the one push configs were sealed with
	CodeUnreachable = "E-STORE-015" // the database cannot be reached, or the connection broke
	CodeDSN         = "E-STORE-016" // the database address does not parse
)
