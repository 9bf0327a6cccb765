//go:build unix

package ocitest

import (
	"os"
	"os/exec"
	"syscall"

	"github.com/capsulegate/capsulegate/internal/testkit/serverproc"
)

// terminate asks the registry to stop.
var terminate os.Signal = syscall.SIGTERM

// runAs makes cmd run as who (nil: as we do), without root's supplementary groups, and
// die with the test binary where the system allows.
func runAs(cmd *exec.Cmd, who *serverproc.Account) {
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	setDeathSignal(cmd.SysProcAttr)
	who.Apply(cmd)
}
