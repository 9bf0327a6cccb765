package shell

import "strings"

// CgroupLimits bound everything a sandbox's commands run, together: the session's (an
// A2A context's) cgroup. Zero leaves a resource unbounded.
type CgroupLimits struct {
	MemoryBytes int64 // memory.max (v2), memory.limit_in_bytes (v1)
	Pids        int64 // pids.max
	CPUPercent  int64 // of one CPU: cpu.max (v2), cpu.cfs_quota_us (v1)
}

func (l CgroupLimits) any() bool { return l.MemoryBytes > 0 || l.Pids > 0 || l.CPUPercent > 0 }

// cgroupEnv carries, to a wrapper, the cgroup.procs files it joins before it starts
// anything: every process of the command is then born inside.
const cgroupEnv = "CAPSULEGATE_SANDBOX_CGROUPS"

// CgroupEvents count the limits a cgroup's processes ran into.
type CgroupEvents struct {
	OOMKills  int64 // processes killed for memory
	PidsLimit int64 // forks refused at pids.max
}

// cgroupVar is the wrapper's variable naming the cgroups it joins; none when there are
// none.
func cgroupVar(procs []string) []string {
	if len(procs) == 0 {
		return nil
	}
	return []string{cgroupEnv + "=" + strings.Join(procs, ":")}
}
