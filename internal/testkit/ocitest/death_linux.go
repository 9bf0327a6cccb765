package ocitest

import "syscall"

// setDeathSignal kills the registry when the test binary dies, so that a crashed or
// timed-out test leaves no registry behind.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
