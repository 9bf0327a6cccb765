package shell

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroups is a session's cgroup: one folder on the unified hierarchy (v2), or one per
// controller used (v1).
type cgroups struct {
	version int
	dirs    map[string]string // controller ("memory", "pids", "cpu"; "" for v2) → folder
}

// cgroupMounts finds where this process's cgroups are: the unified hierarchy when it has
// the controllers needed, else the v1 hierarchy of each.
func cgroupMounts(need []string) (version int, dirs map[string]string, why error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, nil, err
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return 0, nil, err
	}
	v2mount := ""
	v1mount := map[string]string{}
	for _, line := range strings.Split(string(mounts), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		switch g[0] {
		case "cgroup2":
			v2mount = f[4]
		case "cgroup":
			for _, opt := range strings.Split(g[2], ",") {
				v1mount[opt] = f[4]
			}
		}
	}
	paths := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(self)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			paths[""] = parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			paths[c] = parts[2]
		}
	}
	if v2mount != "" {
		if p, ok := paths[""]; ok {
			dir := filepath.Join(v2mount, p)
			ctl, _ := os.ReadFile(filepath.Join(v2mount, "cgroup.controllers"))
			have := strings.Fields(string(ctl))
			missing := []string{}
			for _, n := range need {
				if !slices.Contains(have, n) {
					missing = append(missing, n)
				}
			}
			if len(missing) == 0 {
				return 2, map[string]string{"": dir}, nil
			}
			why = fmt.Errorf("the unified hierarchy at %s lacks the %s controllers", v2mount, strings.Join(missing, ", "))
		}
	}
	dirs = map[string]string{}
	for _, n := range need {
		m, ok1 := v1mount[n]
		p, ok2 := paths[n]
		if !ok1 || !ok2 {
			if why == nil {
				why = fmt.Errorf("no cgroup hierarchy has the %s controller", n)
			}
			return 0, nil, why
		}
		dirs[n] = filepath.Join(m, p)
	}
	return 1, dirs, nil
}

// newCgroups creates the cgroup name below this process's own, with limits l.
func newCgroups(name string, l CgroupLimits) (*cgroups, error) {
	var need []string
	if l.MemoryBytes > 0 {
		need = append(need, "memory")
	}
	if l.Pids > 0 {
		need = append(need, "pids")
	}
	if l.CPUPercent > 0 {
		need = append(need, "cpu")
	}
	version, base, err := cgroupMounts(need)
	if err != nil {
		return nil, err
	}
	c := &cgroups{version: version, dirs: map[string]string{}}
	for ctl, dir := range base {
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			c.close()
			return nil, err
		}
		c.dirs[ctl] = d
	}
	write := func(ctl, file, value string) error {
		if err := os.WriteFile(filepath.Join(c.dirs[ctl], file), []byte(value), 0o644); err != nil {
			return fmt.Errorf("setting %s: %w", file, err)
		}
		return nil
	}
	var errs []error
	if version == 2 {
		// The controllers must be enabled for the children of our own cgroup.
		parent := filepath.Dir(c.dirs[""])
		for _, n := range need {
			os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+"+n), 0o644)
		}
		if l.MemoryBytes > 0 {
			errs = append(errs, write("", "memory.max", strconv.FormatInt(l.MemoryBytes, 10)))
			write("", "memory.swap.max", "0") // absent without swap accounting: fine
		}
		if l.Pids > 0 {
			errs = append(errs, write("", "pids.max", strconv.FormatInt(l.Pids, 10)))
		}
		if l.CPUPercent > 0 {
			errs = append(errs, write("", "cpu.max", fmt.Sprintf("%d 100000", l.CPUPercent*1000)))
		}
	} else {
		if l.MemoryBytes > 0 {
			errs = append(errs, write("memory", "memory.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10)))
			write("memory", "memory.memsw.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10)) // no swap past it, where accounted
		}
		if l.Pids > 0 {
			errs = append(errs, write("pids", "pids.max", strconv.FormatInt(l.Pids, 10)))
		}
		if l.CPUPercent > 0 {
			errs = append(errs, write("cpu", "cpu.cfs_period_us", "100000"), write("cpu", "cpu.cfs_quota_us", strconv.FormatInt(l.CPUPercent*1000, 10)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// procsFiles are the cgroup.procs files a process writes its pid to, to join.
func (c *cgroups) procsFiles() []string {
	var out []string
	for _, d := range c.dirs {
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	return out
}

// joinCgroups moves this process into the cgroups a wrapper was started for (cgroupEnv),
// before it starts anything.
func joinCgroups() error {
	list := os.Getenv(cgroupEnv)
	if list == "" {
		return nil
	}
	pid := strconv.Itoa(os.Getpid())
	for _, f := range strings.Split(list, ":") {
		if err := os.WriteFile(f, []byte(pid), 0o644); err != nil {
			return fmt.Errorf("joining the session's cgroup: %w", err)
		}
	}
	return nil
}

// events reads what the cgroup's limits did so far.
func (c *cgroups) events() CgroupEvents {
	var e CgroupEvents
	if c == nil {
		return e
	}
	read := func(ctl, file, key string) int64 {
		f, err := os.Open(filepath.Join(c.dirs[ctl], file))
		if err != nil {
			return 0
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), " ")
			if k == key {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return n
			}
		}
		return 0
	}
	if c.version == 2 {
		e.OOMKills = read("", "memory.events", "oom_kill")
		e.PidsLimit = read("", "pids.events", "max")
		return e
	}
	if _, ok := c.dirs["memory"]; ok {
		e.OOMKills = read("memory", "memory.oom_control", "oom_kill")
		if e.OOMKills == 0 {
			// Kernels before oom_kill in oom_control: the limit was hit, and a kill followed.
			if b, err := os.ReadFile(filepath.Join(c.dirs["memory"], "memory.failcnt")); err == nil {
				if n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); n > 0 {
					e.OOMKills = 1
				}
			}
		}
	}
	if _, ok := c.dirs["pids"]; ok {
		e.PidsLimit = read("pids", "pids.events", "max")
	}
	return e
}

// kill kills every process in the cgroup until none is left.
func (c *cgroups) kill() {
	if c == nil {
		return
	}
	if c.version == 2 {
		if os.WriteFile(filepath.Join(c.dirs[""], "cgroup.kill"), []byte("1"), 0o644) == nil {
			return
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		left := 0
		for _, d := range c.dirs {
			b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
					left++
				}
			}
		}
		if left == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond) // the killed leave the cgroup as they are reaped
	}
}

// close kills what is left and removes the cgroup.
func (c *cgroups) close() {
	if c == nil {
		return
	}
	c.kill()
	for _, d := range c.dirs {
		for i := 0; i < 50 && os.Remove(d) != nil; i++ {
			time.Sleep(10 * time.Millisecond) // busy until the last process is reaped
		}
	}
}
