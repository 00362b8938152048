package state

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/drover-sched/drover/server/scheduler"
)

// harness applies commands the way the FSM does (encode, decode, apply),
// keeps the log for replays, and checks invariants after every command.
type harness struct {
	t     *testing.T
	s     *State
	log   [][]byte
	now   int64
	trans []transition
}

type transition struct {
	batch    uint64
	job      uint32
	from, to JobState
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, s: New(), now: 1_000_000_000}
	h.s.SetHooks(Hooks{Transition: func(b uint64, j uint32, from, to JobState) {
		h.trans = append(h.trans, transition{b, j, from, to})
	}})
	h.apply(&Bootstrap{Now: h.tick(), Admin: "root", TokenHash: "root-hash", DefaultProject: "default"})
	return h
}

func (h *harness) tick() int64 {
	h.now += 1_000_000
	return h.now
}

func (h *harness) apply(c Command) any {
	h.t.Helper()
	data, err := Encode(c)
	if err != nil {
		h.t.Fatalf("encode %T: %v", c, err)
	}
	dec, err := Decode(data)
	if err != nil {
		h.t.Fatalf("decode %T: %v", c, err)
	}
	h.log = append(h.log, data)
	res := h.s.Apply(uint64(len(h.log)), dec)
	checkInvariants(h.t, h.s)
	for _, tr := range h.trans {
		if !TransitionAllowed(tr.from, tr.to) {
			h.t.Fatalf("job %d/%d: forbidden transition %s -> %s", tr.batch, tr.job, tr.from, tr.to)
		}
	}
	h.trans = h.trans[:0]
	return res
}

// must applies a command that has to succeed.
func (h *harness) must(c Command) any {
	h.t.Helper()
	res := h.apply(c)
	if err, ok := res.(*ApplyError); ok {
		h.t.Fatalf("%T rejected: %v", c, err)
	}
	return res
}

// mustFail applies a command that has to be rejected with the given kind.
func (h *harness) mustFail(c Command, kind ErrorKind) *ApplyError {
	h.t.Helper()
	res := h.apply(c)
	err, ok := res.(*ApplyError)
	if !ok {
		h.t.Fatalf("%T accepted (%v), want rejection", c, res)
	}
	if err.Kind != kind {
		h.t.Fatalf("%T rejected with kind %d (%v), want %d", c, err.Kind, err, kind)
	}
	return err
}

func (h *harness) activate(name string, cores int64, memGiB int64) uint32 {
	h.t.Helper()
	res := h.must(&Activate{Now: h.tick(), Name: name, CPUMilli: cores * 1000, Memory: memGiB << 30, TokenHash: "tok-" + name + fmt.Sprint(h.now)})
	return res.(*ActivateResult).Instance
}

func (h *harness) createBatch(jobs ...JobEntry) uint64 {
	h.t.Helper()
	res := h.must(&CreateBatch{Now: h.tick(), User: "root", BillingProject: "default", Jobs: jobs})
	return res.(*UpdateResult).Batch
}

// schedule runs the real scheduler on the state and applies its plan.
func (h *harness) schedule() *PlanResult {
	h.t.Helper()
	out := scheduler.Schedule(h.s.SchedulingInput(0))
	return h.must(PlanFromSchedule(out, h.tick())).(*PlanResult)
}

// complete reports every running attempt on an instance as ended with the
// outcome chosen by fn (nil: success).
func (h *harness) complete(inst uint32, fn func(b uint64, j uint32) Outcome) int {
	h.t.Helper()
	v := h.s.WorkerView(inst, nil)
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
		evs = append(evs, Event{Instance: inst, Batch: a.Batch, Job: a.Job, Attempt: a.Attempt, Outcome: o, Exit: exit, Start: h.now, End: h.tick()})
	}
	if len(evs) > 0 {
		h.must(&Events{Now: h.tick(), Events: evs})
	}
	return len(evs)
}

// runAll schedules and completes until nothing is running or ready.
func (h *harness) runAll(insts []uint32, fn func(b uint64, j uint32) Outcome) {
	h.t.Helper()
	for i := 0; i < 10000; i++ {
		h.schedule()
		n := 0
		for _, id := range insts {
			n += h.complete(id, fn)
		}
		if n == 0 {
			return
		}
	}
	h.t.Fatal("runAll did not converge")
}

func (h *harness) batch(id uint64) *Batch { return h.s.batches[id] }

func (h *harness) state(b uint64, j uint32) JobState { return h.s.batches[b].jobs[j-1].state }

// replay applies the harness's log to a fresh state and returns it.
func (h *harness) replay() *State {
	s := New()
	for i, data := range h.log {
		c, err := Decode(data)
		if err != nil {
			h.t.Fatal(err)
		}
		s.Apply(uint64(i+1), c)
	}
	return s
}

func snapshotBytes(t *testing.T, s *State) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := s.Snapshot().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func spec(name string, cpu float64) *Spec {
	return &Spec{Name: name, Command: []string{"true"}, CPUMilli: int64(cpu * 1000), Memory: 1 << 30}
}

