// Package billing prices what jobs hold: named resources with versioned
// rates, the resources an attempt holds, and what holding them for a time
// costs. It is pure: the state machine keeps the rates, and reads and
// applies call in here.
//
// As in Hail Batch, an attempt is billed for what it reserves (cores,
// memory, GPUs, and a service fee per core), by the hour, at the rates in
// force when it started, from its start to its end (or to now while it
// runs).
package billing

import (
	"fmt"
	"regexp"
	"sort"

	"github.com/drover-sched/drover/money"
)

// Limits on rates, so a request cannot grow the state without bound.
const (
	MaxResources       = 4096 // distinct resources with a rate (up to three per launch config)
	MaxVersions        = 100  // versions kept per resource
	MaxRatesPerRequest = 256
	// MaxPricePerUnitHr bounds a rate: a million dollars per unit-hour.
	MaxPricePerUnitHr = 1_000_000 * money.DollarPerHour
)

var resourceRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}(/[A-Za-z0-9_.-]{1,64}){0,3}$`)

// ValidResource reports whether name may name a resource: a kind
// (compute, memory, gpu, service-fee, ...) and up to three /-separated
// qualifiers, such as compute/preemptible or gpu/a100.
func ValidResource(name string) bool { return resourceRE.MatchString(name) }

// Rate is the price of one unit of a resource for an hour, in force from
// ValidFrom (unix ns) until a later version's.
type Rate struct {
	Resource  string
	Version   uint32
	PerHour   money.Rate // per unit-hour
	ValidFrom int64
}

// CheckRate says what is wrong with a new rate, or nil.
func CheckRate(resource string, perHour money.Rate) error {
	if !ValidResource(resource) {
		return fmt.Errorf("resource %q is not a resource name: a kind such as compute, memory, gpu or service-fee, then up to three /-separated qualifiers (compute/preemptible)", resource)
	}
	if perHour < 0 || perHour > MaxPricePerUnitHr {
		return fmt.Errorf("the price of %s is %s; give 0 to %g dollars per unit-hour", resource, perHour, MaxPricePerUnitHr.Dollars())
	}
	return nil
}

// Book is every resource's rate versions, oldest first.
type Book map[string][]Rate

// At returns the rate of resource in force at t.
func (b Book) At(resource string, t int64) (Rate, bool) {
	vs := b[resource]
	i := sort.Search(len(vs), func(i int) bool { return vs[i].ValidFrom > t })
	if i == 0 {
		return Rate{}, false
	}
	return vs[i-1], true
}

// Quantity is how many units of a resource something holds, exactly:
// Num/Den units, Den one of 1 (GPUs), 1000 (cores, counted in thousandths)
// or 2^30 (GiB of memory, counted in bytes).
type Quantity struct {
	Resource string
	Num, Den int64
}

// Units is q's units as a float, for display.
func (q Quantity) Units() float64 { return float64(q.Num) / float64(q.Den) }

// Held is what an attempt reserves: cores and GiB of memory in its pool,
// GPUs of a type, and the service fee, charged per core. On a machine of
// an autoscaler launch config (config not empty) the cores, memory and
// GPUs are the config's own (compute/POOL/CONFIG), priced by the rates
// the config gives (MachineRates) or, without them, the pool's.
func Held(cpuMilli, memory, gpus int64, gpuType, pool, config string) []Quantity {
	if pool == "" {
		pool = "default"
	}
	suffix := ""
	if config != "" {
		suffix = "/" + config
	}
	out := []Quantity{
		{"compute/" + pool + suffix, cpuMilli, 1000},
		{"memory/" + pool + suffix, memory, 1 << 30},
		{"service-fee", cpuMilli, 1000},
	}
	if gpus > 0 {
		out = append(out, Quantity{"gpu/" + gpuType + suffix, gpus, 1})
	}
	return out
}

// Line is one resource's part of a price.
type Line struct {
	Resource string     // the resource held
	Rated    string     // the resource whose rate applied ("": none did)
	Units    float64    // units held (for display; the price uses the exact quantity)
	PerHour  money.Rate // per unit-hour (0 without a rate)
	Version  uint32
}

// Price returns what holding qs costs per hour at the rates in force at t,
// exactly. A quantity without a rate of its own takes its kind's
// (compute/spot falls back to compute); one with neither costs nothing and
// says so.
func (b Book) Price(qs []Quantity, t int64) (perHour Price, lines []Line) {
	var sum wide
	for _, q := range qs {
		l := Line{Resource: q.Resource, Units: q.Units()}
		for name := q.Resource; name != ""; name = parent(name) {
			if r, ok := b.At(name, t); ok {
				l.Rated, l.PerHour, l.Version = name, r.PerHour, r.Version
				break
			}
		}
		if l.PerHour > 0 && q.Num > 0 && q.Den > 0 && priceDen%q.Den == 0 {
			// rate × Num × (priceDen/Den): each factor below 2^63,
			// so a term is below 2^189 and a few of them fit a wide;
			// priceOfWide saturates what passes 2^128.
			sum = sum.add(product(uint64(l.PerHour), uint64(q.Num), uint64(priceDen/q.Den)))
		}
		lines = append(lines, l)
	}
	return priceOfWide(sum), lines
}

// parent drops a resource name's last qualifier ("" for a bare kind).
func parent(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name[:i]
		}
	}
	return ""
}
