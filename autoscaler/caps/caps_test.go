package caps

import (
	"testing"

	"github.com/drover-sched/drover/money"
)

// d is a rate of dollars an hour, as a person writes it.
func d(dollars float64) money.Rate { return money.RateFromDollars(dollars) }

// TestHold: each cap, in the order the planner and apply both report
// them, and the edges a float sum of prices missed (ten machines at $0.10
// are $1.00 an hour, not a hair over it; a nano-dollar over a cap is
// over).
func TestHold(t *testing.T) {
	for _, c := range []struct {
		name   string
		global Limits
		all    Use
		own    Limits
		one    Use
		price  money.Rate
		want   string
	}{
		{"no caps", Limits{}, Use{Nodes: 1e6, PerHour: d(1e9), Adds: 1e6}, Limits{}, Use{}, d(100), ""},
		{"room", Limits{MaxNodes: 3, MaxPerHour: d(3), MaxAddsPerMinute: 3}, Use{Nodes: 2, PerHour: d(2), Adds: 2}, Limits{}, Use{}, d(1), ""},
		{"node cap", Limits{MaxNodes: 2}, Use{Nodes: 2}, Limits{}, Use{}, d(1), "held by the node cap (2 of 2)"},
		{"config's node cap", Limits{MaxNodes: 10}, Use{Nodes: 2}, Limits{MaxNodes: 1}, Use{Nodes: 1}, d(1), "held by c's node cap (1 of 1)"},
		{"the fleet's cap before the config's", Limits{MaxNodes: 1}, Use{Nodes: 1}, Limits{MaxNodes: 1}, Use{Nodes: 1}, d(1), "held by the node cap (1 of 1)"},
		{"nodes before spend", Limits{MaxPerHour: d(1)}, Use{PerHour: d(1)}, Limits{MaxNodes: 1}, Use{Nodes: 1}, d(1), "held by c's node cap (1 of 1)"},
		{"$/hour cap", Limits{MaxPerHour: d(2.5)}, Use{PerHour: d(2)}, Limits{}, Use{}, d(1), "held by the $/hour cap ($2.00 of $2.50)"},
		{"config's $/hour cap", Limits{}, Use{}, Limits{MaxPerHour: d(1)}, Use{PerHour: d(0.5)}, d(0.75), "held by c's $/hour cap ($0.50 of $1.00)"},
		{"$0.10 and $0.20 fill a $0.30 cap (0.30000000000000004 in float64)", Limits{MaxPerHour: d(0.3)}, Use{PerHour: d(0.1)}, Limits{MaxPerHour: d(0.3)}, Use{PerHour: d(0.1)}, d(0.2), ""},
		{"ten at $0.10 fill a $1.00 cap", Limits{MaxPerHour: d(1)}, Use{PerHour: d(0.9)}, Limits{MaxPerHour: d(1)}, Use{PerHour: d(0.9)}, d(0.1), ""},
		{"a nano-dollar over is over", Limits{MaxPerHour: d(1)}, Use{PerHour: d(0.9)}, Limits{}, Use{}, d(0.1) + 1, "held by the $/hour cap ($0.90 of $1.00)"},
		{"a cent over is over", Limits{MaxPerHour: d(1)}, Use{PerHour: d(0.91)}, Limits{}, Use{}, d(0.1), "held by the $/hour cap ($0.91 of $1.00)"},
		{"add rate", Limits{MaxAddsPerMinute: 5}, Use{Adds: 5}, Limits{}, Use{}, d(1), "held by the add rate (5 a minute)"},
		{"config's add rate", Limits{}, Use{Adds: 9}, Limits{MaxAddsPerMinute: 2}, Use{Adds: 2}, d(1), "held by c's add rate (2 a minute)"},
		{"spend before adds", Limits{MaxPerHour: d(1), MaxAddsPerMinute: 1}, Use{PerHour: d(1), Adds: 1}, Limits{}, Use{}, d(1), "held by the $/hour cap ($1.00 of $1.00)"},
	} {
		if got := Hold(c.global, c.all, "c", c.own, c.one, c.price); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestOver: a fleet passes its caps when it holds more than them; at the
// cap it does not, and a nano-dollar an hour over is over.
func TestOver(t *testing.T) {
	l := Limits{MaxNodes: 3, MaxPerHour: d(1), MaxAddsPerMinute: 1}
	for _, c := range []struct {
		u    Use
		want bool
	}{
		{Use{Nodes: 3, PerHour: d(1), Adds: 50}, false},
		{Use{Nodes: 4}, true},
		{Use{PerHour: d(1) + 1}, true},
		{Use{PerHour: d(1.01)}, true},
	} {
		if got := Over(l, c.u); got != c.want {
			t.Errorf("%+v: %v, want %v", c.u, got, c.want)
		}
	}
	if Over(Limits{}, Use{Nodes: 1e9, PerHour: d(1e9)}) {
		t.Error("no caps: nothing is over")
	}
}
