// Package testguests holds small wasip1 guests (one per directory) that tests build
// with internal/testkit/guestbuild (Go) or internal/testkit/watbuild (the wasm text
// format, tinytool) and run under wazero.
package testguests
