//go:build !unix

package pgtest

import (
	"os/exec"
)

// account stands for the unprivileged user of unix systems; elsewhere the server runs as
// the tests do.
type account struct{}

func serverAccount() (*account, error) { return nil, nil }

func (a *account) apply(*exec.Cmd) {}

func (a *account) own(string) error { return nil }

// alive cannot tell here, so no cluster is taken for stale.
func alive(int) bool { return true }
