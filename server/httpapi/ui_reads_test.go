package httpapi

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/server/state"
)

// TestBatchStages: a batch's stages are its runs of jobs of one name,
// with the stages they wait on; the read looks at a bounded number of
// job entries (state.MaxStages), so a batch of a million distinct jobs
// answers as fast as a small one and says there is more.
func TestBatchStages(t *testing.T) {
	ctx := context.Background()
	srv := newAPI(t, &fakeNode{leader: true, ready: true}, nil)
	c := api.NewClient(srv.URL, rootToken)
	job := func(id int64, name string, count int64, parents ...int64) api.JobSpec {
		return api.JobSpec{JobID: id, Name: name, Count: count, Command: []string{"true"}, CPU: 0.25, Memory: 64 << 20, ParentIDs: parents}
	}
	// scatter: an array of 4; gather waits on all of it; two distinct
	// jobs named "report" wait on gather (one stage).
	resp, err := c.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "default", Jobs: []api.JobSpec{
		job(1, "scatter", 4), job(5, "gather", 0, 1, 2, 3, 4), job(6, "report", 0, 5), job(7, "report", 0, 5),
	}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.BatchStages(ctx, resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		name      string
		first, n  int64
		dependsOn []int
	}
	var have []got
	for _, s := range st.Stages {
		have = append(have, got{s.Name, s.FirstJob, s.NJobs, s.DependsOn})
	}
	want := []got{{"scatter", 1, 4, nil}, {"gather", 5, 1, []int{0}}, {"report", 6, 2, []int{1}}}
	if len(have) != len(want) || st.More {
		t.Fatalf("stages %+v (more %v), want %+v", have, st.More, want)
	}
	for i := range want {
		if have[i].name != want[i].name || have[i].first != want[i].first || have[i].n != want[i].n || !slices.Equal(have[i].dependsOn, want[i].dependsOn) {
			t.Fatalf("stage %d: %+v, want %+v", i, have[i], want[i])
		}
	}

	// More distinct job entries than one read looks at.
	var many []api.JobSpec
	for i := range state.MaxStages + 10 {
		many = append(many, job(int64(i+1), "j"+string(rune('a'+i%2)), 0))
	}
	resp, err = c.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "default", Jobs: many})
	if err != nil {
		t.Fatal(err)
	}
	if st, err = c.BatchStages(ctx, resp.ID); err != nil {
		t.Fatal(err)
	}
	if !st.More || len(st.Stages) != state.MaxStages {
		t.Fatalf("a batch of %d alternating names: %d stages, more %v; want %d and more", len(many), len(st.Stages), st.More, state.MaxStages)
	}
}

// TestBatchActions: a read of a batch says what the caller may do with
// it by the rules the endpoints apply: its owner and a manager may
// cancel it, a viewer may not; none may once it is cancelled.
func TestBatchActions(t *testing.T) {
	ctx := context.Background()
	srv := newAPIWith(t, &fakeNode{leader: true, ready: true}, nil, func(d *Deps) { d.Config.DefaultTokenTTL = time.Hour })
	root := api.NewClient(srv.URL, rootToken)
	tokens := map[string]string{}
	for _, name := range []string{"owner", "boss", "watcher"} {
		u, err := root.CreateUser(ctx, &api.CreateUserRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = u.Token
	}
	if _, err := root.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: "p", Members: []string{"owner", "boss", "watcher"}}); err != nil {
		t.Fatal(err)
	}
	for user, role := range map[string]string{"boss": "manager", "watcher": "viewer"} {
		if err := root.SetRole(ctx, "p", user, role); err != nil {
			t.Fatal(err)
		}
	}
	owner := api.NewClient(srv.URL, tokens["owner"])
	resp, err := owner.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "p", Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	actions := func(user string) []string {
		b, err := api.NewClient(srv.URL, tokens[user]).GetBatch(ctx, resp.ID)
		if err != nil {
			t.Fatal(err)
		}
		return b.Actions
	}
	for user, want := range map[string][]string{"owner": {"cancel", "update"}, "boss": {"cancel"}, "watcher": nil} {
		if got := actions(user); !slices.Equal(got, want) {
			t.Errorf("%s may %v, want %v", user, got, want)
		}
	}
	if err := api.NewClient(srv.URL, tokens["watcher"]).CancelBatch(ctx, resp.ID); !api.IsStatus(err, 403) {
		t.Fatalf("the viewer's cancel: %v, want 403 (the rule Actions says)", err)
	}
	if err := api.NewClient(srv.URL, tokens["boss"]).CancelBatch(ctx, resp.ID); err != nil {
		t.Fatal(err)
	}
	if got := actions("owner"); slices.Contains(got, "cancel") {
		t.Errorf("a cancelled batch still offers cancel: %v", got)
	}
}

// TestSpendHistory: the fleet's spend an hour at each point counts the
// machines alive then: from creation to the decided deletion, live ones
// to now, failed ones until they failed.
func TestSpendHistory(t *testing.T) {
	now := time.Unix(100_000, 0)
	at := func(d time.Duration) int64 { return now.Add(-d).UnixNano() }
	m := func(created, deleted int64, st uint8, since int64, price money.Rate) state.MachineInfo {
		return state.MachineInfo{Machine: state.Machine{Created: created, Deleted: deleted, State: st, Since: since, PricePerHour: price}}
	}
	machines := []state.MachineInfo{
		m(at(5*time.Hour), at(3*time.Hour), state.MachineDeleted, at(3*time.Hour), money.DollarPerHour),    // 1 $/h from -5h to -3h
		m(at(2*time.Hour), 0, state.MachineActive, at(2*time.Hour), 2*money.DollarPerHour),                 // 2 $/h from -2h on
		m(at(4*time.Hour), 0, state.MachineFailed, at(4*time.Hour-30*time.Minute), 10*money.DollarPerHour), // 10 $/h for half an hour
	}
	pts := spendHistory(machines, now, 6*time.Hour, 7) // -6h, -5h, ... now
	want := []money.Rate{0, money.DollarPerHour, 11 * money.DollarPerHour, 0, 2 * money.DollarPerHour, 2 * money.DollarPerHour, 2 * money.DollarPerHour}
	nodes := []int{0, 1, 2, 0, 1, 1, 1}
	for i, p := range pts {
		if p.SpendPerHour != want[i] || p.Nodes != nodes[i] || !p.Time.Equal(now.Add(time.Duration(i-6)*time.Hour)) {
			t.Errorf("point %d at %s: %s/h, %d nodes; want %s/h, %d nodes", i, p.Time, p.SpendPerHour, p.Nodes, want[i], nodes[i])
		}
	}
}
