// Package guest is the SDK for Go guests of capsulegate (docs/reference/guest-abi.md):
// the WIT types, and the host imports as plain Go functions. Subpackage tool (or capsule)
// owns the world's export; a guest's main package imports it and installs a handler from
// init. Build with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared; see
// internal/testkit/guestbuild.
//
// What Go 1.26 does, checked with wazero on this toolchain:
//
//   - //go:wasmexport and //go:wasmimport accept names with ':', '/', '@' and '#'
//     verbatim (export "murmur:tool/run@0.1.0#run", import module
//     "murmur:tool-registry/invoke@0.1.0"), and //go:wasmexport works in any package
//     linked into the program, so importing a package is what declares an export.
//   - Exports may take int32, uint32, int64, uint64, float32, float64, bool, uintptr,
//     unsafe.Pointer, string (as ptr, len) and pointers to basic types or to structs with
//     a structs.HostLayout field, and return at most one of the same (no string, no int).
//     Imports also take string as (ptr, len). Pointers and uintptr lower to i32. The SDK
//     passes addresses as uint32 and never turns a host integer into a pointer.
//   - With -buildmode=c-shared the module exports _initialize, which runs package init
//     functions but not main.main; wazero runs it when given
//     WithStartFunctions("_initialize") (its default, "_start", is absent). Calling an
//     export first traps with "call _initialize first".
//   - An export may call an import that calls back into an export (the host calls
//     cabi_realloc while filling an import's return area), and goroutines run during an
//     export. An unrecovered panic, or an export blocked with no runnable goroutine
//     ("all goroutines are asleep"), prints to stderr and traps (wasm unreachable); the
//     instance is unusable afterwards.
//   - The linker drops a //go:wasmimport function no reachable code calls, so a module
//     imports exactly the host functions it uses (the echo test guest imports only
//     WASI; the script guest only adds murmur:tool-registry/invoke@0.1.0#invoke).
//
// Memory: cabi_realloc hands out Go memory that stays pinned in a table until the guest
// takes ownership of what the host wrote there (arguments when an export starts, results
// when an import returns); values the guest lowers for the host stay alive for the
// import call, or from an export's return until the host calls its cabi_post_<export>.
package guest
