package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on every
// Linux that drover runs on).
const clockTick = 10 * time.Millisecond

// procCPU is the CPU time (user and system) a process has used itself,
// not counting the children it waited for.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after its last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	f := strings.Fields(s[i+1:])
	// Fields 14 and 15 of stat(5), utime and stime, are the 12th and
	// 13th after the command.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// childPIDs are the processes pid started that are still its children.
func childPIDs(pid int) []int {
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// agentCPU is the CPU time the dev agent's process (its server) and its
// children (its workers: the jobs are their children, and count only once
// their worker exits) have used so far.
func agentCPU(pid int) (server, workers time.Duration, err error) {
	if server, err = procCPU(pid); err != nil {
		return 0, 0, err
	}
	for _, c := range childPIDs(pid) {
		d, err := procCPU(c)
		if err != nil {
			continue // gone
		}
		workers += d
	}
	return server, workers, nil
}
