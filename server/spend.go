package server

import (
	"context"
	"sync"
	"time"

	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/server/state"
)

// maxSpendCancels bounds the batches one pass of the spend loop cancels;
// a project with more is looked at again at once.
const maxSpendCancels = 1000

// spendCancelsInFlight bounds the cancellations the spend loop has in
// Raft at once: a project's batches are cancelled together, not one
// commit after another, so its last batch stops as soon as its first.
const spendCancelsInFlight = 32

// spendChanged is the state's Spend hook: a billing project with a spend
// limit started or ended an attempt, or its limit changed.
func (s *Server) spendChanged() {
	select {
	case s.spendWake <- struct{}{}:
	default:
	}
}

// runSpendLimits stops the work of billing projects as they reach their
// spend limit. The leader knows each project's running price and cost
// (state.SpendCheck), so it sleeps until the earliest time a project
// reaches its limit at the prices running now (billing.Budget.Crossing)
// and cancels the project's open batches then; an attempt that starts or
// ends moves that time, and wakes it to look again. BillingInterval is
// only how often it looks regardless.
func (s *Server) runSpendLimits(ctx context.Context) {
	sweep := time.NewTicker(s.cfg.BillingInterval)
	defer sweep.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		if next := s.stopOverSpend(ctx, now); next != 0 {
			timer.Reset(time.Unix(0, next).Sub(now))
		} else {
			timer.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.spendWake:
		case <-timer.C:
		case <-sweep.C:
		}
	}
}

// stopOverSpend cancels the open batches of the billing projects that
// have reached their spend limit at now, and returns when the next one
// will (unix ns; 0: none will at the prices running now).
func (s *Server) stopOverSpend(ctx context.Context, now time.Time) int64 {
	stops, next := s.state.SpendCheck(now, maxSpendCancels)
	if len(stops) == 0 {
		return next
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, spendCancelsInFlight)
	n := 0
	for _, st := range stops {
		reason := billing.LimitReason(st.Project, st.Limit, st.Spent)
		for _, id := range st.Batches {
			n++
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				if _, err := s.raft.Apply(&state.CancelBatch{Now: now.UnixNano(), Batch: id, Reason: reason}); err != nil {
					if ctx.Err() == nil {
						s.log.Warn("cancel a batch over its spend limit", "batch", id, "err", err)
					}
					return
				}
				s.log.Info("cancelled a batch: its billing project reached its spend limit", "batch", id, "project", st.Project, "limit", st.Limit, "spent", st.Spent)
			}()
		}
	}
	wg.Wait()
	if n >= maxSpendCancels {
		// More batches to cancel: look again at once.
		return now.UnixNano()
	}
	return next
}
