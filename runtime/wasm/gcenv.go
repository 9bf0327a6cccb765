package wasm

import (
	"strconv"
	"strings"
)

// Every instance here serves one call: a fresh one is closed after it, a warm one reset to
// its snapshot (reuse.go). Nothing a call allocates outlives the call, so a garbage
// collection inside it frees memory only that call could still use, and the Go runtime's
// default pacing (collect each time the heap doubles from the snapshot's) made a Go
// guest collect in every call of the task benchmark: measured, 0.08 ms of the gateway's
// 0.75 ms per task. So a Go guest is told to collect only when its memory nears the cap.

// InstanceEnv is the environment an instance of a call under g gets: g.Env, then the Go
// runtime's pacing unless g.Env sets it.
func InstanceEnv(g Grants) []string {
	return goGCEnv(g.Env, uint64(capPages(g))*pageSize)
}

// goGCEnv returns env, as an instance gets it (moduleConfig; snapshot keys, which hold the
// limit, see env without), with GOGC=off and GOMEMLIMIT at three quarters of the memory cap
// limit appended, each unless env sets it: the Go runtime then collects only as a call's
// memory nears the cap, where wasm memory cannot grow past it. The limit leaves a quarter
// for what the Go runtime maps outside its heap accounting and for the guest's own growth
// beyond the Go heap. Other runtimes ignore both names.
func goGCEnv(env []string, limit uint64) []string {
	var gogc, memlimit bool
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "GOGC="):
			gogc = true
		case strings.HasPrefix(kv, "GOMEMLIMIT="):
			memlimit = true
		}
	}
	if gogc && memlimit {
		return env
	}
	out := make([]string, len(env), len(env)+2)
	copy(out, env)
	if !gogc {
		out = append(out, "GOGC=off")
	}
	if !memlimit {
		out = append(out, "GOMEMLIMIT="+strconv.FormatUint(limit/4*3, 10))
	}
	return out
}
