package server

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/testkit/testlog"
	"github.com/hashicorp/raft"
)

// fillBoltLog stores n entries of size bytes from index 1 and a stable key.
func fillBoltLog(t *testing.T, l *boltLog, n, size int) {
	t.Helper()
	for i := 0; i < n; i += 64 {
		var batch []*raft.Log
		for j := i; j < min(i+64, n); j++ {
			data := bytes.Repeat([]byte{byte(j)}, size)
			batch = append(batch, &raft.Log{Index: uint64(j + 1), Term: 1, Type: raft.LogCommand, Data: data})
		}
		if err := l.StoreLogs(batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestBoltLogRewriteWhenQuiet: once nothing was stored for the quiet spell
// after enough was stored, or enough of the file is free, it is rewritten: smaller, every entry and
// stable key still there, usable on, and BoltDB's page bookkeeping gone
// from the heap. Before either condition holds, nothing happens.
func TestBoltLogRewriteWhenQuiet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	l, err := openBoltLog(path, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	now := time.Unix(1_000_000, 0)
	l.now = func() time.Time { return now }

	// 64 MiB of entries, then all but the last 1,024 compacted away, as
	// Raft does after a snapshot.
	const n, size = 8192, 8 << 10
	fillBoltLog(t, l, n, size)
	if err := l.DeleteRange(1, n-1024); err != nil {
		t.Fatal(err)
	}
	if did, err := l.rewriteIfQuiet(10*time.Second, 1<<20); did || err != nil {
		t.Fatalf("rewritten right after a write: %v %v", did, err)
	}
	now = now.Add(11 * time.Second)
	if did, err := l.rewriteIfQuiet(10*time.Second, 128<<20); did || err != nil {
		t.Fatalf("rewritten after less than asked was written: %v %v", did, err)
	}
	if !l.RewriteDue() || l.Rewrites() != 0 {
		t.Fatalf("64 MiB stored: rewrite due %v, %d rewrites", l.RewriteDue(), l.Rewrites())
	}
	before, _ := fileSize(path)
	heapBefore := heapAfterGC()
	if did, err := l.rewriteIfQuiet(10*time.Second, 1<<20); !did || err != nil {
		t.Fatalf("not rewritten when quiet: %v %v", did, err)
	}
	heapAfter := heapAfterGC()
	after, _ := fileSize(path)
	if l.RewriteDue() || l.Rewrites() != 1 {
		t.Fatalf("rewritten: rewrite due %v, %d rewrites", l.RewriteDue(), l.Rewrites())
	}
	t.Logf("file %d -> %d bytes; heap %d -> %d", before, after, heapBefore, heapAfter)
	if after > before/4 {
		t.Fatalf("the file went from %d to %d bytes; the live log is an eighth of it", before, after)
	}
	if heapBefore < heapAfter+256<<10 {
		t.Fatalf("the heap went from %d to %d bytes: BoltDB's page maps are still held", heapBefore, heapAfter)
	}
	if first, _ := l.FirstIndex(); first != n-1023 {
		t.Fatalf("first index %d after the rewrite, want %d", first, n-1023)
	}
	if last, _ := l.LastIndex(); last != n {
		t.Fatalf("last index %d after the rewrite, want %d", last, n)
	}
	for i := n - 1023; i <= n; i++ {
		var e raft.Log
		if err := l.GetLog(uint64(i), &e); err != nil || len(e.Data) != size || e.Data[0] != byte(i-1) || e.Term != 1 {
			t.Fatalf("entry %d after the rewrite: %v (%d bytes)", i, err, len(e.Data))
		}
	}
	if v, err := l.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("stable key after the rewrite: %d %v", v, err)
	}
	// Usable on; the next rewrite waits for as much again.
	if err := l.StoreLogs([]*raft.Log{{Index: n + 1, Term: 2, Data: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if did, _ := l.rewriteIfQuiet(10*time.Second, 1<<20); did {
		t.Fatal("rewritten again with nothing much written")
	}
	// A snapshot lets the log go: its pages, free now, are reason enough.
	if err := l.DeleteRange(1, n); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if did, err := l.rewriteIfQuiet(10*time.Second, 4<<20); !did || err != nil {
		t.Fatalf("not rewritten with 8 MiB of it free: %v %v", did, err)
	}
	if first, _ := l.FirstIndex(); first != n+1 {
		t.Fatalf("first index %d after the second rewrite, want %d", first, n+1)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The file opens again with everything in it.
	l2, err := openBoltLog(path, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if last, _ := l2.LastIndex(); last != n+1 {
		t.Fatalf("last index %d after reopening, want %d", last, n+1)
	}
}

// TestBoltLogFailedRewriteKeepsTheLog: a copy that cannot be written
// leaves the log as it was and in use; the copy a crash left half written
// is removed when the log opens.
func TestBoltLogFailedRewriteKeepsTheLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "raft.db")
	l, err := openBoltLog(path, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	l.now = func() time.Time { return now }
	fillBoltLog(t, l, 256, 4<<10)
	// Something in the way of the copy.
	if err := os.MkdirAll(filepath.Join(path+".compact", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	did, err := l.rewriteIfQuiet(time.Second, 1)
	if did || err == nil || !strings.Contains(err.Error(), ".compact") {
		t.Fatalf("a rewrite with its copy's path taken: %v %v", did, err)
	}
	var e raft.Log
	if err := l.GetLog(256, &e); err != nil || len(e.Data) != 4<<10 {
		t.Fatalf("the log after a failed rewrite: %v", err)
	}
	if err := l.StoreLogs([]*raft.Log{{Index: 257, Term: 1, Data: []byte("y")}}); err != nil {
		t.Fatalf("store after a failed rewrite: %v", err)
	}
	l.Close()
	// A crash mid-copy leaves a file there.
	if err := os.RemoveAll(path + ".compact"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".compact", []byte("half a copy"), 0o600); err != nil {
		t.Fatal(err)
	}
	l2, err := openBoltLog(path, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Fatalf("the unfinished copy is still there: %v", err)
	}
	if last, _ := l2.LastIndex(); last != 257 {
		t.Fatalf("last index %d, want 257", last)
	}
}

// mappedKB is the resident part of this process's memory maps of path
// (kB), from /proc/self/smaps.
func mappedKB(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	kb, in := 0, false
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			in = len(f) >= 6 && f[5] == path
			continue
		}
		if in && len(f) >= 2 && f[0] == "Rss:" {
			n, _ := strconv.Atoi(f[1])
			kb += n
		}
	}
	return kb
}

// TestBoltLogRemapLetsGoOfTouchedPages: reading entries back (as the
// leader does to send them to a follower behind, or a follower to apply
// what its cache no longer holds) touches the file's pages through
// BoltDB's map, where they count in the server's resident set; once
// boltLogRemapAfter bytes were stored the file is opened again and the
// map holds almost nothing, every entry still there.
func TestBoltLogRemapLetsGoOfTouchedPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	l, err := openBoltLog(path, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const size = 64 << 10
	n := boltLogRemapAfter/size - 8 // just under the bound
	fillBoltLog(t, l, n, size)
	for i := 1; i <= n; i++ {
		var e raft.Log
		if err := l.GetLog(uint64(i), &e); err != nil {
			t.Fatal(err)
		}
	}
	touched := mappedKB(t, path)
	if l.Remaps() != 0 || touched < n*size/2>>10 {
		t.Fatalf("%d MiB stored: %d remaps, %d kB of the map resident (want none, and megabytes)", n*size>>20, l.Remaps(), touched)
	}
	// Past the bound the next store maps the file afresh.
	if err := l.StoreLogs([]*raft.Log{{Index: uint64(n + 1), Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{1}, 9*size)}}); err != nil {
		t.Fatal(err)
	}
	after := mappedKB(t, path)
	t.Logf("resident map of the raft log: %d kB before, %d kB after mapping it afresh", touched, after)
	if l.Remaps() != 1 || after > touched/8 {
		t.Fatalf("past the bound: %d remaps, %d kB of the map resident (was %d)", l.Remaps(), after, touched)
	}
	for i := 1; i <= n; i++ {
		var e raft.Log
		if err := l.GetLog(uint64(i), &e); err != nil || len(e.Data) != size || e.Data[0] != byte(i-1) {
			t.Fatalf("entry %d after the remap: %v (%d bytes)", i, err, len(e.Data))
		}
	}
	if v, err := l.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("stable key after the remap: %d %v", v, err)
	}
}
