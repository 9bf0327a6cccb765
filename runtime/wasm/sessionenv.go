package wasm

import (
	"bytes"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero/api"
)

// Per-session environment values (Grants.PerSession). A value such as the session id
// differs in every session, and _initialize reads the environment, so keying init
// snapshots by it would make every session run _initialize and capture an image of its
// own. Instead the snapshot key holds only such a value's length, and the snapshot
// remembers where _initialize copied the value it saw into linear memory; an instance
// restored from it gets its own value written there, byte for byte, before the call.
// Guests that copy the environment as they read it (Go's runtime, wasi-libc) see their
// own value; one that derived something else from it during _initialize would keep the
// capturing session's derivation, which is why only long random values are per session.

// minPerSession is the shortest value treated as per session: a shorter one could match
// unrelated bytes of memory, so it keys the snapshot as any other value does.
const minPerSession = 16

// envSite is where a per-session value sits in a snapshot's memory.
type envSite struct {
	name    string
	value   string // the value of the session that captured the snapshot
	offsets []uint32
}

// perSession returns the value of each name of g.PerSession that is set in g.Env and long
// enough to be found in memory, by name.
func perSession(g Grants) map[string]string {
	if len(g.PerSession) == 0 {
		return nil
	}
	var out map[string]string
	for _, kv := range g.Env {
		k, v := splitEnv(kv)
		if len(v) < minPerSession || !slices.Contains(g.PerSession, k) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

// startupGrants is g as the snapshot key sees it: each per-session value replaced by
// NULs of its length, so sessions that differ only there share a snapshot.
func startupGrants(g Grants) Grants {
	vals := perSession(g)
	if len(vals) == 0 {
		return g
	}
	env := make([]string, len(g.Env))
	for i, kv := range g.Env {
		k, v := splitEnv(kv)
		if vals[k] == v && len(v) >= minPerSession {
			kv = k + "=" + strings.Repeat("\x00", len(v))
		}
		env[i] = kv
	}
	g.Env = env
	return g
}

// findSites records where inst, which has just run _initialize with vals, holds each
// value in its memory.
func findSites(inst api.Module, vals map[string]string) []envSite {
	mem := inst.Memory()
	if mem == nil || len(vals) == 0 {
		return nil
	}
	buf, ok := mem.Read(0, mem.Size())
	if !ok {
		return nil
	}
	var sites []envSite
	for k, v := range vals {
		s := envSite{name: k, value: v}
		for off := 0; ; {
			i := bytes.Index(buf[off:], []byte(v))
			if i < 0 {
				break
			}
			s.offsets = append(s.offsets, uint32(off+i))
			off += i + len(v)
		}
		sites = append(sites, s)
	}
	return sites
}

// patchSites writes vals over the capturing session's values in inst, an instance
// restored from the snapshot holding sites.
func patchSites(inst api.Module, sites []envSite, vals map[string]string) bool {
	mem := inst.Memory()
	for _, s := range sites {
		v, ok := vals[s.name]
		if !ok || len(v) != len(s.value) {
			return false // the snapshot key rules this out; refuse rather than mix values
		}
		if v == s.value {
			continue
		}
		for _, off := range s.offsets {
			if !mem.Write(off, []byte(v)) {
				return false
			}
		}
	}
	return true
}
