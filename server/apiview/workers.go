package apiview

import (
	"fmt"
	"math"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/state"
)

// AttemptID is an attempt a worker names, refused when it names none.
func AttemptID(a api.AttemptRef) (state.AttemptID, bool) {
	if a.BatchID < 1 || a.JobID < 1 || a.JobID > math.MaxUint32 || a.Attempt < 1 || a.Attempt > math.MaxUint16 {
		return state.AttemptID{}, false
	}
	return state.AttemptID{Batch: uint64(a.BatchID), Job: uint32(a.JobID), Attempt: uint16(a.Attempt)}, true
}

// maxClockSkew is how far ahead of a server's clock a worker's times may
// be.
const maxClockSkew = time.Minute

// Event checks a worker's event against what the server knows (its
// instance, its clock) and turns it into the state's.
func Event(inst state.Instance, e api.AttemptEvent, now time.Time) (state.Event, error) {
	id, ok := AttemptID(e.AttemptRef)
	if !ok {
		return state.Event{}, fmt.Errorf("event for %s: not a valid attempt", e.AttemptRef)
	}
	ev := state.Event{Instance: inst.ID, Batch: id.Batch, Job: id.Job, Attempt: id.Attempt, Message: e.Message}
	if !e.StartTime.IsZero() {
		if e.StartTime.After(now.Add(maxClockSkew)) {
			return state.Event{}, fmt.Errorf("event for %s: start_time %s is later than this server's clock (%s) by more than %s",
				e.AttemptRef, e.StartTime.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano), maxClockSkew)
		}
		// An attempt cannot have started before its worker activated
		// (this server's clock): a worker backdating a start would bill
		// the project for time it never ran.
		if act := time.Unix(0, inst.Activated); e.StartTime.Before(act) {
			e.StartTime = act
		}
		ev.Start = e.StartTime.UnixNano()
	}
	// Nor can it have ended after this server heard of it, or before its
	// worker activated (a time before 1678 or after 2262 would wrap as
	// nanoseconds: into the future, billing the project for it).
	if e.EndTime.After(now) {
		e.EndTime = now
	}
	if act := time.Unix(0, inst.Activated); !e.EndTime.IsZero() && e.EndTime.Before(act) {
		e.EndTime = act
	}
	if e.Usage != nil {
		// The attempt's wall time as the worker tells it, bounded by this
		// server's clock: the usage cannot claim more than the instance
		// could give over it.
		end := now
		if e.Kind == api.EventCompleted && !e.EndTime.IsZero() && e.EndTime.Before(now) {
			end = e.EndTime
		}
		wall := time.Duration(0)
		if !e.StartTime.IsZero() {
			wall = end.Sub(e.StartTime)
		}
		if err := e.Usage.Validate(float64(inst.CPUMilli)/1000, inst.Memory, wall); err != nil {
			return state.Event{}, fmt.Errorf("event for %s: %w", e.AttemptRef, err)
		}
		ev.Usage = usage(e.Usage)
	}
	switch e.Kind {
	case api.EventUsage:
		if ev.Usage == nil {
			return state.Event{}, fmt.Errorf("event for %s: a usage event carries usage", e.AttemptRef)
		}
		ev.Sample = true
	case api.EventStarted:
		ev.Started = true
	case api.EventCompleted:
		o, ok := state.ParseOutcome(e.Outcome)
		if !ok || o == state.OutcomeLost {
			return state.Event{}, fmt.Errorf("event for %s: outcome %q is not success, failed, error or cancelled", e.AttemptRef, e.Outcome)
		}
		ev.Outcome = o
		ev.OOM = e.OOM && (o == state.OutcomeFailed || o == state.OutcomeError)
		ev.Leaving = e.WorkerLeaving && o == state.OutcomePreempted
		ev.Exit = int32(e.ExitCode)
		ev.End = e.EndTime.UnixNano()
		if e.EndTime.IsZero() {
			ev.End = now.UnixNano()
		}
	default:
		return state.Event{}, fmt.Errorf("event for %s: kind %q is not started, usage or completed", e.AttemptRef, e.Kind)
	}
	if len(ev.Message) > api.MaxEventMessage {
		ev.Message = ev.Message[:api.MaxEventMessage]
	}
	return ev, nil
}

// toUsage converts validated usage to the state's units.
func usage(u *api.Usage) *state.Usage {
	ms := func(s float64) int64 { return int64(math.Round(s * 1000)) }
	return &state.Usage{CPUMillis: ms(u.CPUSeconds), PeakMemory: u.PeakMemory, BytesIn: u.BytesIn, BytesOut: u.BytesOut,
		ImageMillis: ms(u.ImageSeconds), InputMillis: ms(u.InputSeconds), OutputMillis: ms(u.OutputSeconds), Memory: u.Memory}
}

// SyncResponse is what a worker's sync is answered: the attempts it
// starts (with the storage credentials grant gives each), those it kills
// and those it preempts.
func SyncResponse(acked int, v state.WorkerView, grant func(project string, a *api.Assignment) []api.StorageGrant) api.SyncResponse {
	out := api.SyncResponse{Acked: acked}
	for _, a := range v.Assign {
		out.Assign = append(out.Assign, api.Assignment{
			AttemptRef:     api.AttemptRef{BatchID: int64(a.Batch), JobID: int64(a.Job), Attempt: int(a.Attempt)},
			Name:           jobDisplayName(a),
			ArrayIndex:     a.Index,
			Command:        a.Spec.Command,
			Env:            a.Spec.Env,
			CPU:            float64(a.Spec.CPUMilli) / 1000,
			Memory:         a.Spec.Memory,
			TimeoutSeconds: float64(a.Spec.TimeoutMs) / 1000,
		})
		if r := a.Spec.Run; r != nil {
			as := &out.Assign[len(out.Assign)-1]
			as.Image, as.Network, as.MaxProcesses = r.Image, r.Network, r.MaxProcesses
			as.PreemptionGraceSeconds = float64(r.PreemptGraceMs) / 1000
			as.Nomad = r.Nomad
			as.Inputs, as.Outputs = files(r)
			as.Storage = grant(a.Project, as)
		}
	}
	for _, k := range v.Kill {
		out.Kill = append(out.Kill, api.AttemptRef{BatchID: int64(k.Batch), JobID: int64(k.Job), Attempt: int(k.Attempt)})
	}
	for _, p := range v.Preempt {
		out.Preempt = append(out.Preempt, api.Preemption{AttemptRef: api.AttemptRef{BatchID: int64(p.Batch), JobID: int64(p.Job), Attempt: int(p.Attempt)},
			Reason: p.Reason, GraceSeconds: float64(p.GraceMs) / 1000})
	}
	return out
}

func jobDisplayName(a state.AssignmentInfo) string {
	if a.Spec.Array {
		return fmt.Sprintf("%s[%d]", a.Spec.Name, a.Index)
	}
	return a.Spec.Name
}
