//go:build linux

package wasm

import "syscall"

// mapNoReserve keeps a large reservation from counting against overcommit limits.
const mapNoReserve = syscall.MAP_NORESERVE
