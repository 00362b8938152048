package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/drover-sched/drover/autoscaler"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/server/leader"
	"github.com/drover-sched/drover/server/state"
)

// DecisionResult is what TimeDecisions measured, in milliseconds.
type DecisionResult struct {
	Bench           string  `json:"bench"`
	ReadyJobs       int     `json:"ready_jobs"`
	Configs         int     `json:"configs"`
	Zones           int     `json:"zones"`
	Users           int     `json:"users"`
	Rounds          int     `json:"rounds"`
	DecisionP50     float64 `json:"decision_ms_p50"`
	DecisionMax     float64 `json:"decision_ms_max"`
	ReadP50         float64 `json:"read_ms_p50"`
	PlanP50         float64 `json:"plan_ms_p50"`
	MachinesPlanned int     `json:"machines_planned"`
}

// fixedClock is a clock that does not move.
type fixedClock time.Time

// Now is the fixed time.
func (c fixedClock) Now() time.Time { return time.Time(c) }

// TimeDecisions builds a state with jobs ready jobs of mixed sizes
// (distinct, 500 users, one in ten restricted to a region) and a fleet of
// launch configs, and times whole decisions of the leader's autoscaler
// (leader.Autoscaler.Input: reading the state and the windowed demand;
// autoscaler.Plan: planning).
func TimeDecisions(jobs, configs, zones, rounds int) (*DecisionResult, error) {
	if jobs < 1 || configs < 1 || zones < 1 || rounds < 1 {
		return nil, errors.New("sim: jobs, configs, zones and rounds must be positive")
	}
	st := state.New()
	var index uint64
	apply := func(c state.Command) (any, error) {
		index++
		res := st.Apply(index, c)
		if err, ok := res.(*state.ApplyError); ok {
			return nil, fmt.Errorf("%T: %w", c, err)
		}
		return res, nil
	}
	if _, err := apply(&state.Bootstrap{Now: 1, Admin: "root", TokenHash: "h", DefaultProject: "default"}); err != nil {
		return nil, err
	}
	cfg := &state.ApplyPlacement{Now: 1, Autoscaler: &state.Autoscaler{Enabled: true, MaxNodes: 2000, MaxPerHour: 5000 * money.DollarPerHour, MaxAddsPerMinute: 500, Window: int64(150 * time.Second)}}
	types := []struct {
		name  string
		cores int64
		price float64
	}{{"n2-standard-8", 8, 0.39}, {"n2-standard-16", 16, 0.78}, {"n2-standard-32", 32, 1.55}, {"n2-standard-64", 64, 3.1}, {"n2-highmem-32", 32, 2.1}}
	for z := 0; z < zones; z++ {
		cfg.Clusters = append(cfg.Clusters, state.Cluster{Name: fmt.Sprintf("c%d", z), Region: fmt.Sprintf("r%d", z/4)})
	}
	for i := 0; i < configs; i++ {
		t := types[i%len(types)]
		z := (i / len(types)) % zones
		spot := (i/(len(types)*zones))%2 == 1
		price := t.price * (1 + 0.03*float64(z))
		if spot {
			price *= 0.3
		}
		cfg.LaunchConfigs = append(cfg.LaunchConfigs, state.LaunchConfig{Name: fmt.Sprintf("cfg%d", i), Cluster: fmt.Sprintf("c%d", z), MachineType: t.name,
			Zone: fmt.Sprintf("zone-%d", z), Spot: spot, CPUMilli: t.cores * 1000, Memory: t.cores * 4 << 30, PricePerHour: money.RateFromDollars(price)})
	}
	if _, err := apply(cfg); err != nil {
		return nil, err
	}
	users := 500
	sizes := []int64{250, 500, 1000, 2000, 4000, 8000, 16000}
	rng := rand.New(rand.NewPCG(1, 7))
	for u := 0; u < users; u++ {
		name := fmt.Sprintf("u%03d", u)
		if _, err := apply(&state.CreateUser{Now: 1, Name: name, TokenHash: "h" + name}); err != nil {
			return nil, err
		}
		if _, err := apply(&state.SetMember{Project: "default", User: name, Member: true}); err != nil {
			return nil, err
		}
		n := jobs / users
		if u < jobs%users {
			n++
		}
		entries := make([]state.JobEntry, n)
		for j := range entries {
			cpu := sizes[rng.IntN(len(sizes))]
			mem := int64(float64(cpu)*float64(1<<30)/1000*(0.25+0.75*rng.Float64())) &^ (1<<20 - 1)
			sp := &state.Spec{Name: fmt.Sprint("j", j+1), Command: []string{"true"}, CPUMilli: cpu, Memory: max(mem, 1<<20)}
			if j%10 == 0 {
				sp.Where = &state.Where{Regions: []string{fmt.Sprintf("r%d", j%5)}}
			}
			entries[j] = state.JobEntry{First: uint32(j + 1), Count: 1, Spec: sp}
		}
		if n > 0 {
			if _, err := apply(&state.CreateBatch{Now: 1, User: name, BillingProject: "default", Name: "b", Jobs: entries}); err != nil {
				return nil, err
			}
		}
	}
	now := time.Now()
	auto := leader.NewAutoscaler(leader.AutoscalerConfig{Clock: fixedClock(now), State: st, Apply: apply, MemoryStep: 256 << 20,
		Heard: func(uint32) (time.Time, bool) { return now, true }})
	var total, read, plan []float64
	var last *autoscaler.Output
	for r := 0; r < rounds; r++ {
		t0 := time.Now()
		in := auto.Input()
		t1 := time.Now()
		last = autoscaler.Plan(in)
		t2 := time.Now()
		read = append(read, ms(t1.Sub(t0)))
		plan = append(plan, ms(t2.Sub(t1)))
		total = append(total, ms(t2.Sub(t0)))
	}
	launched := 0
	for _, l := range last.Launches {
		launched += l.Count
	}
	return &DecisionResult{Bench: "autoscale-decision", ReadyJobs: jobs, Configs: configs, Zones: zones, Users: users, Rounds: rounds,
		DecisionP50: pct(total, 50), DecisionMax: pct(total, 100), ReadP50: pct(read, 50), PlanP50: pct(plan, 50), MachinesPlanned: launched}, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pct is the p-th percentile of v (nearest rank).
func pct(v []float64, p float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(i, 0)]
}
