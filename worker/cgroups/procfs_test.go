package cgroups

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The mounts this machine reports are the ones /proc/self/mountinfo
// lists (runc's parser, filtered to cgroup file systems).
func TestReadMounts(t *testing.T) {
	ms, err := readMounts()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, line := range strings.Split(string(b), "\n") {
		if _, after, ok := strings.Cut(line, " - "); ok {
			if f := strings.Fields(after); len(f) > 0 && (f[0] == "cgroup" || f[0] == "cgroup2") {
				want++
			}
		}
	}
	if len(ms) != want {
		t.Errorf("%d cgroup mounts, mountinfo lists %d", len(ms), want)
	}
	memory := false
	for _, m := range ms {
		if m.fstype != "cgroup" && m.fstype != "cgroup2" {
			t.Errorf("mount %+v is not a cgroup file system", m)
		}
		memory = memory || (m.fstype == "cgroup" && m.has("memory") && exists(filepath.Join(m.point, "memory.limit_in_bytes")))
	}
	if exists("/sys/fs/cgroup/memory/memory.limit_in_bytes") && !memory {
		t.Errorf("no v1 memory hierarchy among %+v", ms)
	}
}

func TestParseCgroupText(t *testing.T) {
	got, err := parseCgroupText([]byte("9:name=systemd:/\n2:cpu,cpuacct:/a/b\n4:memory:/process_api/x\n0::/system.slice/w\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"name=systemd": "/", "cpu": "/a/b", "cpuacct": "/a/b", "memory": "/process_api/x", "": "/system.slice/w"}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q: %q, want %q", k, got[k], v)
		}
	}
}

func TestKeyValue(t *testing.T) {
	b := []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 12\n")
	if v, ok := keyValue(b, "oom_kill"); !ok || v != 12 {
		t.Errorf("oom_kill = %d, %v", v, ok)
	}
	if _, ok := keyValue(b, "oom"); ok {
		t.Error("found a key that is a prefix of another")
	}
	if v, ok := keyValue([]byte("usage_usec 42"), "usage_usec"); !ok || v != 42 {
		t.Errorf("last line without newline: %d, %v", v, ok)
	}
	if _, ok := parseUint([]byte("max\n")); ok {
		t.Error(`parseUint("max") succeeded`)
	}
}

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		p, dir string
		want   bool
	}{
		{"/drover", "/drover", true},
		{"/drover/slot-1", "/drover", true},
		{"/drover-other", "/drover", false},
		{"/", "/drover", false},
		{"/anything", "/", true},
	} {
		if got := within(c.p, c.dir); got != c.want {
			t.Errorf("within(%q, %q) = %v", c.p, c.dir, got)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Root: "rel"}, `Root "rel" is not an absolute path`},
		{Config{Root: "/x", Parent: "/"}, `Parent "/" is the root`},
		{Config{Root: "/x", Parent: "a/../../b"}, `Parent "a/../../b" contains ".."`},
		{Config{Root: "/x", Version: 3}, "Version 3"},
		{Config{Root: "/x", KillTimeout: -1}, "KillTimeout -1ns is negative"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want %q", c.cfg, err, c.want)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig: %v", err)
	}
	if p, err := cleanParent("/drover//node-1/"); err != nil || p != "drover/node-1" {
		t.Errorf("cleanParent = %q, %v", p, err)
	}
}
