package cgroups

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// mount is a line of /proc/self/mountinfo.
type mount struct {
	point  string   // mount point
	fstype string   // "cgroup", "cgroup2", ...
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

// readMounts parses /proc/self/mountinfo.
func readMounts() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseMountinfo(f)
}

// parseMountinfo parses mountinfo lines: "36 25 0:31 / /sys/fs/cgroup/cpu
// rw,nosuid - cgroup cgroup rw,cpu,cpuacct", optional fields before "-".
func parseMountinfo(r io.Reader) ([]mount, error) {
	var out []mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+4 {
			return nil, fmt.Errorf("parse mountinfo: bad line %q", sc.Text())
		}
		out = append(out, mount{
			point:  unescapeOctal(fields[4]),
			fstype: fields[sep+1],
			opts:   strings.Split(fields[sep+3], ","),
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("parse mountinfo: %w", err)
	}
	return out, nil
}

// unescapeOctal undoes mountinfo's escapes of space, tab, newline and
// backslash ("\040").
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// selfCgroups parses /proc/self/cgroup into hierarchy -> path: v1 lines
// "4:memory:/a" give one entry per controller ("memory", "cpu", "cpuacct"
// for "cpu,cpuacct", "name=systemd"), the v2 line "0::/a" the key "".
func selfCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	return parseProcCgroup(string(b))
}

// parseProcCgroup parses the content of /proc/<pid>/cgroup (see
// selfCgroups).
func parseProcCgroup(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("parse /proc/self/cgroup: bad line %q", line)
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

// within tells whether cgroup path p is dir or below it; both are absolute
// paths from a hierarchy root.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
