package httpapi

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/cluster"
	"github.com/drover-sched/drover/server/state"
)

// withRunningJob gives a state batch 1 whose job 1 runs as attempt 1.
func withRunningJob(t *testing.T, st *state.State) {
	t.Helper()
	for i, c := range []state.Command{
		&state.CreateBatch{Now: 2, User: "root", BillingProject: "default", Jobs: []state.JobEntry{{First: 1, Count: 1,
			Spec: &state.Spec{Name: "j", Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30}}}},
		&state.Activate{Now: 3, Name: "w", CPUMilli: 4000, Memory: 8 << 30, TokenHash: "t"},
	} {
		if ae, ok := st.Apply(uint64(2+i), c).(*state.ApplyError); ok {
			t.Fatal(ae)
		}
	}
	inst := st.ActiveInstances()[0]
	res := st.Apply(4, &state.Plan{Now: 4, Placements: []state.Placement{{Batch: 1, First: 1, Count: 1, Attempt: 1, Instance: inst}}})
	if pr := res.(*state.PlanResult); pr.Placed != 1 {
		t.Fatalf("plan: %+v", pr)
	}
}

// TestPartialLogIsMarked: a log gathered from several servers is streamed
// in chunk order; when a server that may hold chunks does not answer, or
// the chunk numbers have holes, the answer says so in a header. Before, a
// log missing chunks was returned with 200 and no sign of it.
func TestPartialLogIsMarked(t *testing.T) {
	ctx := context.Background()
	peerNode := &fakeNode{ready: true}
	peer := newAPI(t, peerNode, nil)
	main := &fakeNode{leader: true, ready: true}
	members := fakeMembers{
		"s1": {ID: "s1", Alive: true},
		"s2": {ID: "s2", HTTP: strings.TrimPrefix(peer.URL, "http://"), Alive: true},
	}
	srv := newAPI(t, main, members)
	withRunningJob(t, main.st)
	withRunningJob(t, peerNode.st)
	put := func(n *fakeNode, seq int, data string) {
		if err := n.logs.PutChunk(ctx, 1, 1, 1, seq, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	put(main, 0, "zero ")
	put(peerNode, 1, "one ")
	put(main, 3, "three")
	get := func() (string, string) {
		req, _ := http.NewRequest("GET", srv.URL+"/api/v1/batches/1/jobs/1/log", nil)
		req.Header.Set("Authorization", "Bearer "+rootToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("log: %d %s", resp.StatusCode, body)
		}
		return string(body), resp.Header.Get(api.LogIncompleteHeader)
	}
	if body, why := get(); body != "zero one three" || why != "chunks 2 missing" {
		t.Fatalf("log with a hole: %q, marked %q", body, why)
	}
	// A server that does not answer (nothing listens there), and one that
	// gossip says is down.
	members["s3"] = cluster.Member{ID: "s3", HTTP: "127.0.0.1:1", Alive: true}
	members["s4"] = cluster.Member{ID: "s4", HTTP: "127.0.0.1:1", Alive: false}
	put(peerNode, 2, "two ")
	body, why := get()
	if body != "zero one two three" || !strings.Contains(why, "did not answer") || !strings.Contains(why, "s3") || !strings.Contains(why, "s4") || strings.Contains(why, "missing") {
		t.Fatalf("log with silent servers: %q, marked %q", body, why)
	}
	delete(members, "s3")
	delete(members, "s4")
	if body, why := get(); body != "zero one two three" || why != "" {
		t.Fatalf("whole log: %q, marked %q", body, why)
	}
}

func TestIncompleteLogReasons(t *testing.T) {
	for _, c := range []struct {
		silent []string
		seqs   []int
		want   string
	}{
		{nil, []int{0, 1, 2}, ""},
		{nil, nil, ""},
		{nil, []int{1}, "chunks 0 missing"},
		{nil, []int{0, 4, 6}, "chunks 1-3, 5 missing"},
		{[]string{"s2"}, []int{0}, "server s2 did not answer"},
	} {
		if got := incompleteLog(c.silent, c.seqs); got != c.want {
			t.Errorf("incompleteLog(%v, %v) = %q, want %q", c.silent, c.seqs, got, c.want)
		}
	}
}

// TestLogFromOffset: ?offset=N sends the log from byte N on, across
// chunks held here and on another server, skipping the chunks wholly
// before it, and says the whole log's size (the web UI follows a log
// with it). Before, a reader had to fetch the whole log each time.
func TestLogFromOffset(t *testing.T) {
	ctx := context.Background()
	peerNode := &fakeNode{ready: true}
	peer := newAPI(t, peerNode, nil)
	main := &fakeNode{leader: true, ready: true}
	srv := newAPI(t, main, fakeMembers{
		"s1": {ID: "s1", Alive: true},
		"s2": {ID: "s2", HTTP: strings.TrimPrefix(peer.URL, "http://"), Alive: true},
	})
	withRunningJob(t, main.st)
	withRunningJob(t, peerNode.st)
	for seq, data := range []string{"zero ", "one ", "two ", "three"} {
		n := main
		if seq == 1 {
			n = peerNode
		}
		if err := n.logs.PutChunk(ctx, 1, 1, 1, seq, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	whole := "zero one two three"
	c := api.NewClient(srv.URL, rootToken)
	for _, off := range []int64{0, 3, 5, 7, 9, 13, int64(len(whole)), 100} {
		ls, err := c.OpenJobLogAt(ctx, 1, 1, 0, off)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(ls)
		ls.Close()
		want := ""
		if off < int64(len(whole)) {
			want = whole[off:]
		}
		if string(got) != want || ls.Size != int64(len(whole)) || ls.Attempt != 1 {
			t.Errorf("offset %d: %q (size %d, attempt %d), want %q (size %d, attempt 1)", off, got, ls.Size, ls.Attempt, want, len(whole))
		}
	}
	req, _ := http.NewRequest("GET", srv.URL+"/api/v1/batches/1/jobs/1/log?offset=-1", nil)
	req.Header.Set("Authorization", "Bearer "+rootToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("offset=-1: HTTP %d, want 400", resp.StatusCode)
	}
}
