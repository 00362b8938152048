package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/jobspec/placementspec"
)

func (m placementCmds) runQueueList(ctx context.Context, args []string) error {
	return runList(m.Main, ctx, args, "queue list", "No queues.", "QUEUE\tWEIGHT\tGUARANTEE CPU\tCAP CPU\tCPU USED\tJOBS\tPROJECTS",
		m.Client().ListQueues, func(q api.Queue) string {
			return rowf("%s\t%d\t%g\t%s\t%g\t%d\t%s", q.Path, q.Weight, q.Guarantee.CPU, capCPU(&q), q.Used.CPU, q.UsedJobs, strings.Join(q.BillingProjects, ","))
		})
}

func capCPU(q *api.Queue) string {
	if q.Cap == nil || q.BorrowLimit == nil || q.BorrowLimit.CPU == nil {
		return "unlimited"
	}
	return fmt.Sprint(q.Cap.CPU)
}

// runQueueTree prints the tree indented, each queue with its weight, its
// guarantee, its cap and what it uses.
func (m placementCmds) runQueueTree(ctx context.Context, args []string) error {
	fs := m.newFlags("queue tree", "[-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	qs, err := m.Client().ListQueues(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(qs)
	}
	if len(qs) == 0 {
		safef(m.Stdout, "No queues.\n")
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	safef(tw, "QUEUE\tWEIGHT\tGUARANTEE\tCAP\tUSED\tJOBS\tMAX RUNNING\tPROJECTS\n")
	for _, q := range qs {
		depth := strings.Count(q.Path, "/")
		name := q.Path[strings.LastIndex(q.Path, "/")+1:]
		max := "-"
		if q.MaxRunning.Jobs > 0 || q.MaxRunning.CPU > 0 {
			max = fmt.Sprintf("%s jobs, %s cores", countString(q.MaxRunning.Jobs), limitString(q.MaxRunning.CPU))
		}
		safef(tw, "%s%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\n", strings.Repeat("  ", depth), name, q.Weight, amount(q.Guarantee), capString(&q),
			amount(q.Used), q.UsedJobs, max, strings.Join(q.BillingProjects, ","))
	}
	return tw.Flush()
}

func countString(n int64) string {
	if n == 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

// amount words cores, memory and GPUs briefly: "8 cores, 32GiB, 2 a100".
func amount(q api.Quota) string {
	parts := []string{fmt.Sprintf("%g cores", q.CPU)}
	if q.Memory > 0 {
		parts = append(parts, units.FormatBytes(q.Memory))
	}
	for _, typ := range slices.Sorted(mapKeys(q.GPUs)) {
		parts = append(parts, fmt.Sprintf("%d %s", q.GPUs[typ], typ))
	}
	return strings.Join(parts, ", ")
}

func capString(q *api.Queue) string {
	if q.Cap == nil {
		return "unlimited"
	}
	return amount(*q.Cap)
}

func (m placementCmds) runQueueShow(ctx context.Context, args []string) error {
	fs := m.newFlags("queue show", "PATH [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	q, err := m.Client().GetQueue(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(q)
	}
	return m.printQueue(q)
}

func (m placementCmds) printQueue(q *api.Queue) error {
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	safef(tw, "Queue\t%s\n", q.Path)
	safef(tw, "Leaf\t%t\n", q.Leaf)
	safef(tw, "Weight\t%d\n", q.Weight)
	safef(tw, "Guarantee\t%s\n", amount(q.Guarantee))
	safef(tw, "Cap (guarantee and borrow limit)\t%s\n", capString(q))
	if q.LendLimit != nil {
		safef(tw, "Lend limit\t%s\n", limitWords(q.LendLimit))
	}
	safef(tw, "Max running\t%s jobs, %s cores\n", countString(q.MaxRunning.Jobs), limitString(q.MaxRunning.CPU))
	safef(tw, "Uses\t%s in %d jobs\n", amount(q.Used), q.UsedJobs)
	for _, c := range slices.Sorted(mapKeys(q.UsedByCluster)) {
		safef(tw, "  in %s\t%g cores\n", c, q.UsedByCluster[c])
	}
	if q.UsageHalfLife != "" {
		safef(tw, "Usage half-life\t%s (its users' and its queues' past use weighs in fair share, halving every %s)\n", q.UsageHalfLife, q.UsageHalfLife)
	}
	if q.PastUseCoreHours > 0 {
		safef(tw, "Past use\t%.1f core-hours after decay (weighed with what it holds when its siblings share)\n", q.PastUseCoreHours)
	}
	safef(tw, "Preemptible\t%t\n", q.Preemptible)
	if q.PreemptAfter != "" {
		safef(tw, "Preempts after\t%s below %g of its fair share\n", q.PreemptAfter, q.PreemptThreshold)
	}
	if len(q.AllowPreemptionFrom) > 0 {
		safef(tw, "Preempts from\t%s\n", strings.Join(q.AllowPreemptionFrom, ", "))
	}
	if q.ReclaimGrace != "" {
		safef(tw, "Reclaim grace\t%s\n", q.ReclaimGrace)
	}
	if q.MinRuntime != "" {
		safef(tw, "Min runtime\t%s\n", q.MinRuntime)
	}
	if q.Strategy != "" {
		safef(tw, "Strategy\t%s\n", q.Strategy)
	}
	if q.Leaf {
		safef(tw, "Max priority\t%d (for anyone but admins; each billing project's own holds below it)\n", q.MaxPriority)
	}
	if len(q.HomeClusters) > 0 {
		safef(tw, "Home clusters\t%s\n", strings.Join(q.HomeClusters, ", "))
	}
	safef(tw, "Billing projects\t%s\n", strings.Join(q.BillingProjects, ", "))
	if len(q.AllowProjects) > 0 {
		safef(tw, "Also usable by\t%s\n", strings.Join(q.AllowProjects, ", "))
	}
	return tw.Flush()
}

func limitWords(l *api.Limit) string {
	var parts []string
	if l.CPU != nil {
		parts = append(parts, fmt.Sprintf("%g cores", *l.CPU))
	}
	if l.Memory != nil {
		parts = append(parts, units.FormatBytes(*l.Memory))
	}
	for _, typ := range slices.Sorted(mapKeys(l.GPUs)) {
		parts = append(parts, fmt.Sprintf("%d %s", l.GPUs[typ], typ))
	}
	return strings.Join(parts, ", ")
}

// runQueueSet creates a queue or changes the settings its flags name,
// keeping the others.
func (m placementCmds) runQueueSet(ctx context.Context, args []string) error {
	fs := m.newFlags("queue set", "PATH [flags] [-json]")
	weight := fs.Int64("weight", 0, "its part among its siblings (1 to 1000000)")
	gCPU := fs.Float64("guarantee-cpu", 0, "guaranteed cores across all clusters (its nominal quota)")
	gMem := fs.String("guarantee-memory", "", "guaranteed memory, e.g. 4TiB")
	var gGPU multiFlag
	fs.Var(&gGPU, "guarantee-gpu", "guaranteed GPUs TYPE=COUNT (repeatable)")
	borrowCPU := fs.String("borrow-cpu", "", "cores it may hold beyond its guarantee (0: a hard quota; none: no bound)")
	lendCPU := fs.String("lend-cpu", "", "cores of its idle guarantee its siblings may borrow (none: all)")
	maxJobs := fs.Int64("max-jobs", 0, "max_running: jobs it and its children run at once (0: no cap)")
	maxCPU := fs.Float64("max-cpu", 0, "max_running: cores it and its children hold at once (0: no cap)")
	var projects, allow, from, home multiFlag
	fs.Var(&projects, "project", "billing project whose batches run here unless they name another queue (repeatable; replaces the list)")
	fs.Var(&allow, "allow-project", "billing project that may name this queue (repeatable; replaces the list)")
	fs.Var(&from, "allow-preemption-from", "queue it may preempt from (repeatable)")
	fs.Var(&home, "home-cluster", "cluster its new attempts go to (repeatable)")
	strategy := fs.String("strategy", "", "spread, least-loaded, pack or cheapest (empty: its parent's)")
	preemptible := fs.Bool("preemptible", false, "other queues may preempt its attempts")
	after := fs.String("preempt-after", "", "preempt when held below its threshold of fair share this long, e.g. 5m")
	threshold := fs.Float64("preempt-threshold", 0, "fraction of its fair share (default 0.5)")
	grace := fs.String("reclaim-grace", "", "how long a borrower keeps its guarantee once it has work waiting, e.g. 2m")
	minRuntime := fs.String("min-runtime", "", "protects an attempt from a second preemption this long, e.g. 10m")
	maxPrio := fs.Int64("max-priority", 0, "the highest priority a batch of anyone but an admin may ask in this leaf (0 to 1000000); each billing project's own max_priority holds below it")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	q, err := m.Client().GetQueue(ctx, pos[0])
	var he *api.Error
	switch {
	case errors.As(err, &he) && he.StatusCode == http.StatusNotFound:
		q = &api.Queue{Path: pos[0]}
	case err != nil:
		return err
	}
	var ferr error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "weight":
			q.Weight = *weight
		case "guarantee-cpu":
			q.Guarantee.CPU = *gCPU
		case "guarantee-memory":
			b, err := units.ParseBytes(*gMem)
			if err != nil {
				ferr = usagef("-guarantee-memory: %v", err)
			}
			q.Guarantee.Memory = b
		case "guarantee-gpu":
			g, err := quotaArgs(0, "", gGPU)
			if err != nil {
				ferr = err
			}
			q.Guarantee.GPUs = g.GPUs
		case "borrow-cpu":
			q.BorrowLimit, ferr = setLimitCPU(q.BorrowLimit, "-borrow-cpu", *borrowCPU)
		case "lend-cpu":
			q.LendLimit, ferr = setLimitCPU(q.LendLimit, "-lend-cpu", *lendCPU)
		case "max-jobs":
			q.MaxRunning.Jobs = *maxJobs
		case "max-cpu":
			q.MaxRunning.CPU = *maxCPU
		case "project":
			q.BillingProjects = projects
		case "allow-project":
			q.AllowProjects = allow
		case "allow-preemption-from":
			q.AllowPreemptionFrom = from
		case "home-cluster":
			q.HomeClusters = home
		case "strategy":
			q.Strategy = *strategy
		case "preemptible":
			q.Preemptible = *preemptible
		case "preempt-after":
			q.PreemptAfter = *after
		case "preempt-threshold":
			q.PreemptThreshold = *threshold
		case "reclaim-grace":
			q.ReclaimGrace = *grace
		case "min-runtime":
			q.MinRuntime = *minRuntime
		case "max-priority":
			q.MaxPriority = *maxPrio
		}
	})
	if ferr != nil {
		return ferr
	}
	out, err := m.Client().PutQueue(ctx, q)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(out)
	}
	return m.printQueue(out)
}

