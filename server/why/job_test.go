package why

import (
	"testing"
	"time"

	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/view"
)

// TestJobWhySaysItRetriesWithMoreMemory: a Ready job that ran out of
// memory says what it runs again with.
func TestJobWhySaysItRetriesWithMoreMemory(t *testing.T) {
	in := JobInput{Place: view.JobPlace{State: state.Ready, Memory: 1 << 30, OOMFrom: 512 << 20, Active: 1, Usable: 1}, Batch: 1, Job: 1, Now: time.Unix(100, 0)}
	out := Job(in)
	found := false
	for _, r := range out.Reasons {
		if r.Reason == "oom_retry" {
			found = r.Message == "retrying with 1GiB after running out of memory with 512MiB"
			if !found {
				t.Fatalf("message %q", r.Message)
			}
		}
	}
	if !found {
		t.Fatalf("reasons %+v: no oom_retry", out.Reasons)
	}
	in.Place.OOMFrom = 0
	for _, r := range Job(in).Reasons {
		if r.Reason == "oom_retry" {
			t.Fatal("a job that did not run out of memory says it retries with more")
		}
	}
}
