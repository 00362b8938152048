package state

import (
	"slices"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/billing"
)

// charge is what a started attempt costs per hour, fixed when it started
// (at the rates in force at its start), and when it started.
type charge struct {
	Price float64
	Start int64
}

// batchBill is what a batch has cost: Accrued for its ended attempts, and
// the charges of those running.
type batchBill struct {
	Accrued float64
	Running map[uint32]charge // by job
	// Daily is Accrued by UTC day (days since 1970-01-01; absent in
	// snapshots from before history).
	Daily map[int32]float64
}

// projectBill is what a billing project has cost: Accrued for ended
// attempts (also by UTC day), and the running attempts' price summed, with
// the sum of price × start (start in hours since costEpoch), so its live
// cost needs no walk.
type projectBill struct {
	Accrued       float64
	Daily         map[int32]float64 // by days since 1970-01-01 UTC
	Running       int               // attempts being charged
	RunPrice      float64
	RunPriceStart float64
}

// startCharge begins billing a job's attempt that started at start.
func (s *State) startCharge(b *Batch, g *group, id uint32, inst *Instance, start int64) {
	if start == 0 || len(s.rates) == 0 {
		return
	}
	if _, ok := b.bill.Running[id]; ok {
		return
	}
	price, _ := s.price(g.spec, inst, start)
	if price == 0 {
		return
	}
	if b.bill.Running == nil {
		b.bill.Running = map[uint32]charge{}
	}
	b.bill.Running[id] = charge{Price: price, Start: start}
	p := s.projectBill(b.BillingProject)
	p.Running++
	p.RunPrice += price
	p.RunPriceStart += price * billing.Hours(start)
	s.notifySpend(b.BillingProject)
}

// endCharge stops billing a job's running attempt at end and accrues
// what it cost.
func (s *State) endCharge(b *Batch, id uint32, end int64) {
	c, ok := b.bill.Running[id]
	if !ok {
		return
	}
	delete(b.bill.Running, id)
	cost := billing.Cost(c.Price, c.Start, end)
	b.bill.Accrued += cost
	day := int32(end / (24 * 3600e9))
	if b.bill.Daily == nil {
		b.bill.Daily = map[int32]float64{}
	}
	b.bill.Daily[day] += cost
	p := s.projectBill(b.BillingProject)
	p.Running--
	p.RunPrice -= c.Price
	p.RunPriceStart -= c.Price * billing.Hours(c.Start)
	if p.Running == 0 {
		// Nothing runs: drop the sums' float error with them.
		p.RunPrice, p.RunPriceStart = 0, 0
	}
	p.Accrued += cost
	if p.Daily == nil {
		p.Daily = map[int32]float64{}
	}
	p.Daily[day] += cost
	s.notifySpend(b.BillingProject)
}

// notifySpend tells the leader that a billing project with a spend limit
// changed what it spends (an attempt started or ended), so that it can
// move the time it stops the project's work.
func (s *State) notifySpend(project string) {
	if s.hooks.Spend != nil {
		if p := s.projects[project]; p != nil && p.SpendLimit > 0 {
			s.hooks.Spend()
		}
	}
}

func (s *State) projectBill(name string) *projectBill {
	p := s.bills[name]
	if p == nil {
		p = &projectBill{}
		s.bills[name] = p
	}
	return p
}

// batchCost is what a batch has cost up to now.
func (b *Batch) cost(now int64) float64 {
	total := b.bill.Accrued
	for _, c := range b.bill.Running {
		total += billing.Cost(c.Price, c.Start, now)
	}
	return total
}

// ProjectCost is what a billing project has cost up to now: its ended
// attempts and its running ones.
func (s *State) ProjectCost(project string, now time.Time) float64 {
	total, _ := s.ProjectCosts(project, now)
	return total
}

// ProjectCosts is ProjectCost, and what of it the running attempts have
// cost.
func (s *State) ProjectCosts(project string, now time.Time) (total, running float64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b := s.budget(project)
	total = b.Cost(now.UnixNano())
	return total, total - b.Accrued
}

// budget is a billing project's spend limit and the sums its live cost
// comes from (a zero Budget for a project that never ran anything).
// Callers hold the lock.
func (s *State) budget(project string) billing.Budget {
	var b billing.Budget
	if p := s.projects[project]; p != nil {
		b.Limit = p.SpendLimit
	}
	if p := s.bills[project]; p != nil {
		b.Accrued, b.RunPrice, b.RunPriceStart = p.Accrued, p.RunPrice, p.RunPriceStart
	}
	return b
}

// spendReached reports whether a billing project has reached its spend
// limit at now (billing.Budget.Reached): it may start no new attempt.
// Callers hold the lock.
func (s *State) spendReached(project string, now int64) bool {
	return s.budget(project).Reached(now)
}

