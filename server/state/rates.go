package state

import (
	"slices"
	"time"

	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/money"
)

// RateEntry is one new rate: Price dollars per unit-hour of Resource from
// ValidFrom (unix ns; 0: the command's Now).
type RateEntry struct {
	Resource  string
	Price     money.Rate // a float of dollars in entries from before integral money
	ValidFrom int64
}

// SetRates adds a version to each resource's rate.
type SetRates struct {
	Now   int64
	Rates []RateEntry
}

// Type implements Command.
func (*SetRates) Type() CommandType { return CmdSetRatesExact }

func (s *billingBook) applySetRates(c *SetRates) any {
	if len(c.Rates) == 0 || len(c.Rates) > billing.MaxRatesPerRequest {
		return errorf(ErrInvalid, "give 1 to %d rates at once, not %d", billing.MaxRatesPerRequest, len(c.Rates))
	}
	if err := s.checkRates(c.Rates, c.Now); err != nil {
		return err
	}
	s.addRates(c.Rates, c.Now)
	return nil
}

// checkRates says what is wrong with adding rates at now, or nil.
func (s *billingBook) checkRates(rates []RateEntry, now int64) *ApplyError {
	added := map[string]int{}
	for _, r := range rates {
		if err := billing.CheckRate(r.Resource, r.Price); err != nil {
			return errorf(ErrInvalid, "%v", err)
		}
		// A rate never applies to the past: what was billed stays billed,
		// and an attempt's price is the same whenever it is read.
		if r.ValidFrom != 0 && r.ValidFrom < now {
			return errorf(ErrInvalid, "the rate of %s would apply from %s, in the past: a rate starts now or later", r.Resource, time.Unix(0, r.ValidFrom).UTC().Format(time.RFC3339))
		}
		added[r.Resource]++
		if n := len(s.rates[r.Resource]) + added[r.Resource]; n > billing.MaxVersions {
			return errorf(ErrInvalid, "%s would have %d rate versions; at most %d are kept", r.Resource, n, billing.MaxVersions)
		}
	}
	n := len(s.rates)
	for name := range added {
		if len(s.rates[name]) == 0 {
			n++
		}
	}
	if n > billing.MaxResources {
		return errorf(ErrInvalid, "that makes %d resources with rates; at most %d", n, billing.MaxResources)
	}
	return nil
}

// addRates adds checked rates (ValidFrom 0: from now).
func (s *billingBook) addRates(rates []RateEntry, now int64) {
	for _, r := range rates {
		from := r.ValidFrom
		if from == 0 {
			from = now
		}
		vs := s.rates[r.Resource]
		v := billing.Rate{Resource: r.Resource, Version: uint32(len(vs)) + 1, PerHour: r.Price, ValidFrom: from}
		if len(vs) > 0 {
			v.Version = vs[len(vs)-1].Version + 1
		}
		// Versions stay ordered by ValidFrom; one from the same time as
		// the last replaces it in force (it sorts after).
		i, _ := slices.BinarySearchFunc(vs, from, func(r billing.Rate, t int64) int {
			if r.ValidFrom <= t {
				return -1
			}
			return 1
		})
		s.rates[r.Resource] = slices.Insert(vs, i, v)
	}
}

// Rates lists every resource's rates: the one in force at now and the
// versions to come, or every version with all.
func (s *billingBook) Rates(now time.Time, all bool) []RateRecord {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []RateRecord{}
	for _, name := range sortedKeys(s.rates) {
		cur, ok := billing.Book(s.rates).At(name, now.UnixNano())
		for _, r := range s.rates[name] {
			inForce := ok && r.Version == cur.Version
			if !all && !inForce && r.ValidFrom <= now.UnixNano() {
				continue // superseded
			}
			r.Resource = name
			out = append(out, RateRecord{Rate: r, InForce: inForce})
		}
	}
	return out
}

// price is what an attempt of spec on inst costs per hour at the rates in
// force at start.
func (s *billingBook) price(spec *Spec, inst *Instance, start int64) (billing.Price, []billing.Line) {
	pool, config := "", ""
	if inst != nil {
		pool, config = inst.Pool, inst.Config
	}
	var gpus int64
	var gpuType string
	if spec.Where != nil {
		gpus, gpuType = spec.Where.GPUs, spec.Where.GPUType
	}
	return billing.Book(s.rates).Price(billing.Held(spec.CPUMilli, spec.Memory, gpus, gpuType, pool, config), start)
}
