package server

import (
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-sched/drover/server/state"
)

// fsm adapts the state machine to hashicorp/raft. Commands are decoded here;
// a command this server cannot decode is a fatal inconsistency (a corrupt log
// or a newer server wrote it), so it panics rather than diverge.
type fsm struct {
	state      *state.State
	metrics    *metrics
	afterApply func()
	onRestore  func(index uint64) // after the state was replaced by a snapshot
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
		c, err := state.Decode(l.Data)
		if err != nil {
			panic(fmt.Sprintf("raft log %d: %v", l.Index, err))
		}
		idx = append(idx, l.Index)
		cmds = append(cmds, c)
		pos = append(pos, i)
	}
	if len(cmds) > 0 {
		res := f.state.ApplyBatch(idx, cmds)
		for k, r := range res {
			out[pos[k]] = r
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
