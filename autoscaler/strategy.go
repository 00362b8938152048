package autoscaler

import (
	"cmp"
	"fmt"
)

// Strategy ranks launch configs: negative when a is preferred to b. Ties
// fall to the config's name, so every leader ranks alike.
type Strategy func(a, b *LaunchConfig) int

// Cheapest prefers the lowest price per core-hour (compared exactly:
// ComparePricePerCore), then the smaller machine: clouds price cores alike in every size, and a machine is paid
// until its last job ends, so a small one idles less while its jobs end at
// different times, packs a few waiting jobs with less room left over, and
// loses fewer jobs when the cloud takes it back.
func Cheapest(a, b *LaunchConfig) int {
	if c := ComparePricePerCore(a, b); c != 0 {
		return c
	}
	return cmp.Compare(a.CPUMilli, b.CPUMilli)
}

// PreferLarge prefers the machine with the most cores, then the cheapest
// per core: fewer, denser nodes when a control plane strains under many
// small ones (Aurora's run-up to a launch).
func PreferLarge(a, b *LaunchConfig) int {
	if c := cmp.Compare(b.CPUMilli, a.CPUMilli); c != 0 {
		return c
	}
	return ComparePricePerCore(a, b)
}

// PreferReserved prefers capacity bought ahead, then the cheapest.
func PreferReserved(a, b *LaunchConfig) int {
	if a.Reserved != b.Reserved {
		if a.Reserved {
			return -1
		}
		return 1
	}
	return Cheapest(a, b)
}

// Strategies by name, as configs and the CLI spell them.
var strategies = map[string]Strategy{"cheapest": Cheapest, "prefer-large": PreferLarge, "prefer-reserved": PreferReserved}

// StrategyNames lists the strategies in the order the docs present them.
func StrategyNames() []string { return []string{"cheapest", "prefer-large", "prefer-reserved"} }

// ParseStrategy maps a name to a strategy; "" is cheapest.
func ParseStrategy(name string) (Strategy, error) {
	if name == "" {
		return Cheapest, nil
	}
	if s, ok := strategies[name]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("unknown autoscaler strategy %.40q (cheapest, prefer-large or prefer-reserved)", name)
}
