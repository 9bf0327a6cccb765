// Package testguests holds small wasip1 guests (one per directory) that tests build
// with internal/guestbuild and run under wazero.
package testguests
