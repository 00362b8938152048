package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/server"
	"github.com/drover-sched/drover/testkit/testcluster"
)

// MemAndSnapshot is a server's live heap and the size of a snapshot of its
// state (without the file's header).
type MemAndSnapshot struct {
	Heap     uint64 `json:"heap_bytes"`
	Snapshot int64  `json:"snapshot_bytes"`
	// Audit is the audit log's share of the snapshot (of that snapshot,
	// as its header says); Batches and Jobs what the state holds.
	Audit int64 `json:"audit_bytes"`
	// Index is the Raft index of the snapshot (the same on every server
	// of one reading).
	Index   uint64 `json:"raft_index"`
	Batches int64  `json:"state_batches"`
	Jobs    int64  `json:"state_jobs"`
	// RaftLogRewrites: how many times the server rewrote its Raft log
	// file so far (after a busy spell, once quiet).
	RaftLogRewrites int64 `json:"raft_log_rewrites"`
	// InstancesActive and InstancesRetired: the instance records the
	// state holds (the workers' incarnations).
	InstancesActive  int64 `json:"state_instances_active"`
	InstancesRetired int64 `json:"state_instances_retired"`
}

// heapSamples is how many times memAndSnapshots reads a server's heap.
const heapSamples = 5

// memAndSnapshots reads every server's live heap (after a GC) and the size
// of a snapshot of its state, every server's at the same Raft index (taken
// again until they agree, up to the deadline: a follower behind, or an
// audit group committed between two servers' snapshots, would compare
// states of different moments); with profDir (servers with -debug-pprof)
// it saves each server's heap profile and snapshot there too, as
// ID.heap-LABEL.pprof and ID.snapshot-LABEL.
func memAndSnapshots(ctx context.Context, c *testcluster.Cluster, token, profDir, label string) (map[string]MemAndSnapshot, error) {
	out := map[string]MemAndSnapshot{}
	settleBy := time.Now().Add(90 * time.Second)
	snaps := map[string]snapshotSize{}
	for {
		var top uint64
		for _, sn := range snaps {
			top = max(top, sn.index)
		}
		behind := false
		for _, s := range c.Servers {
			if sn, ok := snaps[s.ID()]; ok && sn.index >= top {
				continue
			}
			sn, err := saveSnapshot(ctx, c.NewClient(s.URL(), token), profDir, fmt.Sprintf("%s.snapshot-%s", s.ID(), label))
			if err != nil {
				return nil, fmt.Errorf("snapshot of %s: %w", s.ID(), err)
			}
			snaps[s.ID()] = sn
			behind = behind || sn.index != top
		}
		if !behind || time.Now().After(settleBy) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	for _, s := range c.Servers {
		one := c.NewClient(s.URL(), token)
		ms, err := leastHeap(ctx, one, settleBy)
		if err != nil {
			return nil, fmt.Errorf("memory of %s: %w", s.ID(), err)
		}
		if profDir != "" {
			saveServerProfile(s, "/debug/pprof/heap?gc=1", fmt.Sprintf("%s/%s.heap-%s.pprof", profDir, s.ID(), label))
		}
		sn := snaps[s.ID()]
		out[s.ID()] = MemAndSnapshot{Heap: ms.HeapAlloc, Snapshot: sn.state, Audit: sn.audit, Index: sn.index, Batches: ms.StateBatches, Jobs: ms.StateJobs,
			RaftLogRewrites: ms.RaftLogRewrites, InstancesActive: ms.StateInstancesActive, InstancesRetired: ms.StateInstancesRetired}
	}
	return out, nil
}

// snapshotSize is what one snapshot's header and length say: the size of
// the state, the audit log's share of it, and the Raft index it was taken
// at.
type snapshotSize struct {
	state, audit int64
	index        uint64
}

// saveSnapshot takes a snapshot of the server cl asks and returns what
// its header and length say (the audit log's share from the snapshot
// itself: the audit size the memory endpoint reports a moment later may
// count entries the snapshot did not have yet); with dir, it keeps it
// there as name (to look into what a state holds).
func saveSnapshot(ctx context.Context, cl *api.Client, dir, name string) (snapshotSize, error) {
	var buf bytes.Buffer
	if _, err := cl.Operator().SnapshotSave(ctx, &buf); err != nil {
		return snapshotSize{}, err
	}
	if dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
			return snapshotSize{}, fmt.Errorf("save snapshot: %w", err)
		}
	}
	// The file is a magic line, a JSON line about the snapshot, then the
	// state.
	data := buf.Bytes()
	var meta struct {
		Index      uint64 `json:"index"`
		AuditBytes int64  `json:"audit_bytes"`
	}
	magic := bytes.IndexByte(data, '\n')
	line := bytes.IndexByte(data[magic+1:], '\n')
	if magic < 0 || line < 0 {
		return snapshotSize{}, fmt.Errorf("snapshot of %d bytes has no header", len(data))
	}
	if err := json.Unmarshal(data[magic+1:magic+1+line], &meta); err != nil {
		return snapshotSize{}, fmt.Errorf("snapshot header: %w", err)
	}
	return snapshotSize{state: int64(len(data) - (magic + 1 + line + 1)), audit: meta.AuditBytes, index: meta.Index}, nil
}