func sortedCharges(m map[uint32]charge) []charge {
	ids := make([]uint32, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]charge, len(ids))
	for i, id := range ids {
		out[i] = m[id]
	}
	return out
}

// OverLimit reports whether a billing project with a spend limit has
// reached it by now (billing.Budget.Reached), with the limit and the
// spend.
func (s *State) OverLimit(project string, now time.Time) (over bool, limit, spent float64) {
	s.mu.RLock()
	b := s.budget(project)
	s.mu.RUnlock()
	if b.Limit <= 0 {
		return false, 0, 0
	}
	return b.Reached(now.UnixNano()), b.Limit, b.Cost(now.UnixNano())
}

// SpendStop is a billing project that reached its spend limit and still
// has open batches, which the leader cancels.
type SpendStop struct {
	Project      string
	Limit, Spent float64
	Batches      []uint64 // open (not complete, not cancelled), ascending
}

// SpendCheck lists the billing projects that have reached their spend
// limit at now and still have open batches (at most maxBatches in all),
// and returns the earliest time another project with a limit will reach
// it at the prices of the attempts running now (0: none will). The
// leader cancels the first and sets a timer for the second; what changes
// the second (an attempt starting or ending, a new limit) calls the
// Spend hook. It walks the batches only when a project to stop has some
// open.
func (s *State) SpendCheck(now time.Time, maxBatches int) (stops []SpendStop, next int64) {
	n := now.UnixNano()
	s.mu.RLock()
	defer s.mu.RUnlock()
	// Called at every start and end of a limited project's attempt: the
	// projects are walked unsorted, and only the few to stop sorted.
	for name, p := range s.projects {
		if p.SpendLimit <= 0 || s.bills[name] == nil {
			continue
		}
		b := s.budget(name)
		if b.Reached(n) {
			if t := s.projectTallies[name]; t != nil && t.Batches > 0 {
				stops = append(stops, SpendStop{Project: name, Limit: b.Limit, Spent: b.Cost(n)})
			}
			continue
		}
		if at, ok := b.Crossing(); ok && (next == 0 || at < next) {
			next = at
		}
	}
	if len(stops) == 0 {
		return nil, next
	}
	slices.SortFunc(stops, func(a, b SpendStop) int { return strings.Compare(a.Project, b.Project) })
	idx := make(map[string]int, len(stops))
	for i, st := range stops {
		idx[st.Project] = i
	}
	found := 0
	for _, id := range s.batchIDs {
		if found >= maxBatches {
			break
		}
		b := s.batches[id]
		i, ok := idx[b.BillingProject]
		if !ok || b.Completed != 0 || b.Cancelled {
			continue
		}
		stops[i].Batches = append(stops[i].Batches, id)
		found++
	}
	return slices.DeleteFunc(stops, func(st SpendStop) bool { return len(st.Batches) == 0 }), next
}

// CostByDay lists a billing project's accrued cost by UTC day, for the
// days from..to (inclusive, days since 1970-01-01), oldest first; days
// without cost are left out. An attempt's cost counts on the day it ended.
// It covers every batch the project ran, those gone to the history store
// too.
func (s *State) CostByDay(project string, from, to int32) []api.CostRow {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []api.CostRow{}
	p := s.bills[project]
	if p == nil {
		return out
	}
	days := make([]int32, 0, len(p.Daily))
	for d := range p.Daily {
		if d >= from && d <= to {
			days = append(days, d)
		}
	}
	slices.Sort(days)
	for _, d := range days {
		out = append(out, api.CostRow{Day: time.Unix(int64(d)*86400, 0).UTC().Format(time.DateOnly), Cost: p.Daily[d]})
	}
	return out
}

// BatchSpends lists what each of a billing project's batches in the state
// cost on the days from..to (and, when they include now's day, its running
// attempts up to now), leaving out batches with neither; and the IDs of
// all the project's batches the state holds, ascending, so a report takes
// only the others from the history ledger.
func (s *State) BatchSpends(project string, from, to int32, now time.Time) (spends []billing.Spend, held []uint64) {
	n := now.UnixNano()
	today := int32(n / (24 * 3600e9))
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, id := range s.batchIDs {
		b := s.batches[id]
		if b.BillingProject != project {
			continue
		}
		held = append(held, id)
		sp := billing.Spend{Batch: id, User: b.User}
		for d, c := range b.bill.Daily {
			if d >= from && d <= to {
				sp.Cost += c
			}
		}
		if today >= from && today <= to {
			for _, c := range b.bill.Running {
				sp.Running += billing.Cost(c.Price, c.Start, n)
			}
		}
		if sp.Cost != 0 || sp.Running != 0 {
			spends = append(spends, sp)
		}
	}
	return spends, held
}
