package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/units"
)

// batchCmds are the commands for batches and their jobs: run, validate,
// batch and job (list, status, logs, why).
type batchCmds struct{ *Main }

// batchArg parses a command whose one positional argument is a batch ID.
func batchArg(fs *flag.FlagSet, args []string) (int64, error) {
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return 0, err
	}
	return parseID("batch ID", pos[0])
}

func parseID(what, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, usagef("%s %q is not a positive integer", what, s)
	}
	return id, nil
}

func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.Local().Format("2006-01-02")
}

// listFlags are the flags every listing command takes.
type listFlags struct {
	filter, state *string
	last          *int64
	all, json     *bool
}

func addListFlags(fs *flag.FlagSet, what, filterExample, states, lastHelp string) *listFlags {
	return &listFlags{
		filter: fs.String("filter", "", "filter, e.g. "+filterExample),
		state:  fs.String("state", "", "shorthand for -filter state=...: "+states),
		last:   fs.Int64("last-id", 0, lastHelp),
		all:    fs.Bool("all", false, "list every matching "+what+", not just one page of 50"),
		json:   fs.Bool("json", false, "print JSON"),
	}
}

// query is the filter string the flags ask for.
func (l *listFlags) query() string {
	if *l.state == "" {
		return *l.filter
	}
	return strings.TrimSpace(*l.filter + " state=" + *l.state)
}

