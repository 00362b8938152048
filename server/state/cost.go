package state

import (
	"slices"
	"strings"
	"time"

	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/money"
)

// charge is what a started attempt costs per hour, fixed when it started
// (at the rates in force at its start), and when it started.
type charge struct {
	// Legacy is the price in float dollars an hour that servers before
	// integral money kept: read from their snapshots into Price
	// (legacyPrice), never written.
	Legacy float64
	Start  int64
	Price  billing.Price // absent in snapshots from before integral money
}

// legacyPrice is the Price of a float dollars an hour from a server
// before integral money: rounded once to the nano-dollar an hour.
func legacyPrice(perHour float64) billing.Price {
	return billing.PriceOf(money.RateFromDollars(perHour))
}

// batchBill is what a batch has cost: Accrued for its ended attempts, and
// the charges of those running.
type batchBill struct {
	Accrued money.Amount
	Running map[uint32]charge // by job
	// Daily is Accrued by UTC day (days since 1970-01-01; absent in
	// snapshots from before history).
	Daily map[int32]money.Amount
	// run is the running charges' sums (billing.Running), rebuilt from
	// Running when a snapshot is restored.
	run billing.Running
}

// projectBill is what a billing project has cost: Accrued for ended
// attempts (also by UTC day), and the sums of its running attempts'
// charges, so its live cost needs no walk.
type projectBill struct {
	Accrued money.Amount
	Daily   map[int32]money.Amount // by days since 1970-01-01 UTC
	// Running, RunPrice and RunPriceStart: what servers before integral
	// money kept in snapshots; never written (run is rebuilt from the
	// batches' charges).
	Running       int
	RunPrice      float64
	RunPriceStart float64
	run           billing.Running
}

// startCharge begins billing a job's attempt that started at start.
func (s *billingBook) startCharge(b *Batch, g *group, id uint32, inst *Instance, start int64) {
	if start == 0 || len(s.rates) == 0 {
		return
	}
	if _, ok := b.bill.Running[id]; ok {
		return
	}
	price, _ := s.price(g.spec, inst, start)
	s.chargeAt(b, id, price, start)
}

// chargeAt begins billing a job's attempt at price from start, unless it
// is billed already.
func (s *billingBook) chargeAt(b *Batch, id uint32, price billing.Price, start int64) {
	if price.IsZero() {
		return
	}
	if _, ok := b.bill.Running[id]; ok {
		return
	}
	if b.bill.Running == nil {
		b.bill.Running = map[uint32]charge{}
	}
	b.bill.Running[id] = charge{Price: price, Start: start}
	b.bill.run.Add(price, start)
	b.groupChargeAt(id, price, start)
	p := s.projectBill(b.BillingProject)
	p.run.Add(price, start)
	s.notifySpend(b.BillingProject)
}

// endCharge stops billing a job's running attempt at end and accrues
// what it cost.
func (s *billingBook) endCharge(b *Batch, id uint32, end int64) {
	c, ok := b.bill.Running[id]
	if !ok {
		return
	}
	delete(b.bill.Running, id)
	b.bill.run.Remove(c.Price, c.Start)
	cost := billing.Cost(c.Price, c.Start, end)
	b.bill.Accrued = b.bill.Accrued.Add(cost)
	b.groupChargeEnd(id, c, cost)
	day := int32(end / (24 * 3600e9))
	if b.bill.Daily == nil {
		b.bill.Daily = map[int32]money.Amount{}
	}
	b.bill.Daily[day] = b.bill.Daily[day].Add(cost)
	p := s.projectBill(b.BillingProject)
	p.run.Remove(c.Price, c.Start)
	p.Accrued = p.Accrued.Add(cost)
	if p.Daily == nil {
		p.Daily = map[int32]money.Amount{}
	}
	p.Daily[day] = p.Daily[day].Add(cost)
	s.notifySpend(b.BillingProject)
}

// notifySpend tells the leader that a billing project with a spend limit
// changed what it spends (an attempt started or ended), so that it can
// move the time it stops the project's work.
func (s *billingBook) notifySpend(project string) {
	if s.hooks.Spend != nil {
		if p := s.projects[project]; p != nil && p.SpendLimit > 0 {
			s.hooks.Spend()
		}
	}
}

func (s *billingBook) projectBill(name string) *projectBill {
	p := s.bills[name]
	if p == nil {
		p = &projectBill{}
		s.bills[name] = p
	}
	return p
}