// setLimitCPU sets a limit's cores ("none": unbounded).
func setLimitCPU(l *api.Limit, flagName, v string) (*api.Limit, error) {
	if l == nil {
		l = &api.Limit{}
	}
	if v == "none" {
		l.CPU = nil
		if l.Memory == nil && len(l.GPUs) == 0 {
			return nil, nil
		}
		return l, nil
	}
	c, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return l, usagef("%s %q: a number of cores, or none", flagName, v)
	}
	l.CPU = &c
	return l, nil
}

func (m placementCmds) runQueueDelete(ctx context.Context, args []string) error {
	fs := m.newFlags("queue delete", "PATH")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if err := m.Client().DeleteQueue(ctx, pos[0]); err != nil {
		return err
	}
	safef(m.Stdout, "Queue %s removed.\n", pos[0])
	return nil
}

// runQueueRoute redirects a queue (and the queues below it that name no
// home of their own) to other clusters: new attempts go only there from
// the next scheduling round, without users changing their jobspecs.
func (m placementCmds) runQueueRoute(ctx context.Context, args []string) error {
	fs := m.newFlags("queue route", "PATH (-to CLUSTER... | -clear) [-json]")
	var to multiFlag
	fs.Var(&to, "to", "a cluster the queue's new attempts go to (repeatable)")
	clearRoute := fs.Bool("clear", false, "route the queue nowhere in particular: any cluster its jobs allow")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if (len(to) == 0) == !*clearRoute {
		return usagef("give -to CLUSTER (repeatable) or -clear")
	}
	q, err := m.Client().GetQueue(ctx, pos[0])
	if err != nil {
		return err
	}
	q.HomeClusters = to
	out, err := m.Client().PutQueue(ctx, q)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(out)
	}
	if len(out.HomeClusters) == 0 {
		safef(m.Stdout, "Queue %s is routed to any cluster its jobs allow.\n", out.Path)
	} else {
		safef(m.Stdout, "Queue %s is routed to %s: its new attempts go there from the next scheduling round.\n", out.Path, strings.Join(out.HomeClusters, ", "))
	}
	return nil
}