func entry(first, count uint32, s *Spec, parents ...Range) JobEntry {
	return JobEntry{First: first, Count: count, Spec: s, Parents: parents}
}

// checkInvariants recomputes every counter from the job records.
func checkInvariants(t *testing.T, s *State) {
	t.Helper()
	s.mu.RLock()
	defer s.mu.RUnlock()
	type ucount struct{ readyMilli, runningMilli, ready, running int64 }
	users := map[string]*ucount{}
	instUsed := map[uint32][2]int64{}
	instRunning := map[uint32]int{}
	for _, b := range s.batches {
		var counts [numStates]int64
		var readyMilli int64
		u := users[b.User]
		if u == nil {
			u = &ucount{}
			users[b.User] = u
		}
		for i := range b.jobs {
			j := &b.jobs[i]
			id := uint32(i + 1)
			counts[j.state]++
			if j.state == Staged {
				continue
			}
			g := b.groupOf(id)
			if g == nil {
				t.Fatalf("batch %d job %d has no group", b.ID, id)
			}
			inQueue := b.ready.contains(id)
			if (j.state == Ready) != inQueue {
				t.Fatalf("batch %d job %d: state %s but in ready queue = %v", b.ID, id, j.state, inQueue)
			}
			switch j.state {
			case Ready:
				readyMilli += g.spec.CPUMilli
				u.readyMilli += g.spec.CPUMilli
				u.ready++
			case Running:
				u.runningMilli += g.spec.CPUMilli
				u.running++
				used := instUsed[j.instance]
				instUsed[j.instance] = [2]int64{used[0] + g.spec.CPUMilli, used[1] + g.spec.Memory}
				instRunning[j.instance]++
				if _, ok := s.instances[j.instance].running[attemptKey{b.ID, id}]; !ok {
					t.Fatalf("batch %d job %d running on instance %d which does not list it", b.ID, id, j.instance)
				}
			}
		}
		counts[Staged] = 0
		bc := b.counts
		bc[Staged] = 0
		if counts != bc {
			t.Fatalf("batch %d counts %v, recomputed %v", b.ID, b.counts, counts)
		}
		if readyMilli != b.readyMilli {
			t.Fatalf("batch %d readyMilli %d, recomputed %d", b.ID, b.readyMilli, readyMilli)
		}
		var total int64
		for _, n := range counts {
			total += n
		}
		if total != b.nJobs {
			t.Fatalf("batch %d has %d committed jobs, nJobs %d", b.ID, total, b.nJobs)
		}
		final := counts[Success] + counts[Failed] + counts[Cancelled] + counts[Error]
		open := 0
		for _, u := range b.updates {
			if !u.Committed && !u.Discarded {
				open++
			}
		}
		if open != b.open {
			t.Fatalf("batch %d counts %d open updates, has %d", b.ID, b.open, open)
		}
		if (b.Completed != 0) != (final == b.nJobs && open == 0) {
			t.Fatalf("batch %d completed=%d but %d/%d final", b.ID, b.Completed, final, b.nJobs)
		}
	}
	for name, u := range s.sched {
		want := users[name]
		if want == nil {
			want = &ucount{}
		}
		if u.readyMilli != want.readyMilli || u.runningMilli != want.runningMilli || u.readyJobs != want.ready || u.runningJobs != want.running {
			t.Fatalf("user %s counters ready=%d/%d running=%d/%d, recomputed ready=%d/%d running=%d/%d", name,
				u.readyJobs, u.readyMilli, u.runningJobs, u.runningMilli, want.ready, want.readyMilli, want.running, want.runningMilli)
		}
		for _, b := range u.active {
			if b.ready.empty() {
				t.Fatalf("user %s lists batch %d as active with an empty queue", name, b.ID)
			}
		}
	}
	for id, inst := range s.instances {
		if !inst.Active {
			if len(inst.running) != 0 {
				t.Fatalf("retired instance %d still runs %d attempts", id, len(inst.running))
			}
			continue
		}
		used := instUsed[id]
		if inst.FreeMilli != inst.CPUMilli-used[0] || inst.FreeMem != inst.Memory-used[1] {
			t.Fatalf("instance %d free %d/%d, recomputed %d/%d", id, inst.FreeMilli, inst.FreeMem, inst.CPUMilli-used[0], inst.Memory-used[1])
		}
		if inst.FreeMilli < 0 || inst.FreeMem < 0 {
			t.Fatalf("instance %d oversubscribed: free %d/%d", id, inst.FreeMilli, inst.FreeMem)
		}
		if len(inst.running) != instRunning[id] {
			t.Fatalf("instance %d lists %d attempts, %d jobs run there", id, len(inst.running), instRunning[id])
		}
	}
}

func schedulerSchedule(in *scheduler.Input) *scheduler.Output { return scheduler.Schedule(in) }
