package cgroups

import (
	"fmt"
	"strings"

	"github.com/moby/sys/mountinfo"
	ocg "github.com/opencontainers/cgroups"
)

// The parsing of /proc/self/mountinfo and /proc/self/cgroup is runc's:
// github.com/moby/sys/mountinfo and github.com/opencontainers/cgroups.
// Both run once, when the Manager opens, so they cost no job anything.

// mount is a cgroup file system mounted on this machine.
type mount struct {
	point  string   // mount point
	fstype string   // "cgroup" or "cgroup2"
	opts   []string // super options: for cgroup v1, its controllers among others
}

// has tells whether the mount's super options include opt (a v1
// controller such as "cpuacct").
func (m mount) has(opt string) bool {
	for _, o := range m.opts {
		if o == opt {
			return true
		}
	}
	return false
}

// readMounts lists the cgroup and cgroup2 mounts of /proc/self/mountinfo.
func readMounts() ([]mount, error) {
	infos, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	out := make([]mount, 0, len(infos))
	for _, in := range infos {
		out = append(out, mount{point: in.Mountpoint, fstype: in.FSType, opts: strings.Split(in.VFSOptions, ",")})
	}
	return out, nil
}

// selfCgroups returns the worker's cgroups, from /proc/self/cgroup, as
// hierarchy -> path: v1 lines "4:memory:/a" give one entry per controller
// ("memory", "cpu", "cpuacct" for "cpu,cpuacct", "name=systemd"), the v2
// line "0::/a" the key "".
func selfCgroups() (map[string]string, error) {
	m, err := ocg.ParseCgroupFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	return m, nil
}

// within tells whether cgroup path p is dir or below it; both are absolute
// paths from a hierarchy root.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
