// Package bench compares capsulegate's guest calls with wasmtime-go on the same guest
// module. It is a separate module so that the product keeps no cgo dependency; see
// README.md for how to run it next to the runtime benchmarks.
package bench
