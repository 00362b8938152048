package apiview

import (
	"strings"
	"testing"

	"github.com/drover-sched/drover/api"
)

// TestQueueIsCheckedBeforeTheLog: a queue with an unknown strategy, a bad
// GPU type, an amount, count or duration out of bounds is refused by the
// API, naming the field, before any command is made of it.
func TestQueueIsCheckedBeforeTheLog(t *testing.T) {
	neg := -1.0
	for _, c := range []struct {
		q    api.Queue
		want string
	}{
		{api.Queue{Path: "t", Strategy: strings.Repeat("x", 1<<20)}, "unknown placement strategy"},
		{api.Queue{Path: "t", Guarantee: api.Quota{GPUs: map[string]int{"a 100": 1}}}, "use letters, digits"},
		{api.Queue{Path: "bad name"}, "use letters, digits"},
		{api.Queue{Path: "a/b/c/d/e/f/g/h/i"}, "queues nest at most 8 levels"},
		{api.Queue{Path: "t", Guarantee: api.Quota{CPU: 2e9}}, "queue t: guarantee: cpu must be between 0 and 1000000000 cores"},
		{api.Queue{Path: "t", BorrowLimit: &api.Limit{CPU: &neg}}, "queue t: borrow_limit: cpu must be between 0"},
		{api.Queue{Path: "t", MaxRunning: api.MaxRunning{Jobs: -3}}, "queue t: max_running"},
		{api.Queue{Path: "t", PreemptAfter: "forever"}, "queue t: preempt_after \"forever\" is not a duration"},
		{api.Queue{Path: "t", MinRuntime: "9000h"}, "queue t: min_runtime must be a duration between 0s and 720h"},
		{api.Queue{Path: "t", PreemptThreshold: 1.5}, "queue t: preempt_threshold must be between 0 and 1"},
		{api.Queue{Path: "t", Weight: 2_000_000}, "queue t: weight 2000000 must be between 1 and 1000000"},
	} {
		if _, err := QueueFromAPI(c.q); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("queue %.40q: %v, want an error with %q", c.q.Path+c.q.Strategy, err, c.want)
		}
	}
	zero := 0.0
	q, err := QueueFromAPI(api.Queue{Path: "org/ok", Strategy: "pack", BillingProjects: []string{"p"}, Guarantee: api.Quota{CPU: 8},
		BorrowLimit: &api.Limit{CPU: &zero}, PreemptAfter: "5m", MaxRunning: api.MaxRunning{Jobs: 10, CPU: 2.5}})
	if err != nil {
		t.Fatalf("a good queue: %v", err)
	}
	if quota := q.Queue.Quota(); quota.CPUMilli != 8000 || quota.Memory != 0 || quota.MaxJobs != 10 || quota.MaxMilli != 2500 || q.Preemption.AfterNs != 300e9 {
		t.Fatalf("a good queue converts to %+v (quota %+v)", q, quota)
	}
}
