package httpapi

import (
	"context"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/server/state"
)

// Attacks (helper 46b) on POST /api/v1/queue-rebalance: it reads each
// moved queue (QueueByPath) and applies it back whole with new home
// clusters (ApplyPlacement). A write committed between the read and the
// apply (another admin's change, a delete) is what interleave makes.

type atkHistory struct{ st history.Store }

func (h atkHistory) Store() (history.Store, error) { return h.st, nil }
func (atkHistory) Status() api.HistoryStatus       { return api.HistoryStatus{} }

// interleaveNode commits before (once) just before the first
// ApplyPlacement it is asked to commit: as if another request's entry
// had reached the log between the handler's read and its own entry.
type interleaveNode struct {
	*fakeNode
	before func()
}

func (n *interleaveNode) Apply(c state.Command) (any, error) {
	_, placing := c.(*state.ApplyPlacement)
	_, auto := c.(*state.AutoApplyQueues)
	if (placing || auto) && n.before != nil {
		f := n.before
		n.before = nil
		f()
	}
	return n.fakeNode.Apply(c)
}

// atkRebalanceAPI serves an API whose store holds east at 90% (org/tier3
// 50%, a removed queue 40%) and west idle, with the queues made.
func atkRebalanceAPI(t *testing.T) (*interleaveNode, string) {
	t.Helper()
	st, err := history.OpenEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	inner := &fakeNode{leader: true, ready: true, leaderID: "s1"}
	node := &interleaveNode{fakeNode: inner}
	srv := newAPIWith(t, inner, nil, func(d *Deps) { d.Node = node; d.History = atkHistory{st} })
	if code, body := call(t, "POST", srv.URL+"/api/v1/placement", `{"clusters":[{"name":"east","region":"r1"},{"name":"west","region":"r1"}],
		"queues":[{"path":"org"},{"path":"org/tier3","weight":2}]}`); code != 200 {
		t.Fatalf("placement: %d %s", code, body)
	}
	// A worker in each cluster: a rebalance sends work only where
	// workers are.
	for _, c := range []string{"east", "west"} {
		if _, err := inner.Apply(&state.Activate{Now: time.Now().UnixNano(), Name: c + "-w", NodeID: c + "-w", CPUMilli: 64_000, Memory: 256 << 30,
			TokenHash: "h-" + c, Region: "r1", Cluster: c}); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Now().Add(-10 * time.Hour).Unix()
	var samples []history.QueueSample
	for h := range int64(10) {
		t0 := at + h*3600
		samples = append(samples,
			history.QueueSample{Cluster: "east", At: t0, Seconds: 3600, CPUMilli: 64_000, Memory: 256 << 30, Jobs: 4},
			history.QueueSample{Cluster: "west", At: t0, Seconds: 3600, CPUMilli: 64_000, Memory: 256 << 30, Jobs: 4},
			history.QueueSample{Queue: "org/tier3", Cluster: "east", At: t0, Seconds: 3600, CPUMilli: 32_000, Memory: 1 << 30},
			history.QueueSample{Queue: "org/gone", Cluster: "east", At: t0, Seconds: 3600, CPUMilli: 25_600, Memory: 1 << 30})
	}
	if err := st.PutQueueUsage(context.Background(), samples); err != nil {
		t.Fatal(err)
	}
	return node, srv.URL
}

// TestAttack46bApplyRebalanceLosesConcurrentChange: another admin sets
// org/tier3's weight to 7 between the rebalance's read and its apply;
// the rebalance writes the queue it read (weight 2) back whole.
func TestAttack46bApplyRebalanceLosesConcurrentChange(t *testing.T) {
	node, url := atkRebalanceAPI(t)
	node.before = func() {
		q, _ := node.st.QueueByPath("org/tier3")
		q.Queue.Weight = 7
		q.Queue.MaxPriority = 5
		if _, err := node.fakeNode.Apply(&state.SetQueue{Now: time.Now().UnixNano(), Queue: q.Queue}); err != nil {
			t.Error(err)
		}
	}
	if code, body := call(t, "POST", url+"/api/v1/queue-rebalance", `{}`); code != 200 {
		t.Fatalf("rebalance: %d %s", code, body)
	}
	q, _ := node.st.QueueByPath("org/tier3")
	if len(q.HomeClusters) != 1 || q.HomeClusters[0] != "west" {
		t.Fatalf("not moved: %+v", q.HomeClusters)
	}
	if q.Weight != 7 || q.MaxPriority != 5 {
		t.Errorf("the other admin's change was overwritten: weight %d, max_priority %d (set to 7 and 5 before the rebalance's entry)", q.Weight, q.MaxPriority)
	}
}

// TestAttack46bApplyRebalanceRecreatesDeletedQueue: org/tier3 is
// deleted between the rebalance's read and its apply; the rebalance's
// ApplyPlacement declares it again.
func TestAttack46bApplyRebalanceRecreatesDeletedQueue(t *testing.T) {
	node, url := atkRebalanceAPI(t)
	node.before = func() {
		q, _ := node.st.QueueByPath("org/tier3")
		if _, err := node.fakeNode.Apply(&state.SetQueue{Now: time.Now().UnixNano(), Queue: q.Queue, Delete: true}); err != nil {
			t.Error(err)
		}
	}
	code, body := call(t, "POST", url+"/api/v1/queue-rebalance", `{}`)
	if _, ok := node.st.QueueByPath("org/tier3"); ok {
		t.Errorf("org/tier3, deleted before the rebalance's entry, exists again (rebalance answered %d %.200s)", code, body)
	}
}
