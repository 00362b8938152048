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
	"math"
	"regexp"
	"sort"
)

// Limits on rates, so a request cannot grow the state without bound.
const (
	MaxResources       = 4096 // distinct resources with a rate (up to three per launch config)
	MaxVersions        = 100  // versions kept per resource
	MaxPricePerUnitHr  = 1e6  // dollars per unit-hour
	MaxRatesPerRequest = 256
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
	PerHour   float64 // dollars per unit-hour
	ValidFrom int64
}

// CheckRate says what is wrong with a new rate, or nil.
func CheckRate(resource string, perHour float64) error {
	if !ValidResource(resource) {
		return fmt.Errorf("resource %q is not a resource name: a kind such as compute, memory, gpu or service-fee, then up to three /-separated qualifiers (compute/preemptible)", resource)
	}
	if math.IsNaN(perHour) || math.IsInf(perHour, 0) || perHour < 0 || perHour > MaxPricePerUnitHr {
		return fmt.Errorf("the price of %s is %v; give 0 to %g dollars per unit-hour", resource, perHour, float64(MaxPricePerUnitHr))
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

// Quantity is how many units of a resource something holds; Rated names
// the resource whose rate applies (the quantity's own, or its kind's when
// it has none).
type Quantity struct {
	Resource string
	Units    float64
}

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
	cores := float64(cpuMilli) / 1000
	out := []Quantity{
		{"compute/" + pool + suffix, cores},
		{"memory/" + pool + suffix, float64(memory) / (1 << 30)},
		{"service-fee", cores},
	}
	if gpus > 0 {
		out = append(out, Quantity{"gpu/" + gpuType + suffix, float64(gpus)})
	}
	return out
}

// Line is one resource's part of a price.
type Line struct {
	Resource string  // the resource held
	Rated    string  // the resource whose rate applied ("": none did)
	Units    float64 // units held
	PerHour  float64 // dollars per unit-hour (0 without a rate)
	Version  uint32
}

// Price returns what holding qs costs per hour at the rates in force at t.
// A quantity without a rate of its own takes its kind's (compute/spot
// falls back to compute); one with neither costs nothing and says so.
func (b Book) Price(qs []Quantity, t int64) (perHour float64, lines []Line) {
	for _, q := range qs {
		l := Line{Resource: q.Resource, Units: q.Units}
		for name := q.Resource; name != ""; name = parent(name) {
			if r, ok := b.At(name, t); ok {
				l.Rated, l.PerHour, l.Version = name, r.PerHour, r.Version
				break
			}
		}
		perHour += q.Units * l.PerHour
		lines = append(lines, l)
	}
	return perHour, lines
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

// Cost is what perHour costs from start to end (unix ns; nothing when end
// is not after start).
func Cost(perHour float64, start, end int64) float64 {
	if end <= start {
		return 0
	}
	return perHour * float64(end-start) / float64(3600e9)
}
