package state

import (
	"reflect"
	"strings"
	"testing"
)

// TestUsageFollowsTheAttempt: a running attempt's usage samples replace
// each other, the completed event's usage is the attempt's, a preempted
// attempt keeps its usage in the job's history when the job runs again,
// a sample for an attempt that is not running is ignored, and usage
// survives snapshots and replay.
func TestUsageFollowsTheAttempt(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 4, 8)
	sp := spec("j", 1)
	sp.Run = &Run{Image: "reg/tool:1", Network: "none", Inputs: []File{{Name: "ref", URL: "gs://b/ref", Path: "ref"}}}
	b := h.CreateBatch(entry(1, 2, sp))
	h.Schedule()
	sample := func(job uint32, attempt uint16, cpu int64) any {
		return h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: w, Batch: b, Job: job, Attempt: attempt, Sample: true,
			Usage: &Usage{CPUMillis: cpu, PeakMemory: cpu << 10}}}})
	}
	if res := sample(1, 1, 100).(*EventsResult); res.Applied != 1 {
		t.Fatalf("first sample: %+v", res)
	}
	sample(1, 1, 250)
	jb, _ := h.S.Job(b, 1)
	if u := jb.Attempts[0].Usage; u == nil || u.CPUMillis != 250 || u.PeakMemory != 250<<10 || jb.State != Running {
		t.Fatalf("running job's usage: %+v (%s)", u, jb.State)
	}
	if r := jb.Spec.Run; r == nil || r.Image != "reg/tool:1" || len(r.Inputs) != 1 || r.Inputs[0].URL != "gs://b/ref" {
		t.Fatalf("job's run: %+v", jb)
	}
	// A sample for an attempt the state does not hold as running changes
	// nothing.
	if res := sample(1, 2, 999).(*EventsResult); res.Ignored != 1 {
		t.Fatalf("stale sample: %+v", res)
	}
	// Job 1 is preempted with its final usage, runs again and succeeds.
	h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: w, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomePreempted, Start: h.Now, End: h.Tick(),
		Usage: &Usage{CPUMillis: 300, PeakMemory: 1 << 20, BytesIn: 5}}}})
	h.Schedule()
	h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: w, Batch: b, Job: 1, Attempt: 2, Outcome: OutcomeSuccess, Start: h.Now, End: h.Tick(),
		Usage: &Usage{CPUMillis: 1000, PeakMemory: 2 << 20, BytesIn: 5, BytesOut: 7, InputMillis: 12}}}})
	check := func(s *State, where string) {
		jb, _ := s.Job(b, 1)
		if len(jb.Attempts) != 2 || jb.State != Success {
			t.Fatalf("%s: job 1 %+v", where, jb)
		}
		if u := jb.Attempts[0].Usage; u == nil || u.CPUMillis != 300 || u.BytesIn != 5 || jb.Attempts[0].Outcome != OutcomePreempted {
			t.Fatalf("%s: preempted attempt's usage %+v", where, u)
		}
		if u := jb.Attempts[1].Usage; u == nil || u.CPUMillis != 1000 || u.BytesOut != 7 || u.InputMillis != 12 || u.PeakMemory != 2<<20 {
			t.Fatalf("%s: last attempt's usage %+v", where, u)
		}
		if j2, _ := s.Job(b, 2); j2.Attempts[0].Usage != nil {
			t.Fatalf("%s: job 2 has usage %+v without a report", where, j2.Attempts[0].Usage)
		}
	}
	check(h.S, "live")
	check(h.Replay(), "replay")
	restored := New()
	if err := restored.Restore(strings.NewReader(string(SnapshotBytes(t, h.S)))); err != nil {
		t.Fatal(err)
	}
	check(restored, "restore")
	if !reflect.DeepEqual(SnapshotBytes(t, restored), SnapshotBytes(t, h.S)) {
		t.Fatal("a restored state snapshots differently")
	}
}
