// Package caps is the one rule of the autoscaler's caps: whether one more
// machine stays within the node, $/hour and add-rate caps over the whole
// fleet and over its launch config, and if not, which cap holds it. The
// autoscaler's planner asks it before it plans a machine and apply asks it
// again, with the machines the log already holds, before it records one
// (a leader's view may be behind the log), so the two cannot disagree. It
// imports only money (a leaf), so the state machine may import it without
// importing the autoscaler (which imports the scheduler).
//
// Prices and caps are integers (money.Rate, nano-dollars an hour), so a
// sum of prices is exact in any order and on any machine: ten machines
// at $0.10 an hour are $1.00 an hour against a $1.00 cap, with no
// epsilon to hide a float sum's error.
package caps

import (
	"fmt"

	"github.com/drover-sched/drover/money"
)

// Limits are caps on machines; 0 is no cap.
type Limits struct {
	MaxNodes         int64      // live machines
	MaxPerHour       money.Rate // what the live machines cost an hour
	MaxAddsPerMinute int64      // machines launched in the minute before now
}

// Use is what the caps count: live machines (requested, launching or
// active), their price an hour, and the machines launched in the minute
// before now.
type Use struct {
	Nodes   int64
	PerHour money.Rate // summed in any order: integers (money.Rate.Add)
	Adds    int64
}

// overSpend reports whether spend passes the cap (0: none).
func overSpend(spend, cap money.Rate) bool { return cap > 0 && spend > cap }

// Hold returns "" when one more machine of config, at price an hour, stays within the fleet's caps (global, against all) and the
// config's own (own, against one), or the first cap that holds it, in
// words for the autoscaler's reasons: node caps first, then $/hour, then
// add rates, each the fleet's before the config's.
func Hold(global Limits, all Use, config string, own Limits, one Use, price money.Rate) string {
	switch {
	case global.MaxNodes > 0 && all.Nodes+1 > global.MaxNodes:
		return fmt.Sprintf("held by the node cap (%d of %d)", all.Nodes, global.MaxNodes)
	case own.MaxNodes > 0 && one.Nodes+1 > own.MaxNodes:
		return fmt.Sprintf("held by %s's node cap (%d of %d)", config, one.Nodes, own.MaxNodes)
	case overSpend(all.PerHour.Add(price), global.MaxPerHour):
		return fmt.Sprintf("held by the $/hour cap ($%.2f of $%.2f)", all.PerHour.Dollars(), global.MaxPerHour.Dollars())
	case overSpend(one.PerHour.Add(price), own.MaxPerHour):
		return fmt.Sprintf("held by %s's $/hour cap ($%.2f of $%.2f)", config, one.PerHour.Dollars(), own.MaxPerHour.Dollars())
	case global.MaxAddsPerMinute > 0 && all.Adds+1 > global.MaxAddsPerMinute:
		return fmt.Sprintf("held by the add rate (%d a minute)", global.MaxAddsPerMinute)
	case own.MaxAddsPerMinute > 0 && one.Adds+1 > own.MaxAddsPerMinute:
		return fmt.Sprintf("held by %s's add rate (%d a minute)", config, own.MaxAddsPerMinute)
	}
	return ""
}

// Over reports whether a fleet's use already passes its node or $/hour
// cap (the add rate is a cap on launching, not on a fleet): what a
// simulation or a test counts as a violation of the caps Hold keeps.
func Over(l Limits, u Use) bool {
	return (l.MaxNodes > 0 && u.Nodes > l.MaxNodes) || overSpend(u.PerHour, l.MaxPerHour)
}
