// Package wit holds the WIT definitions of the guest contract
// (docs/reference/guest-abi.md "Interfaces"): one file per package — murmur:tool 0.1.0
// and 0.2.0 (worlds tool and driver), murmur:capsule (world script-capsule),
// murmur:tool-registry, murmur:artifact-manager, murmur:stream, murmur:task,
// capsulegate:http, and the hook contract: murmur:hook 0.9.0 (lifecycle),
// murmur:runtime 0.4.0 (world hook), murmur:task-io and murmur:conversation. Guests generate
// bindings from them; the host side of the canonical ABI is in wit/abi. The files are
// the contract: TestWITMatchesGo (contract_test.go) holds the hand-written Go copies in
// wit/abi and wit/guest against them.
package wit

import "embed"

// Files holds every *.wit file of this directory, by base name.
//
//go:embed *.wit
var Files embed.FS
