//go:build !unix

package ocitest

import (
	"os"
	"os/exec"

	"github.com/capsulegate/capsulegate/internal/testkit/serverproc"
)

// terminate stops the registry; elsewhere than unix there is no gentler signal.
var terminate = os.Kill

// runAs does nothing here: the registry runs as the tests do.
func runAs(*exec.Cmd, *serverproc.Account) {}
