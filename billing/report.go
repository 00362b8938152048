package billing

import (
	"cmp"
	"slices"

	"github.com/drover-sched/drover/money"
)

// Spend is what one batch cost over a report's days: its attempts that
// ended on them (Cost), and those still running, up to now (Running).
type Spend struct {
	Batch   uint64
	User    string
	Cost    money.Amount
	Running money.Amount
}

// Row is one line of a report grouped by user or by batch (Batch 0 when
// by user).
type Row struct {
	User    string
	Batch   uint64
	Cost    money.Amount
	Running money.Amount
}

// Group sums spends by user, or by batch when byBatch, most costly first
// (Cost + Running; then by user name, or newest batch first), and keeps
// the first limit rows; the others are counted in omitted and summed in
// rest.
func Group(spends []Spend, byBatch bool, limit int) (rows []Row, rest Row, omitted int) {
	type key struct {
		user  string
		batch uint64
	}
	idx := map[key]int{}
	for _, s := range spends {
		k := key{user: s.User}
		if byBatch {
			k = key{batch: s.Batch}
		}
		i, ok := idx[k]
		if !ok {
			i = len(rows)
			idx[k] = i
			rows = append(rows, Row{User: s.User, Batch: k.batch})
		}
		rows[i].Cost = rows[i].Cost.Add(s.Cost)
		rows[i].Running = rows[i].Running.Add(s.Running)
	}
	slices.SortFunc(rows, func(a, b Row) int {
		if c := cmp.Compare(b.Cost.Add(b.Running), a.Cost.Add(a.Running)); c != 0 {
			return c
		}
		if byBatch {
			return cmp.Compare(b.Batch, a.Batch)
		}
		return cmp.Compare(a.User, b.User)
	})
	if len(rows) > limit {
		for _, r := range rows[limit:] {
			rest.Cost = rest.Cost.Add(r.Cost)
			rest.Running = rest.Running.Add(r.Running)
		}
		omitted = len(rows) - limit
		rows = rows[:limit]
	}
	return rows, rest, omitted
}
