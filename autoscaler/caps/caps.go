// Package caps is the one rule of the autoscaler's caps: whether one more
// machine stays within the node, $/hour and add-rate caps over the whole
// fleet and over its launch config, and if not, which cap holds it. The
// autoscaler's planner asks it before it plans a machine and apply asks it
// again, with the machines the log already holds, before it records one
// (a leader's view may be behind the log), so the two cannot disagree. It
// imports nothing of drover's, so the state machine may import it without
// importing the autoscaler (which imports the scheduler).
package caps

import "fmt"

// Limits are caps on machines; 0 is no cap.
type Limits struct {
	MaxNodes         int64   // live machines
	MaxPerHour       float64 // dollars an hour of the live machines
	MaxAddsPerMinute int64   // machines launched in the minute before now
}

// Use is what the caps count: live machines (requested, launching or
// active), their price an hour, and the machines launched in the minute
// before now.
type Use struct {
	Nodes   int64
	PerHour float64
	Adds    int64
}

// slack absorbs the rounding of a sum of prices: machines at $0.10 an
// hour ten times over sum to a hair above $1.00 in float64, and a cap of
// $1.00 must still admit them.
const slack = 1e-9

// overSpend reports whether spend passes the cap (0: none).
func overSpend(spend, cap float64) bool { return cap > 0 && spend > cap+slack }

// Hold returns "" when one more machine of config, at price dollars an
// hour, stays within the fleet's caps (global, against all) and the
// config's own (own, against one), or the first cap that holds it, in
// words for the autoscaler's reasons: node caps first, then $/hour, then
// add rates, each the fleet's before the config's.
func Hold(global Limits, all Use, config string, own Limits, one Use, price float64) string {
	switch {
	case global.MaxNodes > 0 && all.Nodes+1 > global.MaxNodes:
		return fmt.Sprintf("held by the node cap (%d of %d)", all.Nodes, global.MaxNodes)
	case own.MaxNodes > 0 && one.Nodes+1 > own.MaxNodes:
		return fmt.Sprintf("held by %s's node cap (%d of %d)", config, one.Nodes, own.MaxNodes)
	case overSpend(all.PerHour+price, global.MaxPerHour):
		return fmt.Sprintf("held by the $/hour cap ($%.2f of $%.2f)", all.PerHour, global.MaxPerHour)
	case overSpend(one.PerHour+price, own.MaxPerHour):
		return fmt.Sprintf("held by %s's $/hour cap ($%.2f of $%.2f)", config, one.PerHour, own.MaxPerHour)
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