func (m batchCmds) runBatchList(ctx context.Context, args []string) error {
	fs := m.newFlags("batch list", "[flags]")
	lf := addListFlags(fs, "batch", "'state=running' or 'attr:sample=NA12878 user=alice'",
		"running, complete, cancelled, success or failure", "list batches older than this ID (the next page)")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	q := lf.query()
	c := m.Client()
	batches, next, err := api.Pages(*lf.all, *lf.last, func(last int64) ([]api.Batch, int64, error) {
		page, err := c.ListBatches(ctx, q, last)
		if err != nil {
			return nil, 0, err
		}
		return page.Batches, page.LastID, nil
	})
	if err != nil {
		return err
	}
	if *lf.json {
		return m.printJSON(api.BatchList{Batches: batches, LastID: next})
	}
	if len(batches) == 0 {
		fmt.Fprintln(m.Stdout, "No batches.")
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tNAME\tPROJECT\tUSER\tJOBS\tSUCCEEDED\tFAILED\tCANCELLED\tCOST\tCREATED")
	for _, b := range batches {
		st := b.State
		if b.Cancelled {
			st += " (cancelled)"
		}
		safef(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", b.ID, st, b.Name, b.BillingProject, b.User,
			b.NJobs, b.NSucceeded, b.NFailed+b.NError, b.NCancelled, dollars(b.Cost), ago(b.TimeCreated))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != 0 && !*lf.all {
		safef(m.Stdout, "More: drover batch list -last-id %d\n", next)
	}
	return nil
}

func (m batchCmds) runBatchStatus(ctx context.Context, args []string) error {
	fs := m.newFlags("batch status", "BATCH [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	id, err := batchArg(fs, args)
	if err != nil {
		return err
	}
	c := m.Client()
	b, err := c.GetBatch(ctx, id)
	if err != nil {
		return err
	}
	// A batch kept in the history store has no groups to list.
	groups, gerr := c.JobGroups(ctx, id)
	if gerr != nil && !api.IsStatus(gerr, http.StatusNotFound) {
		return gerr
	}
	if *asJSON {
		return m.printJSON(struct {
			*api.Batch
			JobGroups []api.JobGroup `json:"job_groups,omitempty"`
		}{b, groups})
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	safef(tw, "ID\t%d\n", b.ID)
	safef(tw, "Name\t%s\n", b.Name)
	st := b.State
	if b.Cancelled {
		st += " (cancelled)"
	}
	safef(tw, "State\t%s\n", st)
	safef(tw, "User\t%s\n", b.User)
	safef(tw, "Billing project\t%s\n", b.BillingProject)
	safef(tw, "Cost\t%s\n", dollars(b.Cost))
	for _, k := range slices.Sorted(maps.Keys(b.Attributes)) {
		safef(tw, "Attribute %s\t%s\n", k, b.Attributes[k])
	}
	safef(tw, "Created\t%s (%s)\n", b.TimeCreated.Local().Format(time.RFC3339), ago(b.TimeCreated))
	if b.TimeCompleted != nil {
		safef(tw, "Completed\t%s (took %s)\n", b.TimeCompleted.Local().Format(time.RFC3339), b.TimeCompleted.Sub(b.TimeCreated).Round(time.Millisecond))
	}
	safef(tw, "Jobs\t%d: %d pending, %d ready, %d running, %d succeeded, %d failed, %d error, %d cancelled\n",
		b.NJobs, b.NPending, b.NReady, b.NRunning, b.NSucceeded, b.NFailed, b.NError, b.NCancelled)
	for _, wc := range b.WaitingSummary {
		safef(tw, "Waiting\t%d jobs: %s [%s]\n", wc.Jobs, wc.Message, wc.Reason)
	}
	for _, wt := range b.Waiting {
		jobs := fmt.Sprintf("job %d", wt.FirstJob)
		if wt.Count > 1 {
			jobs = fmt.Sprintf("jobs %d-%d", wt.FirstJob, wt.FirstJob+wt.Count-1)
		}
		safef(tw, "  %s\t%s\n", jobs, wt.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(groups) > 0 {
		safef(m.Stdout, "\nJob groups:\n")
		writeGroupTree(m.Stdout, groups)
	}
	return nil
}

// writeGroupTree prints a batch's job groups as a tree (each under its
// parent, indented), with their counts, state and cost.
func writeGroupTree(w io.Writer, groups []api.JobGroup) {
	kids := map[int64][]int{}
	for i, g := range groups {
		kids[g.ParentID] = append(kids[g.ParentID], i)
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	safef(tw, "GROUP\tSTATE\tJOBS\tDONE\tRUNNING\tFAILED\tCANCELLED\tCOST\n")
	var walk func(parent int64, depth int)
	walk = func(parent int64, depth int) {
		for _, i := range kids[parent] {
			g := groups[i]
			st := g.State
			if g.Cancelled {
				st += " (cancelled)"
			}
			name := g.Path[strings.LastIndexByte(g.Path, '/')+1:]
			if g.Gang {
				name += " (gang)"
			}
			safef(tw, "%s%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", strings.Repeat("  ", depth), name, st, g.NJobs, g.NCompleted,
				g.NRunning, g.NFailed+g.NError, g.NCancelled, dollars(g.Cost))
			walk(g.ID, depth+1)
		}
	}
	walk(0, 0)
	_ = tw.Flush()
}

func (m batchCmds) runBatchCancel(ctx context.Context, args []string) error {
	fs := m.newFlags("batch cancel", "BATCH [-group PATH]")
	asJSON := fs.Bool("json", false, "print the batch (or the job group) as JSON")
	group := fs.String("group", "", "cancel only this job group (its path, as align/chr1, or its ID) and the groups below it")
	id, err := batchArg(fs, args)
	if err != nil {
		return err
	}
	c := m.Client()
	if *group != "" {
		res, err := c.CancelJobGroup(ctx, id, *group)
		if err != nil {
			return err
		}
		g, err := c.JobGroup(ctx, id, *group)
		if err != nil {
			return err
		}
		if *asJSON {
			return m.printJSON(g)
		}
		if res.AlreadyCancelled {
			safef(m.Stdout, "Job group %s of batch %d was already cancelled (%s)\n", g.Path, id, g.CancelReason)
			return nil
		}
		safef(m.Stdout, "Cancelled job group %s of batch %d (%d groups): %d jobs cancelled, %d running jobs being stopped\n", g.Path, id, res.Groups, res.Cancelled, res.Running)
		return nil
	}
	if err := c.CancelBatch(ctx, id); err != nil {
		return err
	}
	b, err := c.GetBatch(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(b)
	}
	safef(m.Stdout, "Cancelled batch %d: %d jobs cancelled, %d running jobs being stopped\n", id, b.NCancelled, b.NRunning)
	return nil
}

func (m batchCmds) runBatchRetry(ctx context.Context, args []string) error {
	fs := m.newFlags("batch retry", "BATCH [-state failed,error,cancelled] [-job N|N-M ...]")
	states := fs.String("state", "failed,error", "the final states to run again, comma-separated (failed, error, cancelled)")
	var req api.RetryRequest
	fs.Func("job", "a job ID or a range N-M to retry (repeatable; default: every job in those states)", func(v string) error {
		for part := range strings.SplitSeq(v, ",") {
			lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
			a, err := strconv.ParseInt(lo, 10, 64)
			if err != nil {
				return fmt.Errorf("job %q: not a job ID", part)
			}
			if !isRange {
				req.JobIDs = append(req.JobIDs, a)
				continue
			}
			b, err := strconv.ParseInt(hi, 10, 64)
			if err != nil {
				return fmt.Errorf("job %q: not a range N-M", part)
			}
			req.JobRanges = append(req.JobRanges, api.IDRange{a, b})
		}
		return nil
	})
	asJSON := fs.Bool("json", false, "print JSON")
	id, err := batchArg(fs, args)
	if err != nil {
		return err
	}
	for s := range strings.SplitSeq(*states, ",") {
		if s = strings.TrimSpace(s); s != "" {
			req.States = append(req.States, s)
		}
	}
	res, err := m.Client().RetryBatch(ctx, id, &req)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(res)
	}
	if res.Retried == 0 {
		safef(m.Stdout, "Batch %d: no job in %s to run again\n", id, strings.Join(req.StatesOrDefault(), ", "))
		return nil
	}
	safef(m.Stdout, "Batch %d: %d jobs run again (new attempts; the old ones are kept)\n", id, res.Retried)
	return nil
}

const efficiencyHeader = "GROUP\tATTEMPTS\tASKED\tCPU-EFF\tMEM-EFF\tWASTED-CORE-H\tCOST\tSUGGESTED\tWOULD-COST"

// efficiencyRow writes one row of an efficiency table under
// efficiencyHeader: with what a group asked for and is suggested when
// sized (a group of jobs of one size; not a sum of groups).
func efficiencyRow(tw io.Writer, name string, g api.EfficiencyGroup, sized bool) {
	asked, suggested := "-", "-"
	if sized {
		asked = fmt.Sprintf("%g cpu, %s", g.CPU, units.FormatBytes(g.Memory))
		suggested = fmt.Sprintf("%g cpu, %s", g.SuggestedCPU, units.FormatBytes(g.SuggestedMemory))
	}
	safef(tw, "%s\t%d\t%s\t%.0f%%\t%.0f%%\t%.2f\t%s\t%s\t%s\n", name, g.Attempts, asked, g.CPUEfficiency*100, g.MemoryEfficiency*100,
		g.WastedCoreHours, g.Cost.Display(), suggested, g.SuggestedCost.Display())
}

func (m batchCmds) runBatchEfficiency(ctx context.Context, args []string) error {
	fs := m.newFlags("batch efficiency", "BATCH [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	id, err := batchArg(fs, args)
	if err != nil {
		return err
	}
	e, err := m.Client().BatchEfficiency(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(e)
	}
	if e.Total.Attempts == 0 {
		safef(m.Stdout, "Batch %d: no ended attempt reported its usage yet\n", id)
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, efficiencyHeader)
	for _, g := range e.Groups {
		name := g.Name
		if g.JobGroup != "" {
			name = g.JobGroup + ": " + g.Name
		}
		efficiencyRow(tw, name, g, true)
	}
	for _, g := range e.JobGroups {
		efficiencyRow(tw, "group "+g.Name, g, false) // a job group's sum
	}
	efficiencyRow(tw, e.Total.Name, e.Total, false)
	if err := tw.Flush(); err != nil {
		return err
	}
	if e.Partial {
		safef(m.Stdout, "From the batch's first %d jobs (a report reads at most %d).\n", e.Jobs, api.MaxEfficiencyJobs)
	}
	if e.Total.Savings > 0 {
		safef(m.Stdout, "Asking for the suggested sizes would have saved %s (from each group's 95th percentile of use, with 20%% to spare).\n", e.Total.Savings.Display())
	}
	return nil
}

func (m batchCmds) runBatchWait(ctx context.Context, args []string) error {
	fs := m.newFlags("batch wait", "BATCH")
	asJSON := fs.Bool("json", false, "print the batch as JSON when it completes")
	timeout := fs.Duration("timeout", 0, "give up after this long (0: wait forever)")
	id, err := batchArg(fs, args)
	if err != nil {
		return err
	}
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	return m.waitAndReport(ctx, m.Client(), id, *asJSON, false)
}
