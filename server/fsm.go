package server

import (
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/hashicorp/raft"

	"github.com/drover-sched/drover/server/state"
)

// fsm adapts the state machine to hashicorp/raft. Commands are decoded here;
// a command this server cannot decode is a fatal inconsistency (a corrupt log
// or a newer server wrote it), so it panics rather than diverge. As in
// Nomad's FSM, only a type flagged state.IgnoreUnknownFlag may be skipped
// when unknown: its writer declared that skipping it leaves every server
// in the same state. Skipping anything else would leave this server's state
// silently apart from the others', which is worse than stopping: the log
// and snapshots stay on disk, and a drover that knows the entry (or an
// operator restoring a snapshot) carries on from them. Only servers write
// the log: Raft peers prove themselves with mutual TLS (tls.go).
type fsm struct {
	state      *state.State
	local      *localCommands // commands this server put in the log itself
	metrics    *metrics
	afterApply func()
	applied    func(idx []uint64, cmds []state.Command, res []any) // each applied group, with its results
	onRestore  func(index uint64)                                  // after the state was replaced by a snapshot
	restored   func(index uint64)                                  // the same, for the follower's readiness (see checkFollowerReady)
}

var _ raft.BatchingFSM = (*fsm)(nil)

func (f *fsm) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

func (f *fsm) ApplyBatch(logs []*raft.Log) []interface{} {
	start := time.Now()
	out := make([]interface{}, len(logs))
	idx := make([]uint64, 0, len(logs))
	cmds := make([]state.Command, 0, len(logs))
	pos := make([]int, 0, len(logs))
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		c, ok := f.local.take(l.Data)
		if !ok {
			var err error
			if c, err = state.Decode(l.Data); err != nil {
				panic(fmt.Sprintf("raft log %d: %v: this server cannot apply an entry the cluster committed and stops rather than diverge from the other servers; "+
					"a newer drover wrote it (run that version here), or the log is corrupt (restore a snapshot: docs/operations.md)", l.Index, err))
			}
		}
		idx = append(idx, l.Index)
		cmds = append(cmds, c)
		pos = append(pos, i)
	}
	if len(cmds) > 0 {
		// The state holds its lock for a bounded amount of work at a
		// time: readers get in between. The goroutine stays on its OS
		// thread meanwhile, so the thread's CPU clock measures what each
		// hold of the lock cost (drover_state_apply_hold_cpu_seconds).
		runtime.LockOSThread()
		res := f.state.ApplyBatch(idx, cmds)
		runtime.UnlockOSThread()
		for k, r := range res {
			out[pos[k]] = r
		}
		if f.applied != nil {
			f.applied(idx, cmds, res)
		}
	}
	if f.afterApply != nil {
		f.afterApply()
	}
	if f.metrics != nil {
		f.metrics.fsmApply.Observe(time.Since(start).Seconds())
		f.metrics.fsmEntries.Add(float64(len(cmds)))
	}
	return out
}

// localCommands hands the leader's FSM the command a log entry was encoded
// from, so the leader does not decode what it has just encoded (a decode
// costs as much as an apply). hashicorp/raft gives the leader's FSM the very
// Data slice that was passed to Apply, so its first byte identifies the
// entry. A command reaches the log only through Encode, and commands
// round-trip exactly (every field is encoded), so the object and the
// decoded bytes apply alike; followers and replays decode as always, and
// TestLeaderAndFollowersHoldTheSameState compares their states.
type localCommands struct {
	mu sync.Mutex
	m  map[*byte]state.Command
}

func newLocalCommands() *localCommands { return &localCommands{m: map[*byte]state.Command{}} }

// put remembers the command data was encoded from; the returned func
// forgets it (once the apply returned, applied or not).
func (lc *localCommands) put(data []byte, c state.Command) func() {
	if lc == nil || len(data) == 0 {
		return func() {}
	}
	key := unsafe.SliceData(data)
	lc.mu.Lock()
	lc.m[key] = c
	lc.mu.Unlock()
	return func() {
		lc.mu.Lock()
		delete(lc.m, key)
		lc.mu.Unlock()
	}
}

// take returns (and forgets) the command data was encoded from, if this
// server encoded it.
func (lc *localCommands) take(data []byte) (state.Command, bool) {
	if lc == nil || len(data) == 0 {
		return nil, false
	}
	key := unsafe.SliceData(data)
	lc.mu.Lock()
	c, ok := lc.m[key]
	delete(lc.m, key)
	lc.mu.Unlock()
	return c, ok
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{snap: f.state.Snapshot(), metrics: f.metrics}, nil
}

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if err := f.state.Restore(rc); err != nil {
		return err
	}
	if f.onRestore != nil {
		f.onRestore(f.state.Index())
	}
	if f.restored != nil {
		f.restored(f.state.Index())
	}
	return nil
}

type fsmSnapshot struct {
	snap    *state.Snapshot
	metrics *metrics
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	n, err := s.snap.WriteTo(sink)
	if err != nil {
		_ = sink.Cancel()
		return err
	}
	if s.metrics != nil {
		s.metrics.snapshotBytes.Set(float64(n))
		s.metrics.snapshotSeconds.Observe(time.Since(start).Seconds())
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}
