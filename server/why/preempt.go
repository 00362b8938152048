package why

import (
	"fmt"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/view"
)

// Queues words, for job why, what a preemption round found of each
// leaf queue that waits: when its guarantee is reclaimed from borrowers,
// when it preempts for its fair share.
func Queues(in *scheduler.PreemptInput, out *scheduler.PreemptOutput, timers *view.Timers) map[string][]api.Waiting {
	m := map[string][]api.Waiting{}
	at := func(since, after int64) string {
		t := time.Unix(0, since+after).UTC()
		if since+after <= in.Now {
			return "now (its attempts told to stop give their cores back as they end)"
		}
		return "at " + t.Format("15:04:05 UTC") + fmt.Sprintf(" (in %s)", time.Duration(since+after-in.Now).Round(time.Second))
	}
	for i := range in.Queues {
		q := &in.Queues[i]
		if out.Short[i] {
			g := q.Guarantee
			guaranteed := func(k int) bool { return k < len(g) && g[k] > 0 }
			m[q.Name] = append(m[q.Name], api.Waiting{Reason: "reclaim", Message: fmt.Sprintf(
				"queue %s holds %s of its guarantee of %s: what borrowing queues hold of it is reclaimed %s",
				q.Name, in.Amount(q.Used, guaranteed), in.Amount(g, guaranteed), at(timers.Short[q.Name], q.ReclaimGraceNs))})
		}
		if out.Starved[i] {
			dom := in.Dominant(out.FairShare[i])
			m[q.Name] = append(m[q.Name], api.Waiting{Reason: "preempt", Message: fmt.Sprintf(
				"queue %s holds %s, below %g of its fair share of %s: it preempts from preemptible queues above their share %s",
				q.Name, in.Amount(q.Used, func(k int) bool { return k == dom }), float64(q.Threshold())/1000,
				in.Amount(out.FairShare[i], func(k int) bool { return k == dom }), at(timers.Starved[q.Name], q.AfterNs))})
		}
	}
	return m
}
