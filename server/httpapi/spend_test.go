package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/server/state"
)

// TestJobWhyNamesTheSpendLimit: a Ready job of a billing project that has
// reached its spend limit says so in job why (the round lists one run of
// such a project: the others are told from the project's spend), and
// every job of a project with a limit says what it has spent of it.
func TestJobWhyNamesTheSpendLimit(t *testing.T) {
	node := &fakeNode{leader: true, ready: true, leaderID: "s1"}
	srv := newAPI(t, node, nil)
	must := func(c state.Command) any {
		res, err := node.Apply(c)
		if err != nil {
			t.Fatalf("%T: %v", c, err)
		}
		return res
	}
	// One core at $10 an hour, running for an hour: $10 of a $5 limit.
	start := time.Now().Add(-time.Hour).UnixNano()
	must(&state.SetRates{Now: start - 1, Rates: []state.RateEntry{{Resource: "compute", Price: 10 * money.DollarPerHour}}})
	must(&state.CreateBillingProject{Now: start, Name: "lab", Members: []string{"root"}})
	must(&state.SetSpendLimit{Project: "lab", Limit: 5 * money.Dollar})
	inst := must(&state.Activate{Now: start, Name: "w", CPUMilli: 8000, Memory: 8 << 30, TokenHash: "t"}).(*state.ActivateResult).Instance
	sp := &state.Spec{Name: "j", Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30, Array: true}
	b := must(&state.CreateBatch{Now: start, User: "root", BillingProject: "lab", Jobs: []state.JobEntry{{First: 1, Count: 2, Spec: sp}}}).(*state.UpdateResult).Batch
	must(&state.Plan{Now: start, Placements: []state.Placement{{Batch: b, First: 1, Count: 1, Attempt: 1, Instance: inst}}})
	must(&state.Events{Now: start, Events: []state.Event{{Instance: inst, Batch: b, Job: 1, Attempt: 1, Started: true, Start: start}}})

	code, body := call(t, "GET", srv.URL+"/api/v1/batches/1/jobs/2/why", "")
	if code != http.StatusOK {
		t.Fatalf("job why: %d %s", code, body)
	}
	var why api.JobWhy
	_ = json.Unmarshal([]byte(body), &why)
	if why.State != api.JobReady || len(why.Reasons) < 2 || why.Reasons[0].Reason != "spend_limit" ||
		!strings.HasPrefix(why.Reasons[0].Message, "billing project lab reached its spend limit of $5.00 (spent $10.") {
		t.Fatalf("job 2 why: %+v", why)
	}
	spend := why.Reasons[len(why.Reasons)-1]
	if spend.Reason != "spend" || !strings.HasPrefix(spend.Message, "billing project lab has spent $10.") || !strings.HasSuffix(spend.Message, "of its $5.00 spend limit") {
		t.Fatalf("job 2 why: %+v", why)
	}
}

// TestSpendLimitIsCheckedBeforeTheLog: a spend limit out of bounds is
// refused with 400 naming the bounds, and nothing of it is applied.
func TestSpendLimitIsCheckedBeforeTheLog(t *testing.T) {
	node := &fakeNode{leader: true, ready: true, leaderID: "s1"}
	srv := newAPI(t, node, nil)
	for _, limit := range []string{"-1", "1e10"} {
		code, msg := call(t, "PUT", srv.URL+"/api/v1/billing-projects/default/spend-limit", `{"limit": `+limit+`}`)
		if code != http.StatusBadRequest || !strings.Contains(msg, "a spend limit is between 0 (none) and 1e+09 dollars") {
			t.Errorf("limit %s: %d %s", limit, code, msg)
		}
	}
	// Numbers that would cost the server to read (math/big takes 17 ms
	// to build 10^999999, and a rates request carries 256) or that no
	// amount holds are refused as they are decoded, naming the bound.
	for _, limit := range []string{"1e999999", "1e-999999", `"12"`, "1" + strings.Repeat("0", 70)} {
		code, msg := call(t, "PUT", srv.URL+"/api/v1/billing-projects/default/spend-limit", `{"limit": `+limit+`}`)
		if code != http.StatusBadRequest || !strings.Contains(msg, "a decimal of at most 64 characters, with an exponent of at most two digits") {
			t.Errorf("limit %.20s: %d %s", limit, code, msg)
		} else {
			t.Logf("limit %.20s: %d %s", limit, code, msg)
		}
	}
	for _, c := range node.applied {
		if _, ok := c.(*state.SetSpendLimit); ok {
			t.Fatalf("a refused limit was applied: %+v", c)
		}
	}
	// A float's extra digits round to the nano-dollar once, here.
	if code, body := call(t, "PUT", srv.URL+"/api/v1/billing-projects/default/spend-limit", `{"limit": 12.50000000049}`); code != http.StatusOK || !strings.Contains(body, `"spend_limit":12.5`) {
		t.Fatalf("a good limit: %d %s", code, body)
	}
	var got *state.SetSpendLimit
	for _, c := range node.applied {
		if l, ok := c.(*state.SetSpendLimit); ok {
			got = l
		}
	}
	if got == nil || got.Limit != 12_500_000_000 {
		t.Fatalf("the limit applied: %+v, want 12500000000 nano-dollars", got)
	}
}
