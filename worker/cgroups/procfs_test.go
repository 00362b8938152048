package cgroups

import (
	"strings"
	"testing"
)

func TestParseMountinfo(t *testing.T) {
	in := `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
50 23 0:40 / /mnt/with\040space rw - ext4 /dev/vdb rw
`
	ms, err := parseMountinfo(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 6 {
		t.Fatalf("%d mounts, want 6", len(ms))
	}
	if m := ms[1]; m.point != "/sys/fs/cgroup/cpu,cpuacct" || m.fstype != "cgroup" || !m.has("cpu") || !m.has("cpuacct") || m.has("memory") {
		t.Errorf("co-mounted cpu,cpuacct parsed as %+v", m)
	}
	if m := ms[4]; m.fstype != "cgroup2" {
		t.Errorf("cgroup2 mount parsed as %+v", m)
	}
	if m := ms[5]; m.point != "/mnt/with space" {
		t.Errorf("escaped mount point parsed as %q", m.point)
	}
	if _, err := parseMountinfo(strings.NewReader("bad line\n")); err == nil {
		t.Error("bad line accepted")
	}
}

func TestParseProcCgroup(t *testing.T) {
	got, err := parseProcCgroup("9:name=systemd:/\n2:cpu,cpuacct:/a/b\n4:memory:/process_api/x\n0::/system.slice/w\n")
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
