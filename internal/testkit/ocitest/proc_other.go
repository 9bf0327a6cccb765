//go:build !unix

package ocitest

import (
	"os"
	"os/exec"
)

// terminate stops the registry; elsewhere than unix there is no gentler signal.
var terminate = os.Kill

// account stands for the unprivileged user of unix systems; elsewhere the registry runs
// as the tests do.
type account struct{}

func serverAccount() (*account, error) { return nil, nil }

func (a *account) apply(*exec.Cmd) {}

func (a *account) own(string) error { return nil }
