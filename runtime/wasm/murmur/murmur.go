// Package murmur is the host side of Murmur capsules on the engine: the murmur:* and
// capsulegate:http/* imports it installs (Install), the tool, script, hook and
// process-driver call protocols, provider egress under the network policy, and the
// world checks of what a guest may import and must export.
package murmur

import "github.com/capsulegate/capsulegate/runtime/wasm"

// Install serves Murmur's host interfaces (murmur:*, capsulegate:http/*) to the guests of
// every runtime the engine creates, as wazero's WASI packages are instantiated on a
// runtime: wasm.NewEngine(ctx, murmur.Install(), …).
func Install() wasm.EngineOption { return wasm.WithHost(hostModules...) }
