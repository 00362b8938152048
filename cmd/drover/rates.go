package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
)

func (m adminCmds) runRateSet(ctx context.Context, args []string) error {
	fs := m.newFlags("rate set", "RESOURCE DOLLARS_PER_UNIT_HOUR [-from TIME]")
	from := fs.String("from", "", "when the rate takes effect, RFC 3339 (default: now; never in the past)")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	price, err := money.ParseRate(pos[1])
	if err != nil {
		return usagef("price %q is not a number of dollars per unit-hour", pos[1])
	}
	nr := api.NewRate{Resource: pos[0], PricePerHour: price}
	if *from != "" {
		t, err := time.Parse(time.RFC3339, *from)
		if err != nil {
			return usagef("-from %q is not an RFC 3339 time (2026-12-01T00:00:00Z)", *from)
		}
		nr.ValidFrom = &t
	}
	rates, err := m.Client().SetRates(ctx, []api.NewRate{nr})
	if err != nil {
		return err
	}
	return m.printRates(rates, *asJSON)
}

func (m adminCmds) runRateList(ctx context.Context, args []string) error {
	fs := m.newFlags("rate list", "[-all]")
	all := fs.Bool("all", false, "every version, superseded ones too")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	rates, err := m.Client().Rates(ctx, *all)
	if err != nil {
		return err
	}
	return m.printRates(rates, *asJSON)
}

func (m adminCmds) printRates(rates []api.Rate, asJSON bool) error {
	if asJSON {
		return m.printJSON(rates)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tVERSION\t$/UNIT-HOUR\tFROM\tIN FORCE")
	for _, r := range rates {
		safef(tw, "%s\t%d\t%s\t%s\t%v\n", r.Resource, r.Version, r.PricePerHour, r.ValidFrom.Format(time.RFC3339), r.InForce)
	}
	return tw.Flush()
}

// runBillingEfficiency reports what the jobs of a billing project's
// batches, or of a user's, asked for against what they used over days.
func (m adminCmds) runBillingEfficiency(ctx context.Context, args []string) error {
	fs := m.newFlags("billing efficiency", "[-project P] [-user U] [-from DAY] [-to DAY] [-json]")
	project := fs.String("project", "", "a billing project's batches (default: the user's in every project)")
	user := fs.String("user", "", "a user's batches (default: yours, unless -project)")
	from := fs.String("from", "", "first UTC day, 2026-11-01 (default: 30 days ago)")
	to := fs.String("to", "", "last UTC day (default: today)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	e, err := m.Client().PeriodEfficiency(ctx, api.EfficiencyQuery{BillingProject: *project, User: *user, From: *from, To: *to})
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(e)
	}
	if e.Partial != "" {
		safef(m.Stderr, "warning: %s\n", e.Partial)
	}
	whose := "user " + e.User
	switch {
	case e.BillingProject != "" && e.User != "":
		whose = fmt.Sprintf("user %s in billing project %s", e.User, e.BillingProject)
	case e.BillingProject != "":
		whose = "billing project " + e.BillingProject
	}
	if e.Total.Attempts == 0 {
		safef(m.Stdout, "%s, %s..%s: no attempt of a finished batch reported its usage\n", whose, e.From, e.To)
		return nil
	}
	safef(m.Stdout, "%s, %s..%s: %d finished batches\n", whose, e.From, e.To, e.Batches)
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, efficiencyHeader)
	for _, g := range e.Groups {
		name := g.Name
		if g.JobGroup != "" {
			name = g.JobGroup + ": " + name
		}
		if e.User == "" || e.BillingProject == "" {
			name = g.User + "@" + g.BillingProject + " " + name
		}
		efficiencyRow(tw, name, g, true)
	}
	if len(e.Users) > 1 {
		for _, g := range e.Users {
			efficiencyRow(tw, "user "+g.Name, g, false)
		}
	}
	if len(e.Projects) > 1 {
		for _, g := range e.Projects {
			efficiencyRow(tw, "project "+g.Name, g, false)
		}
	}
	efficiencyRow(tw, e.Total.Name, e.Total, false)
	if err := tw.Flush(); err != nil {
		return err
	}
	if e.Total.Savings > 0 {
		safef(m.Stdout, "Asking for the suggested sizes would have saved %s (from each group's 95th percentile of use, with 20%% to spare).\n", e.Total.Savings.Display())
	}
	return nil
}

func (m adminCmds) runBillingShow(ctx context.Context, args []string) error {
	fs := m.newFlags("billing show", "-project P [-from DAY] [-to DAY] [-by day|user|batch] [-limit N]")
	project := fs.String("project", "", "the billing project (required)")
	from := fs.String("from", "", "first UTC day, 2026-11-01 (default: 30 days ago)")
	to := fs.String("to", "", "last UTC day (default: today)")
	by := fs.String("by", api.CostByDay, "group by day, user or batch")
	limit := fs.Int("limit", 0, fmt.Sprintf("list at most N users or batches, the most costly (default %d, at most %d)", api.DefaultCostRows, api.MaxCostRows))
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *project == "" {
		return usagef("drover billing show needs -project")
	}
	c, err := m.Client().ProjectCost(ctx, *project, api.CostQuery{From: *from, To: *to, By: *by, Limit: *limit})
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(c)
	}
	if c.Partial != "" {
		safef(m.Stderr, "warning: %s\n", c.Partial)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	switch c.By {
	case api.CostByDay:
		fmt.Fprintln(tw, "DAY\tCOST")
		for _, r := range c.Rows {
			safef(tw, "%s\t%s\n", r.Day, dollars(r.Cost))
		}
	case api.CostByUser:
		fmt.Fprintln(tw, "USER\tCOST\tRUNNING")
		for _, r := range c.Rows {
			safef(tw, "%s\t%s\t%s\n", r.User, dollars(r.Cost), dollars(r.Running))
		}
	default:
		fmt.Fprintln(tw, "BATCH\tUSER\tCOST\tRUNNING")
		for _, r := range c.Rows {
			safef(tw, "%d\t%s\t%s\t%s\n", r.Batch, r.User, dollars(r.Cost), dollars(r.Running))
		}
	}
	if c.Omitted > 0 {
		what := map[string]string{api.CostByUser: "user", api.CostByBatch: "batch"}[c.By]
		if c.Omitted > 1 {
			what = map[string]string{api.CostByUser: "users", api.CostByBatch: "batches"}[c.By]
		}
		gap := "\t"
		if c.By == api.CostByBatch {
			gap = "\t\t" // under COST, past USER
		}
		safef(tw, "(%d more %s)%s%s\n", c.Omitted, what, gap, dollars(c.OmittedCost))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	safeln(m.Stdout)
	tw = tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	safef(tw, "ended %s..%s\t%s\n", c.From, c.To, dollars(c.Total))
	safef(tw, "running now\t%s\n", dollars(c.Running))
	safef(tw, "all time, running to now\t%s\n", dollars(c.Cost))
	return tw.Flush()
}