// leastHeap reads a server's heap heapSamples times, half a second apart,
// and returns the least reading: what the server keeps, without the
// requests (worker syncs, heartbeats) in flight at one GC. Readings taken
// while its Raft log file is due for a rewrite, or across one, are taken
// again once it is done (until deadline): a snapshot's
// compaction can free a run's log at any time, and the rewrite follows
// once the server is quiet.
func leastHeap(ctx context.Context, cl *api.Client, deadline time.Time) (*api.MemoryStats, error) {
	for {
		var ms *api.MemoryStats
		settled, rewrites := true, int64(-1)
		for k := range heapSamples {
			if k > 0 {
				time.Sleep(500 * time.Millisecond)
			}
			got, err := cl.Operator().Memory(ctx)
			if err != nil {
				return nil, err
			}
			if got.RaftLogRewriteDue || (rewrites >= 0 && got.RaftLogRewrites != rewrites) {
				settled = false
			}
			rewrites = got.RaftLogRewrites
			if ms == nil || got.HeapAlloc < ms.HeapAlloc {
				ms = got
			}
		}
		if settled || time.Now().After(deadline) {
			return ms, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// waitRetained waits until every batch has left the servers' memory for
// the history store, reads each back through the API, and compares each
// server's heap and snapshot with the idle cluster's.
func waitRetained(ctx context.Context, c *testcluster.Cluster, cl *api.Client, ids []int64, idle map[string]MemAndSnapshot, profDir string, say Printf) (*Retained, error) {
	start := time.Now()
	var lastLook time.Time
	for {
		// The leader's export queue is cheap to read; once it is empty,
		// every server is asked what its state holds (a read that
		// collects garbage, so at most once a second). The leader's
		// count of batches it forgot is no test: it counts only what it
		// removed while it led, and under load leadership may move.
		st, err := cl.Leader(ctx)
		if err == nil && st.History != nil && st.History.WaitingBatches == 0 && time.Since(lastLook) >= time.Second {
			lastLook = time.Now()
			held, err := heldBatches(ctx, c, cl.Token())
			if err != nil {
				return nil, err
			}
			if held == 0 {
				break
			}
		}
		if err == nil && st.History != nil && time.Since(start) > 10*time.Minute {
			return nil, fmt.Errorf("batches still in memory after 10 minutes: %+v", st.History)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	gone := time.Since(start)
	say.printf("every batch left memory %.1fs after the last completed", gone.Seconds())
	var readable int
	for _, id := range ids {
		b, err := cl.GetBatch(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("batch %d after it left memory: %w", id, err)
		}
		page, err := cl.ListJobs(ctx, id, "", 0)
		if err != nil {
			return nil, fmt.Errorf("jobs of batch %d after it left memory: %w", id, err)
		}
		if b.State == api.BatchComplete && b.NSucceeded == b.NJobs && len(page.Jobs) == min(int(b.NJobs), 50) {
			readable++
		}
	}
	// Let what a busy run leaves behind for a while go first: the MySQL
	// store's idle connections and their buffers, and BoltDB's page
	// bookkeeping for the run's Raft log, which goes when the servers
	// rewrite the file once quiet.
	settle := max(2*history.ConnMaxIdleTime, server.RaftLogRewriteQuiet+server.RaftLogRewriteCheck) + 5*time.Second
	say.printf("waiting %s for idle connections to close and the Raft log files to be rewritten before measuring", settle)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(settle):
	}
	after, err := memAndSnapshots(ctx, c, cl.Token(), profDir, "after")
	if err != nil {
		return nil, err
	}
	// The audit log (every mutating request, the last 20,000 kept) is
	// left out of the snapshot comparison: it is bounded by design and
	// not batch state.
	var worstHeap, worstSnap float64
	var held int64
	for id, a := range after {
		worstHeap = max(worstHeap, float64(a.Heap)/float64(idle[id].Heap))
		worstSnap = max(worstSnap, float64(a.Snapshot-a.Audit)/float64(idle[id].Snapshot-idle[id].Audit))
		held = max(held, a.Batches+a.Jobs)
	}
	say.printf("after: heap at most %.3fx and snapshot (without the audit log) at most %.3fx the idle cluster's; %d of %d batches read back", worstHeap, worstSnap, readable, len(ids))
	return &Retained{Idle: idle, After: after, LeftMemoryS: gone.Seconds(), BatchesReadable: readable,
		HeapRatioMax: worstHeap, SnapshotRatio: worstSnap, HeldMax: held}, nil
}

// heldBatches is the most batches any server's state holds.
func heldBatches(ctx context.Context, c *testcluster.Cluster, token string) (int64, error) {
	var most int64
	for _, s := range c.Servers {
		ms, err := c.NewClient(s.URL(), token).Operator().Memory(ctx)
		if err != nil {
			return 0, fmt.Errorf("memory of %s: %w", s.ID(), err)
		}
		most = max(most, ms.StateBatches)
	}
	return most, nil
}

// serverHeaps asks every server for its live heap (after a GC).
func serverHeaps(ctx context.Context, c *testcluster.Cluster, token string) (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, s := range c.Servers {
		one := c.NewClient(s.URL(), token)
		ms, err := one.Operator().Memory(ctx)
		if err != nil {
			return nil, fmt.Errorf("memory of %s: %w", s.ID(), err)
		}
		out[s.ID()] = ms.HeapAlloc
	}
	return out, nil
}

// peakRSS reads each server's peak resident set size (VmHWM) in MiB.
func peakRSS(c *testcluster.Cluster) map[string]float64 {
	out := map[string]float64{}
	for _, s := range c.Servers {
		f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.PID()))
		if err != nil {
			continue
		}
		if kb, ok := VmHWM(f); ok {
			out[s.ID()] = kb / 1024
		}
		f.Close()
	}
	return out
}

// VmHWM reads the peak resident set size, in KiB, from a /proc/PID/status
// file.
func VmHWM(status io.Reader) (float64, bool) {
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				return 0, false
			}
			kb, err := strconv.ParseFloat(fields[0], 64)
			return kb, err == nil
		}
	}
	return 0, false
}
