//go:build race

package wasm

func init() { raceEnabled = true }
