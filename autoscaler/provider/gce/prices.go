package gce

import (
	"context"
	"fmt"
	"math/big"
	"regexp"
	"strings"

	cloudbilling "google.golang.org/api/cloudbilling/v1"

	"github.com/drover-sched/drover/autoscaler"
	"github.com/drover-sched/drover/autoscaler/provider"
	"github.com/drover-sched/drover/money"
)

// ComputeService is Compute Engine's service in the Cloud Billing
// Catalog.
const ComputeService = "services/6F81-5844-456A"

var _ provider.Pricer = (*GCE)(nil)

// skuRE reads a machine family's per-core and per-GiB SKUs, as the
// Catalog names them: "N2 Instance Core running in Americas", "Spot
// Preemptible E2 Instance Ram running in Americas", "N1 Predefined
// Instance Core ...", "N2D AMD Instance Core ...", "M3 Memory-optimized
// Instance Ram ...". Custom, sole-tenant and
// committed-use SKUs ("N2 Custom Instance Core", "Commitment v1: ...")
// do not match; neither do families named otherwise ("Compute optimized
// Core" for C2): configs of those keep an operator's price.
var skuRE = regexp.MustCompile(`^(?:Spot Preemptible |Preemptible )?([A-Z][A-Z0-9]*)(?: AMD| Arm| Predefined| Memory-optimized)? Instance (Core|Ram) running in `)

// skuKey names one unit price: a family's core or GiB of memory, in a
// region, on demand or spot.
type skuKey struct {
	family, region string
	spot, ram      bool
}

// Prices reads Compute Engine's prices from the Cloud Billing Catalog
// (cloudbilling.googleapis.com, through Google's client) and prices each
// config as its machine type's family charges in its zone's region: its
// cores at the family's core-hour and its memory at the GiB-hour, on
// demand or spot (the "Preemptible" usage type). A config with GPUs, or
// of a family the Catalog does not list this way, gets 0 (no price).
func (g *GCE) Prices(ctx context.Context, configs []autoscaler.LaunchConfig) ([]money.Rate, error) {
	svc, err := cloudbilling.NewService(ctx, g.opts.ClientOptions...)
	if err != nil {
		return nil, fmt.Errorf("gce: billing catalog client: %w", err)
	}
	units := map[skuKey]*big.Rat{}
	err = svc.Services.Skus.List(ComputeService).CurrencyCode("USD").PageSize(5000).Pages(ctx, func(page *cloudbilling.ListSkusResponse) error {
		for _, s := range page.Skus {
			readSku(s, units)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("gce: list Compute Engine SKUs: %w", err)
	}
	out := make([]money.Rate, len(configs))
	for i := range configs {
		out[i] = priceOf(&configs[i], units)
	}
	return out, nil
}

// readSku adds a SKU's price to units, if it is a family's core or RAM:
// its last pricing (the Catalog lists the one in force), the rate of its
// first tier, per hour (cores, "h") or per GiB-hour ("GiBy.h").
func readSku(s *cloudbilling.Sku, units map[skuKey]*big.Rat) {
	m := skuRE.FindStringSubmatch(s.Description)
	if m == nil || s.Category == nil || s.Category.ResourceFamily != "Compute" || len(s.PricingInfo) == 0 {
		return
	}
	spot := s.Category.UsageType == "Preemptible"
	if !spot && s.Category.UsageType != "OnDemand" {
		return
	}
	ram := m[2] == "Ram"
	pe := s.PricingInfo[len(s.PricingInfo)-1].PricingExpression
	if pe == nil || len(pe.TieredRates) == 0 || pe.TieredRates[0].UnitPrice == nil || pe.TieredRates[0].UnitPrice.CurrencyCode != "USD" {
		return
	}
	if want := map[bool]string{false: "h", true: "GiBy.h"}[ram]; pe.UsageUnit != want {
		return
	}
	p := pe.TieredRates[0].UnitPrice
	price := new(big.Rat).SetFrac64(p.Units*1_000_000_000+p.Nanos, 1_000_000_000)
	for _, region := range s.ServiceRegions {
		units[skuKey{family: m[1], region: region, spot: spot, ram: ram}] = price
	}
}

// priceOf is a config's machine price per hour from the family's unit
// prices, rounded to the nano-dollar; 0 when one is missing.
func priceOf(c *autoscaler.LaunchConfig, units map[skuKey]*big.Rat) money.Rate {
	if c.GPUs > 0 || c.MachineType == "" || c.Zone == "" {
		return 0
	}
	family := strings.ToUpper(strings.SplitN(c.MachineType, "-", 2)[0])
	region := c.Zone
	if i := strings.LastIndexByte(region, '-'); i > 0 {
		region = region[:i]
	}
	core, ok1 := units[skuKey{family: family, region: region, spot: c.Spot}]
	ram, ok2 := units[skuKey{family: family, region: region, spot: c.Spot, ram: true}]
	if !ok1 || !ok2 {
		return 0
	}
	// cores × core-hour + GiB × GiB-hour, in nano-dollars.
	total := new(big.Rat).Mul(core, new(big.Rat).SetFrac64(c.CPUMilli, 1000))
	total.Add(total, new(big.Rat).Mul(ram, new(big.Rat).SetFrac64(c.Memory, 1<<30)))
	total.Mul(total, big.NewRat(1_000_000_000, 1))
	n := new(big.Int).Quo(new(big.Int).Add(total.Num(), new(big.Int).Quo(total.Denom(), big.NewInt(2))), total.Denom())
	if !n.IsInt64() || n.Int64() > int64(money.MaxRate) {
		return 0
	}
	return money.Rate(n.Int64())
}
