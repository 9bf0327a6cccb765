//go:build !linux

package shell

import "errors"

// cgroups are Linux's; elsewhere a sandbox with cgroup limits is refused.
type cgroups struct{ version int }

func newCgroups(string, CgroupLimits) (*cgroups, error) {
	return nil, errors.New("cgroups need Linux")
}

func (*cgroups) procsFiles() []string { return nil }
func (*cgroups) events() CgroupEvents { return CgroupEvents{} }
func (*cgroups) close()               {}
func joinCgroups() error              { return nil }
