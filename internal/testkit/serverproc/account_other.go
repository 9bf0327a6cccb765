//go:build !unix

package serverproc

import "os/exec"

// Account stands for the unprivileged user of unix systems; elsewhere a server runs as
// the tests do.
type Account struct{}

// Unprivileged is always nil here: the server runs as the tests do.
func Unprivileged(...string) (*Account, error) { return nil, nil }

// Apply does nothing here.
func (a *Account) Apply(*exec.Cmd) {}

// Own does nothing here.
func (a *Account) Own(string) error { return nil }