// cost is what a batch has cost up to now: the same integer however its
// attempts started and ended, and however often it is read.
func (b *Batch) cost(now int64) money.Amount {
	return b.bill.Accrued.Add(b.bill.run.Cost(now))
}

// ProjectCost is what a billing project has cost up to now: its ended
// attempts and its running ones.
func (s *billingBook) ProjectCost(project string, now time.Time) money.Amount {
	total, _ := s.ProjectCosts(project, now)
	return total
}

// ProjectCosts is ProjectCost, and what of it the running attempts have
// cost.
func (s *billingBook) ProjectCosts(project string, now time.Time) (total, running money.Amount) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b := s.budget(project)
	running = b.Run.Cost(now.UnixNano())
	return b.Accrued.Add(running), running
}

// budget is a billing project's spend limit and the sums its live cost
// comes from (a zero Budget for a project that never ran anything).
// Callers hold the lock.
func (s *billingBook) budget(project string) billing.Budget {
	var b billing.Budget
	if p := s.projects[project]; p != nil {
		b.Limit = p.SpendLimit
	}
	if p := s.bills[project]; p != nil {
		b.Accrued, b.Run = p.Accrued, p.run
	}
	return b
}

// spendReached reports whether a billing project has reached its spend
// limit at now (billing.Budget.Reached): it may start no new attempt.
// Callers hold the lock.
func (s *billingBook) spendReached(project string, now int64) bool {
	return s.budget(project).Reached(now)
}

// restoreCharges rebuilds the running sums of a batch restored from a
// snapshot, and its project's, from its charges; a charge from before
// integral money (a float price) is converted once (legacyPrice).
func (s *billingBook) restoreCharges(b *Batch) {
	b.bill.run = billing.Running{}
	if len(b.bill.Running) == 0 {
		return
	}
	p := s.projectBill(b.BillingProject)
	for id, c := range b.bill.Running {
		if c.Price.IsZero() && c.Legacy != 0 {
			c.Price, c.Legacy = legacyPrice(c.Legacy), 0
			b.bill.Running[id] = c
		}
		b.bill.run.Add(c.Price, c.Start)
		b.groupChargeAt(id, c.Price, c.Start)
		p.run.Add(c.Price, c.Start)
	}
}

// SpendStop is a billing project that reached its spend limit and still
// has open batches, which the leader cancels.
type SpendStop struct {
	Project      string
	Limit, Spent money.Amount
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
func (s *batchBook) SpendCheck(now time.Time, maxBatches int) (stops []SpendStop, next int64) {
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
// too. What the attempts still running have cost is left out: see
// CostByDayAt.
func (s *billingBook) CostByDay(project string, from, to int32) []CostDay {
	return s.CostByDayAt(project, from, to, time.Time{})
}

// CostByDayAt is CostByDay with what the project's running attempts have
// cost from their starts to now on now's UTC day (Running), when from..to
// includes it, as the report by user and by batch counts them
// (BatchSpends): a project whose every attempt runs today costs something
// today. The zero time adds nothing.
func (s *billingBook) CostByDayAt(project string, from, to int32, now time.Time) []CostDay {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []CostDay{}
	p := s.bills[project]
	if p == nil {
		return out
	}
	days := make([]int32, 0, len(p.Daily)+1)
	for d := range p.Daily {
		if d >= from && d <= to {
			days = append(days, d)
		}
	}
	var today int32
	var running money.Amount
	if !now.IsZero() {
		n := now.UnixNano()
		today = int32(n / (24 * 3600e9))
		if today >= from && today <= to {
			running = p.run.Cost(n)
		}
		if _, ok := p.Daily[today]; running != 0 && !ok {
			days = append(days, today)
		}
	}
	slices.Sort(days)
	for _, d := range days {
		day := CostDay{Day: d, Cost: p.Daily[d]}
		if d == today {
			day.Running = running
		}
		out = append(out, day)
	}
	return out
}

// BatchSpends lists what each of a billing project's batches in the state
// cost on the days from..to (and, when they include now's day, its running
// attempts up to now), leaving out batches with neither; and the IDs of
// all the project's batches the state holds, ascending, so a report takes
// only the others from the history ledger.
func (s *batchBook) BatchSpends(project string, from, to int32, now time.Time) (spends []billing.Spend, held []uint64) {
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
				sp.Cost = sp.Cost.Add(c) // integers: the order is no matter
			}
		}
		if today >= from && today <= to {
			sp.Running = b.bill.run.Cost(n)
		}
		if sp.Cost != 0 || sp.Running != 0 {
			spends = append(spends, sp)
		}
	}
	return spends, held
}
