//go:build !linux

package wasm

import "errors"

// discardPages cannot drop pages here; warm instances need init snapshots, which need
// linux, so it is never reached.
func discardPages([]byte) error { return errors.New("discarding pages needs linux") }
