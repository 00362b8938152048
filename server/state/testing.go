package state

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
)

// Test support, exported so other packages can drive a State the way the
// FSM does: server/ runs it with the real scheduler as its planner.

// TB is the part of testing.TB the harness uses.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// Planner chooses placements for the state as it stands at now. FirstFit
// is the simplest; server.SchedulerPlanner is the real scheduler on the
// scheduling view.
type Planner func(s *State, now int64) []Placement

// FirstFit places each user's Ready jobs in order (users by name, each
// user's oldest batch first), one job at a time, on the first instance
// (by ID) with room that apply's own rule lets it use (placeable). It knows
// no quota and no spend limit beyond skipping the batches of a project
// that has reached its limit at now: the state's apply enforces them.
func FirstFit(s *State, now int64) []Placement {
	var out []Placement
	s.Read(func(r Reader) {
		type slot struct {
			inst *Instance
			free [3]int64
		}
		var slots []slot
		for inst := range r.Instances() {
			if !r.Reserved(inst) {
				slots = append(slots, slot{inst, [3]int64{inst.FreeMilli, inst.FreeMem, inst.FreeGPUs}})
			}
		}
		slices.SortFunc(slots, func(a, b slot) int { return cmp.Compare(a.inst.ID, b.inst.ID) })
		full := func() bool {
			for _, sl := range slots {
				if sl.free[0] > 0 {
					return false
				}
			}
			return true
		}
		for _, q := range r.UserQueues() {
			for _, b := range q.Batches() {
				if r.Budget(b.BillingProject).Reached(now) {
					continue
				}
				for rg := range r.Ready(b) {
					sp := rg.Spec
					if sp.Where != nil && sp.Where.MachineType != "" {
						continue
					}
					_, gpus := sp.GPUs()
					for id := rg.Lo; id <= rg.Hi; id++ {
						if full() {
							return
						}
						for i := range slots {
							sl := &slots[i]
							if !s.placeable(b, sp, sl.inst) {
								continue
							}
							if sl.free[0] >= sp.CPUMilli && sl.free[1] >= sp.Memory && sl.free[2] >= gpus && sl.free[0] > 0 {
								sl.free[0] -= sp.CPUMilli
								sl.free[1] -= sp.Memory
								sl.free[2] -= gpus
								out = append(out, Placement{Batch: b.ID, First: id, Count: 1, Attempt: rg.Attempt, Instance: sl.inst.ID})
								break
							}
						}
					}
				}
			}
		}
	})
	return out
}

// Harness applies commands the way the FSM does (encode, decode, apply),
// keeps the log for replays, and checks the invariants and the allowed
// transitions after every command; any violation fails the test.
type Harness struct {
	T       TB
	S       *State
	Log     [][]byte
	Now     int64 // a clock that Tick advances by a millisecond
	Planner Planner
	trans   []transition
}

type transition struct {
	batch    uint64
	job      uint32
	from, to JobState
}

// NewHarness starts a bootstrapped State with admin "root" (token hash
// "root-hash") and billing project "default". A nil planner is FirstFit.
func NewHarness(t TB, plan Planner) *Harness {
	if plan == nil {
		plan = FirstFit
	}
	h := &Harness{T: t, S: New(), Now: 1_000_000_000, Planner: plan}
	h.S.SetHooks(Hooks{Transition: func(_, b uint64, j uint32, from, to JobState) {
		h.trans = append(h.trans, transition{b, j, from, to})
	}})
	h.Apply(&Bootstrap{Now: h.Tick(), Admin: "root", TokenHash: "root-hash", DefaultProject: "default"})
	return h
}

// Tick advances the clock and returns it.
func (h *Harness) Tick() int64 {
	h.Now += 1_000_000
	return h.Now
}

// Apply encodes, decodes and applies a command, then checks the state.
func (h *Harness) Apply(c Command) any {
	h.T.Helper()
	data, err := Encode(c)
	if err != nil {
		h.T.Fatalf("encode %T: %v", c, err)
	}
	dec, err := Decode(data)
	if err != nil {
		h.T.Fatalf("decode %T: %v", c, err)
	}
	h.Log = append(h.Log, data)
	res := h.S.Apply(uint64(len(h.Log)), dec)
	if err := h.S.CheckInvariants(); err != nil {
		h.T.Fatalf("after %T: %v", c, err)
	}
	for _, tr := range h.trans {
		if !TransitionAllowed(tr.from, tr.to) {
			h.T.Fatalf("job %d/%d: forbidden transition %s -> %s", tr.batch, tr.job, tr.from, tr.to)
		}
	}
	h.trans = h.trans[:0]
	return res
}