// runQueueRecommend prints Monarch's percentile algorithm's suggestions
// from the recorded usage: a table of each queue's guarantee, weight and
// max_running now and suggested, with the data behind them, or with -hcl
// the whole tree with the suggestions in, for drover placement apply.
func (m placementCmds) runQueueRecommend(ctx context.Context, args []string) error {
	fs := m.newFlags("queue recommend", "[-days 30] [-percentile 95] [-hcl | -json]")
	days := fs.Int("days", 0, "the window of recorded usage, in days: 1 to 365, and at most the days the server keeps (-queue-usage-retention) (default: 30, or those days when fewer)")
	percentile := fs.Float64("percentile", 95, "the share of the time a queue is in use its guarantee covers, in percent, for the queues whose tree sets no recommend percentile")
	asHCL := fs.Bool("hcl", false, "print the queue tree with the suggestions in, as queue blocks drover placement apply takes")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	rec, err := m.Client().RecommendQueues(ctx, *days, *percentile)
	if err != nil {
		return err
	}
	switch {
	case *asJSON:
		return m.printJSON(rec)
	case *asHCL:
		safef(m.Stdout, "# drover queue recommend -days %d -percentile %g\n", rec.Days, rec.Percentile)
		_, err := m.Stdout.Write(placementspec.FormatQueues(rec.Tree))
		return err
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	safef(tw, "QUEUE\tPERCENTILE\tHOURS IN USE\tCOVERED\tPEAK CORES\tGUARANTEE\tWEIGHT\tMAX RUNNING JOBS\n")
	arrow := func(now, next string) string {
		if now == next {
			return now
		}
		return now + " -> " + next
	}
	for _, q := range rec.Queues {
		hours := fmt.Sprintf("%.1f", q.HoursInUse)
		if q.NoSamples {
			hours = "no samples: kept"
		}
		safef(tw, "%s\t%g%%\t%s\t%.1f\t%g\t%s\t%s\t%s\n", q.Path, q.Percentile*100, hours, q.HoursCovered, q.PeakCPU,
			arrow(fmt.Sprint(q.CurrentGuarantee), fmt.Sprint(q.Guarantee)), arrow(fmt.Sprint(q.CurrentWeight), fmt.Sprint(q.Weight)),
			arrow(countString(q.CurrentMaxRunningJobs), countString(q.MaxRunningJobs)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range rec.Checks {
		ok := "ok"
		if !c.OK {
			ok = "FAILED"
		}
		safef(m.Stdout, "Check: %s: %s (%s)\n", c.Check, ok, c.Detail)
	}
	return nil
}

// runQueueSLO prints the SLO report over the last days: each tier's share
// of SLO-successful workflows, each workflow's runs and success ratio, and
// each queue's runs and usage/capacity ratio.
func (m placementCmds) runQueueSLO(ctx context.Context, args []string) error {
	fs := m.newFlags("queue slo", "[-days 30] [-threshold 0.9] [-json]")
	days := fs.Int("days", 0, "the window, in days, as drover queue recommend's (default: 30, or the days of queue usage the server keeps when fewer)")
	threshold := fs.Float64("threshold", 0.9, "the success ratio from which a workflow is SLO-successful (more than 0, at most 1)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	rep, err := m.Client().QueueSLO(ctx, *days, *threshold)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(rep)
	}
	pct := func(runs int64, f float64) string {
		if runs == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", f*100)
	}
	safef(m.Stdout, "SLOs of the runs that completed in the last %d days; a workflow is SLO-successful when at least %g%% of its runs met their SLO.\n", rep.Days, rep.Threshold*100)
	if rep.Truncated {
		safef(m.Stdout, "The window holds more than %d runs: these counts are of the first %d.\n", api.MaxSLORuns, api.MaxSLORuns)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	safef(tw, "\nTIER\tWORKFLOWS\tSLO-SUCCESSFUL\tSHARE\tRUNS\tMET\tCANCELLED\tCORE-HOURS\tUSAGE/CAPACITY\n")
	for _, t := range rep.Tiers {
		safef(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%d\t%.1f\t%.2f\n", t.Queue, t.Workflows, t.SuccessfulWorkflows, pct(t.Workflows, t.WorkflowSuccessRatio),
			t.Runs, t.Met, t.Cancelled, t.CoreHours, t.UsageCapacity)
	}
	if len(rep.Workflows) > 0 {
		safef(tw, "\nPROJECT\tWORKFLOW\tTIER\tRUNS\tMET\tCANCELLED\tSUCCESS RATIO\tSLO-SUCCESSFUL\n")
		for _, w := range rep.Workflows {
			ok := "no"
			switch {
			case w.Runs == 0:
				ok = "-"
			case w.SLOSuccessful:
				ok = "yes"
			}
			safef(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", w.BillingProject, w.Workflow, w.Tier, w.Runs, w.Met, w.Cancelled, pct(w.Runs, w.SuccessRatio), ok)
		}
	}
	safef(tw, "\nQUEUE\tRUNS\tMET\tCANCELLED\tSUCCESS RATIO\tCORE-HOURS\tUSAGE/CAPACITY\n")
	for _, q := range rep.Queues {
		safef(tw, "%s\t%d\t%d\t%d\t%s\t%.1f\t%.2f\n", q.Queue, q.Runs, q.Met, q.Cancelled, pct(q.Runs, q.SuccessRatio), q.CoreHours, q.UsageCapacity)
	}
	return tw.Flush()
}

// runQueueHistory prints the versions kept of trees' regenerated
// settings, each change of weight, guarantee and max_running.
func (m placementCmds) runQueueHistory(ctx context.Context, args []string) error {
	fs := m.newFlags("queue history", "[TREE] [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 0, 1)
	if err != nil {
		return err
	}
	tree := ""
	if len(pos) == 1 {
		tree = pos[0]
	}
	h, err := m.Client().QueueHistory(ctx, tree)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(h)
	}
	if h.LastRun != nil {
		safef(m.Stdout, "Last regenerated %s.\n", h.LastRun.Local().Format("2006-01-02 15:04:05"))
	}
	if len(h.Versions) == 0 {
		safef(m.Stdout, "No versions kept.\n")
		return nil
	}
	for _, v := range h.Versions {
		applied := "applied"
		if !v.Applied {
			applied = "not applied"
		}
		safef(m.Stdout, "\nVersion %d of %s, %s by %s: %s (%s)\n", v.Version, v.Tree, v.Time.Local().Format("2006-01-02 15:04:05"), v.By, v.Kind, applied)
		if v.Note != "" {
			safef(m.Stdout, "  %s\n", v.Note)
		}
		tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
		safef(tw, "  QUEUE\tWEIGHT\tGUARANTEE CPU\tMAX RUNNING JOBS\tHOME CLUSTERS\n")
		for _, c := range v.Changes {
			arrow := func(a, b string) string {
				if a == b {
					return a
				}
				return a + " -> " + b
			}
			homes := func(cs []string) string {
				if len(cs) == 0 {
					return "any"
				}
				return strings.Join(cs, ",")
			}
			safef(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Path, arrow(fmt.Sprint(c.WeightBefore), fmt.Sprint(c.Weight)),
				arrow(fmt.Sprint(c.GuaranteeBefore), fmt.Sprint(c.Guarantee)), arrow(countString(c.MaxRunningJobsBefore), countString(c.MaxRunningJobs)),
				arrow(homes(c.HomeClustersBefore), homes(c.HomeClusters)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// runQueueRollback puts back a tree's settings from before a version.
func (m placementCmds) runQueueRollback(ctx context.Context, args []string) error {
	fs := m.newFlags("queue rollback", "TREE VERSION [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	n, err := strconv.ParseUint(pos[1], 10, 64)
	if err != nil {
		return usagef("version %q: a number drover queue history lists", pos[1])
	}
	v, err := m.Client().RollbackQueues(ctx, &api.QueueRollbackRequest{Tree: pos[0], Version: n})
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(v)
	}
	if v.Version == 0 {
		safef(m.Stdout, "Tree %s already has the settings it had before version %d.\n", pos[0], n)
		return nil
	}
	safef(m.Stdout, "Tree %s has its settings from before version %d again (%d queues changed, as version %d).\n", pos[0], n, len(v.Changes), v.Version)
	return nil
}

// runQueueAutoApply regenerates a tree's settings now.
func (m placementCmds) runQueueAutoApply(ctx context.Context, args []string) error {
	fs := m.newFlags("queue auto-apply", "TREE [-dry-run] [-json]")
	dry := fs.Bool("dry-run", false, "only record the proposal (drover queue history shows it)")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	v, err := m.Client().AutoApplyQueues(ctx, &api.QueueAutoApplyRequest{Tree: pos[0], DryRun: *dry})
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(v)
	}
	if v.Version == 0 {
		safef(m.Stdout, "Tree %s: nothing to change.\n", pos[0])
		return nil
	}
	safef(m.Stdout, "Tree %s: version %d, %s, %d queues changed", pos[0], v.Version, v.Kind, len(v.Changes))
	if !v.Applied {
		safef(m.Stdout, " (not applied)")
	}
	safef(m.Stdout, ".\n")
	if v.Note != "" {
		safef(m.Stdout, "%s\n", v.Note)
	}
	return nil
}

// runQueueReport prints each cluster's capacity and what each tier and
// leaf queue used of it, by the dominant resource.
func (m placementCmds) runQueueReport(ctx context.Context, args []string) error {
	fs := m.newFlags("queue report", "[-by cluster] [-days 30] [-json]")
	by := fs.String("by", "cluster", "what the report is by (cluster)")
	days := fs.Int("days", 0, "the window, in days (default: 30, or the days of queue usage the server keeps when fewer)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *by != "cluster" {
		return usagef("-by %q: the report is by cluster", *by)
	}
	rep, err := m.Client().QueueReport(ctx, *days)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(rep)
	}
	if len(rep.Clusters) == 0 {
		safef(m.Stdout, "No usage recorded by cluster in the last %d days.\n", rep.Days)
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	safef(tw, "CLUSTER\tTIER OR QUEUE\tINSTANCE-HOURS\tVCORE-HOURS\tMEMORY GIB-HOURS\tUSAGE/CAPACITY\tDOMINANT\n")
	for _, c := range rep.Clusters {
		safef(tw, "%s\tcapacity\t%.1f\t%.1f\t%.1f\t\t\n", c.Cluster, c.Capacity.InstanceHours, c.Capacity.VcoreHours, c.Capacity.MemoryGiBHours)
		row := func(name string, u api.ClusterUse) {
			safef(tw, "%s\t%s\t%.1f\t%.1f\t%.1f\t%.0f%%\t%s\n", c.Cluster, name, u.Used.InstanceHours, u.Used.VcoreHours, u.Used.MemoryGiBHours, u.UsageCapacity*100, u.Dominant)
		}
		row("all", c.All)
		for _, t := range c.Tiers {
			row(t.Name, t)
		}
		for _, q := range c.Queues {
			row("  "+q.Name, q)
		}
	}
	return tw.Flush()
}

// runQueueRebalance prints (and with -apply makes) the moves of leaf
// queues between clusters that bring clusters above -high down.
func (m placementCmds) runQueueRebalance(ctx context.Context, args []string) error {
	fs := m.newFlags("queue rebalance", "[-days 7] [-high 0.8] [-low 0.6] [-max 10] [-apply] [-json]")
	days := fs.Int("days", 0, "the window of recorded usage, in days (default 7)")
	high := fs.Float64("high", 0, "move work off clusters above this usage/capacity (default 0.8)")
	low := fs.Float64("low", 0, "onto clusters that stay at or below this one (default 0.6)")
	maxMoves := fs.Int("max", 0, "at most so many moves (default 10)")
	apply := fs.Bool("apply", false, "make the moves: each moved queue's home_clusters, in one change (admin)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	out, err := m.Client().RebalanceQueues(ctx, &api.QueueRebalanceRequest{Days: *days, High: *high, Low: *low, MaxMoves: *maxMoves}, *apply)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(out)
	}
	if len(out.Moves) == 0 {
		safef(m.Stdout, "No move: no cluster is above %.0f%% of its capacity with a queue that fits where another stays within %.0f%% (last %d days).\n", out.High*100, out.Low*100, out.Days)
		return nil
	}
	verb := "Proposed"
	if out.Applied {
		verb = "Made"
	}
	safef(m.Stdout, "%s %d moves (last %d days; high %.0f%%, low %.0f%%):\n", verb, len(out.Moves), out.Days, out.High*100, out.Low*100)
	for _, mv := range out.Moves {
		safef(m.Stdout, "  %s: %s -> %s (home clusters %s)\n    %s\n", mv.Queue, mv.From, mv.To, strings.Join(mv.HomeClusters, ", "), mv.Reason)
	}
	if !out.Applied {
		safef(m.Stdout, "drover queue rebalance -apply makes them.\n")
	}
	return nil
}
