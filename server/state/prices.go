package state

import (
	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/money"
)

// CloudPrice is what the cloud charges for a launch config's machine.
type CloudPrice struct {
	Config       string
	PricePerHour money.Rate
}

// SetCloudPrices records the prices the clusters' providers read (the
// leader, every AutoscaleConfig.PriceRefresh): each config that takes the
// cloud's price (PriceFromCloud) gets it, with a rate version from Now
// when it changed, so ranking and billing use what the cloud charges from
// then on. A config that is gone or no longer takes the cloud's price is
// passed over (the placement changed since the prices were read).
type SetCloudPrices struct {
	Now    int64
	Prices []CloudPrice
}

// Type implements Command.
func (*SetCloudPrices) Type() CommandType { return CmdSetCloudPrices }

// SetCloudPricesResult says how many configs' prices changed.
type SetCloudPricesResult struct{ Changed int }

func (s *machineBook) applySetCloudPrices(c *SetCloudPrices) any {
	if len(c.Prices) > MaxLaunchConfigs {
		return errorf(ErrInvalid, "at most %d prices at once, not %d", MaxLaunchConfigs, len(c.Prices))
	}
	for _, p := range c.Prices {
		if p.PricePerHour <= 0 {
			return errorf(ErrInvalid, "launch config %s: a cloud's price is more than 0", p.Config)
		}
		if err := validPrice("launch config "+p.Config+": the cloud's price", p.PricePerHour); err != nil {
			return err
		}
	}
	res := &SetCloudPricesResult{}
	for _, p := range c.Prices {
		lc := s.launchConfigs[p.Config]
		if lc == nil || !lc.PriceFromCloud {
			continue
		}
		next := *lc
		next.PricePerHour, next.PriceAt = p.PricePerHour, c.Now
		if p.PricePerHour != lc.PricePerHour {
			res.Changed++
			s.addCloudRates(s.machineRates([]LaunchConfig{next}), c.Now)
		}
		s.launchConfigs[p.Config] = &next
	}
	return res
}

// addCloudRates adds a config's rates at a cloud's new price. A resource
// at billing.MaxVersions drops its oldest version superseded before now
// first (an attempt keeps the price it started at, and a rate that no
// longer applies is read by nothing), so a price that changes every day
// never stops being recorded; an admin's SetRates is refused instead.
func (s *billingBook) addCloudRates(rates []RateEntry, now int64) {
	for _, r := range rates {
		vs := s.rates[r.Resource]
		for len(vs) >= billing.MaxVersions && len(vs) > 1 && vs[1].ValidFrom <= now {
			vs = vs[1:]
		}
		if len(vs) >= billing.MaxVersions {
			continue // every kept version is in force or to come: none can go
		}
		if len(vs) == 0 && len(s.rates) >= billing.MaxResources {
			continue
		}
		if len(vs) > 0 {
			s.rates[r.Resource] = vs
		}
		s.addRates([]RateEntry{r}, now)
	}
}
