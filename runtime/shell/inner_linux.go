package shell

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// inner is the last stage: limits, no_new_privs, no capabilities, Landlock and seccomp
// for sealed and scoped, then execve of the tool. Failures before execve go to fd 4.
func inner(spec *runSpec, setup *os.File) int {
	fail := func(step string, err error) int {
		fmt.Fprintf(setup, "%s: %v", step, err)
		return 125
	}
	unix.CloseOnExec(int(setup.Fd()))
	if spec.Tier == TierSealed {
		if st, err := os.Stat(rootMarker); err != nil || !st.IsDir() {
			return fail("checking the sandbox root", fmt.Errorf("%s is missing: the pivot did not reach this process", rootMarker))
		}
	}
	if spec.Tier == TierSealed && spec.RootMode && (unix.Getuid() != 0 || unix.Getgid() != 0) {
		// Unmapped ids here would mean the host's root ids survived into the sandbox.
		return fail("checking the sandbox identity", fmt.Errorf("uid %d gid %d, want the namespace's 0", unix.Getuid(), unix.Getgid()))
	}
	if err := unix.Chdir(spec.Workdir); err != nil {
		return fail("entering the workdir", err)
	}
	lim := spec.Limits
	if spec.Tier != TierSealed && unix.Getuid() != 0 {
		// Without a user namespace of its own, RLIMIT_NPROC counts every task of the
		// real uid, the gateway's threads included: the limit is headroom over those.
		lim.Processes += int64(tasksOf(unix.Getuid()))
	}
	if err := setLimits(lim); err != nil {
		return fail("setting resource limits", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail("setting no_new_privs", err)
	}
	if err := dropCaps(); err != nil {
		return fail("dropping capabilities", err)
	}
	if spec.Tier == TierSealed || spec.Tier == TierScoped {
		if err := applyLandlock(spec); err != nil {
			return fail("applying Landlock", err)
		}
		scoped := spec.Tier == TierScoped
		if err := applySeccomp(scoped, scoped && landlockABI() < 9); err != nil {
			return fail("applying seccomp", err)
		}
	}
	unix.CloseRange(5, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	err := syscall.Exec(spec.Path, spec.Args, spec.Env)
	// A binary the sandbox cannot run is the tool's failure, reported as a shell would.
	fmt.Fprintf(os.Stderr, "%s: %v\n", spec.Args[0], err)
	if err == unix.ENOENT {
		return 127
	}
	return 126
}

// tasksOf counts the threads whose real uid is uid.
func tasksOf(uid int) int {
	n := 0
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + p.Name() + "/status")
		if err != nil {
			continue
		}
		var real, threads int = -1, 0
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					real, _ = strconv.Atoi(f[0])
				}
			} else if v, ok := strings.CutPrefix(line, "Threads:"); ok {
				threads, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		if real == uid {
			n += threads
		}
	}
	return n
}

// setLimits applies the rlimits; a hard limit below the asked one is kept.
func setLimits(l Limits) error {
	for _, r := range []struct {
		res int
		v   int64
	}{
		{unix.RLIMIT_NPROC, l.Processes}, {unix.RLIMIT_NOFILE, l.OpenFiles}, {unix.RLIMIT_FSIZE, l.FileSize},
		{unix.RLIMIT_CPU, l.CPUSeconds}, {unix.RLIMIT_AS, l.AddressSpace}, {unix.RLIMIT_CORE, 0},
	} {
		var cur unix.Rlimit
		if err := unix.Getrlimit(r.res, &cur); err != nil {
			return err
		}
		v := uint64(r.v)
		if v > cur.Max {
			v = cur.Max
		}
		if err := unix.Setrlimit(r.res, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("rlimit %d: %w", r.res, err)
		}
	}
	return nil
}

// dropCaps empties every capability set and locks the securebits, so a tool running as
// uid 0 (of its namespace, or of the host outside sealed) gains none through execve.
func dropCaps() error {
	const (
		noRoot, noRootLocked         = 1 << 0, 1 << 1
		noFixup, noFixupLocked       = 1 << 2, 1 << 3
		keepCapsLocked               = 1 << 5
		noAmbientRaise, noAmbientLck = 1 << 6, 1 << 7
	)
	bits := uintptr(noRoot | noRootLocked | noFixup | noFixupLocked | keepCapsLocked | noAmbientRaise | noAmbientLck)
	canSet := true
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, bits, 0, 0, 0); err != nil {
		if err != unix.EPERM {
			return fmt.Errorf("securebits: %w", err)
		}
		canSet = false // no CAP_SETPCAP: an unprivileged caller has nothing to drop
	}
	if canSet {
		for c := 0; c < 64; c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err == unix.EINVAL {
				break
			} else if err != nil {
				return fmt.Errorf("bounding set: %w", err)
			}
		}
	}
	unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capset(&hdr, &data[0])
}