// Must applies a command that has to succeed.
func (h *Harness) Must(c Command) any {
	h.T.Helper()
	res := h.Apply(c)
	if err, ok := res.(*ApplyError); ok {
		h.T.Fatalf("%T rejected: %v", c, err)
	}
	return res
}

// MustFail applies a command that has to be rejected with the given kind.
func (h *Harness) MustFail(c Command, kind ErrorKind) *ApplyError {
	h.T.Helper()
	res := h.Apply(c)
	err, ok := res.(*ApplyError)
	if !ok {
		h.T.Fatalf("%T accepted (%v), want rejection", c, res)
	}
	if err.Kind != kind {
		h.T.Fatalf("%T rejected with kind %d (%v), want %d", c, err.Kind, err, kind)
	}
	return err
}

// Activate adds an instance with the given cores and GiB of memory.
func (h *Harness) Activate(name string, cores int64, memGiB int64) uint32 {
	h.T.Helper()
	res := h.Must(&Activate{Now: h.Tick(), Name: name, CPUMilli: cores * 1000, Memory: memGiB << 30, TokenHash: "tok-" + name + fmt.Sprint(h.Now)})
	return res.(*ActivateResult).Instance
}

// CreateBatch commits a batch of root's in one command.
func (h *Harness) CreateBatch(jobs ...JobEntry) uint64 {
	h.T.Helper()
	res := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Jobs: jobs})
	return res.(*UpdateResult).Batch
}

// Plan asks the planner for a plan on the current state, without applying
// it.
func (h *Harness) Plan() *Plan {
	now := h.Tick()
	return &Plan{Now: now, Placements: h.Planner(h.S, now), Reserve: true}
}

// Schedule plans and applies the plan.
func (h *Harness) Schedule() *PlanResult {
	h.T.Helper()
	return h.Must(h.Plan()).(*PlanResult)
}

// Complete reports every running attempt on an instance as ended with the
// outcome chosen by fn (nil: success) and returns how many it ended.
func (h *Harness) Complete(inst uint32, fn func(b uint64, j uint32) Outcome) int {
	h.T.Helper()
	v := h.S.WorkerView(inst, nil)
	var evs []Event
	for _, a := range v.Assign {
		o := OutcomeSuccess
		if fn != nil {
			o = fn(a.Batch, a.Job)
		}
		exit := int32(0)
		if o == OutcomeFailed {
			exit = 1
		}
		evs = append(evs, Event{Instance: inst, Batch: a.Batch, Job: a.Job, Attempt: a.Attempt, Outcome: o, Exit: exit, Start: h.Now, End: h.Tick()})
	}
	if len(evs) > 0 {
		h.Must(&Events{Now: h.Tick(), Events: evs})
	}
	return len(evs)
}

// RunAll schedules and completes until nothing is running.
func (h *Harness) RunAll(insts []uint32, fn func(b uint64, j uint32) Outcome) {
	h.T.Helper()
	for i := 0; i < 10000; i++ {
		h.Schedule()
		n := 0
		for _, id := range insts {
			n += h.Complete(id, fn)
		}
		if n == 0 {
			return
		}
	}
	h.T.Fatal("RunAll did not converge")
}

// Batch returns a batch as the state holds it.
func (h *Harness) Batch(id uint64) *Batch {
	h.S.mu.RLock()
	defer h.S.mu.RUnlock()
	return h.S.batches[id]
}

// JobState returns one job's state.
func (h *Harness) JobState(b uint64, j uint32) JobState {
	h.S.mu.RLock()
	defer h.S.mu.RUnlock()
	return h.S.batches[b].jobs[j-1].state
}

// Replay applies the harness's log to a fresh State and returns it.
func (h *Harness) Replay() *State {
	h.T.Helper()
	s := New()
	for i, data := range h.Log {
		c, err := Decode(data)
		if err != nil {
			h.T.Fatal(err)
		}
		s.Apply(uint64(i+1), c)
	}
	return s
}

// Restored snapshots the state and restores the snapshot into a new
// State, failing the test unless it and a replay of the log snapshot to
// the same bytes: what a restarted or new server would hold.
func (h *Harness) Restored() *State {
	h.T.Helper()
	snap := SnapshotBytes(h.T, h.S)
	restored := New()
	if err := restored.Restore(bytes.NewReader(snap)); err != nil {
		h.T.Fatal(err)
	}
	if !bytes.Equal(SnapshotBytes(h.T, restored), snap) || !bytes.Equal(SnapshotBytes(h.T, h.Replay()), snap) {
		h.T.Fatal("the restored or replayed state differs")
	}
	return restored
}

// SnapshotBytes writes a snapshot of s to memory.
func SnapshotBytes(t TB, s *State) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := s.Snapshot().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
