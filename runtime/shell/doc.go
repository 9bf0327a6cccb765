// Package shell runs shell tools and native tools (docs/reference/driver-protocol.md
// "Dispatch") as subprocesses confined by the strongest sandbox tier the host supports
// (docs/sandbox.md).
//
// Go cannot run code between fork and exec, so the sandbox is applied by a wrapper
// process: the helper cmd/capsulegate-sandbox installed next to the gateway, else the
// gateway's own binary (slower; Wrapper says which). MaybeWrapper (also called from this
// package's init) turns a process started with the wrapper marker into the wrapper and
// never returns; the gateway asks a helper for its Protocol before using it. In the
// sealed tier an outer stage creates user, mount, network, pid, IPC and UTS namespaces,
// builds a minimal root (system folders read-only, the workdir read-write, a private
// /tmp, /dev and /proc), brings up loopback and forwards 127.0.0.1:3128 (HTTP proxy) and
// 127.0.0.1:53 (DNS) to Unix sockets the gateway bridges to the netpolicy proxy and
// resolver. An inner stage sets resource limits, no_new_privs, drops every capability,
// applies Landlock and a seccomp deny-list, and executes the tool with the scrubbed
// environment. See docs/sandbox.md.
package shell
