package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/money"
)

func attemptDuration(a api.Attempt) string {
	if a.StartTime == nil {
		return "-"
	}
	end := time.Now()
	if a.EndTime != nil {
		end = *a.EndTime
	}
	return units.RoundDuration(end.Sub(*a.StartTime)).String()
}

func exitString(code *int) string {
	if code == nil {
		return "-"
	}
	return fmt.Sprint(*code)
}

// usageColumns are an attempt's CPU seconds and peak memory ("-" when
// its worker reported none).
func usageColumns(u *api.Usage) (string, string) {
	if u == nil {
		return "-", "-"
	}
	return strconv.FormatFloat(u.CPUSeconds, 'f', 2, 64), units.FormatBytes(u.PeakMemory)
}

// usageLine says what an attempt used, for job status.
func usageLine(u *api.Usage) string {
	parts := []string{fmt.Sprintf("%.2f cpu-s", u.CPUSeconds), units.FormatBytes(u.PeakMemory) + " peak"}
	if u.BytesIn > 0 || u.InputSeconds > 0 {
		parts = append(parts, fmt.Sprintf("%s in (%.2fs)", units.FormatBytes(u.BytesIn), u.InputSeconds))
	}
	if u.BytesOut > 0 || u.OutputSeconds > 0 {
		parts = append(parts, fmt.Sprintf("%s out (%.2fs)", units.FormatBytes(u.BytesOut), u.OutputSeconds))
	}
	if u.ImageSeconds > 0 {
		parts = append(parts, fmt.Sprintf("image %.2fs", u.ImageSeconds))
	}
	return strings.Join(parts, ", ")
}

func (m batchCmds) runJobList(ctx context.Context, args []string) error {
	fs := m.newFlags("job list", "BATCH [flags]")
	lf := addListFlags(fs, "job", "'state=failed' or 'name=align'",
		"pending, ready, running, success, failed, cancelled, error, done or bad", "list jobs after this ID (the next page)")
	id, err := batchArg(fs, args)
	if err != nil {
		return err
	}
	q := lf.query()
	c := m.Client()
	jobs, next, err := api.Pages(*lf.all, *lf.last, func(last int64) ([]api.Job, int64, error) {
		page, err := c.ListJobs(ctx, id, q, last)
		if err != nil {
			return nil, 0, err
		}
		return page.Jobs, page.LastID, nil
	})
	if err != nil {
		return err
	}
	if *lf.json {
		return m.printJSON(api.JobList{Jobs: jobs, LastID: next})
	}
	if len(jobs) == 0 {
		fmt.Fprintln(m.Stdout, "No jobs.")
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tNAME\tSTATE\tEXIT\tATTEMPTS\tDURATION\tCPU-S\tPEAK-MEM\tCOST\tMESSAGE")
	for _, j := range jobs {
		dur, cpu, peak := "-", "-", "-"
		if n := len(j.Attempts); n > 0 {
			dur = attemptDuration(j.Attempts[n-1])
			cpu, peak = usageColumns(j.Attempts[n-1].Usage)
		}
		safef(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", j.JobID, j.Name, j.State, exitString(j.ExitCode), len(j.Attempts), dur, cpu, peak, jobCost(j), j.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != 0 && !*lf.all {
		safef(m.Stdout, "More: drover job list %d -last-id %d\n", id, next)
	}
	return nil
}

func jobArgs(pos []string) (int64, int64, error) {
	b, err := parseID("batch ID", pos[0])
	if err != nil {
		return 0, 0, err
	}
	j, err := parseID("job ID", pos[1])
	if err != nil {
		return 0, 0, err
	}
	return b, j, nil
}

func (m batchCmds) runJobStatus(ctx context.Context, args []string) error {
	fs := m.newFlags("job status", "BATCH JOB [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	bid, jid, err := jobArgs(pos)
	if err != nil {
		return err
	}
	j, err := m.Client().GetJob(ctx, bid, jid)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(j)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	safef(tw, "Job\t%d/%d %s\n", j.BatchID, j.JobID, j.Name)
	safef(tw, "State\t%s\n", j.State)
	safef(tw, "Exit code\t%s\n", exitString(j.ExitCode))
	if j.Message != "" {
		safef(tw, "Message\t%s\n", j.Message)
	}
	if j.Waiting != nil {
		safef(tw, "Waiting\t%s\n", j.Waiting.Message)
	}
	safef(tw, "Command\t%s\n", strings.Join(j.Command, " "))
	if j.Image != "" {
		safef(tw, "Image\t%s\n", j.Image)
	}
	net := j.Network
	if net == "" {
		net = api.NetworkBridge
	}
	safef(tw, "Network\t%s\n", net)
	for _, in := range j.Inputs {
		safef(tw, "Input\t%s: %s -> %s\n", in.Name, in.Source, in.Path)
	}
	for _, out := range j.Outputs {
		safef(tw, "Output\t%s: %s -> %s\n", out.Name, out.Path, out.Destination)
	}
	safef(tw, "Resources\t%g cpu, %s memory\n", j.CPU, units.FormatBytes(j.Memory))
	if j.MaxProcesses > 0 {
		safef(tw, "Processes\tat most %d\n", j.MaxProcesses)
	}
	if j.Timeout > 0 {
		safef(tw, "Timeout\t%s\n", time.Duration(j.Timeout*float64(time.Second)))
	}
	if j.Retries > 0 {
		safef(tw, "Retries\t%d\n", j.Retries)
	}
	switch {
	case j.MaxLostAttempts < 0:
		safef(tw, "Lost attempts\tretried without limit\n")
	case j.MaxLostAttempts > 0:
		safef(tw, "Lost attempts\tend it after %d\n", j.MaxLostAttempts)
	}
	switch {
	case j.OnDemandOnly:
		safef(tw, "Spot\ton on-demand machines only: the cloud reclaimed spot machines under %d of its attempts\n", j.MaxSpotAttempts)
	case j.MaxSpotAttempts > 0:
		safef(tw, "Spot\ton on-demand machines only once the cloud reclaims spot machines under %d of its attempts\n", j.MaxSpotAttempts)
	}
	if o := j.OOMRetry; o != nil {
		safef(tw, "Out of memory\trun again with memory × %g, up to %s\n", o.Factor, units.FormatBytes(o.MaxMemory))
	}
	for _, p := range j.Parents {
		if p[0] == p[1] {
			safef(tw, "Depends on\tjob %d\n", p[0])
		} else {
			safef(tw, "Depends on\tjobs %d-%d\n", p[0], p[1])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(j.Attempts) == 0 {
		fmt.Fprintln(m.Stdout, "\nNo attempts yet.")
		return nil
	}
	fmt.Fprintln(m.Stdout, "\nAttempts:")
	tw = tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tINSTANCE\tSTATE\tEXIT\tSTARTED\tDURATION\tMEMORY\tCOST\tMESSAGE")
	for _, a := range j.Attempts {
		started := "-"
		if a.StartTime != nil {
			started = a.StartTime.Local().Format("15:04:05.000")
		}
		cost := "-"
		if a.Cost != nil {
			cost = dollars(*a.Cost)
		}
		mem := "-"
		if a.Memory > 0 {
			mem = units.FormatBytes(a.Memory)
		}
		safef(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, a.Instance, a.State, exitString(a.ExitCode), started, attemptDuration(a), mem, cost, a.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, a := range j.Attempts {
		if a.Usage != nil {
			safef(m.Stdout, "  attempt %d used: %s\n", a.Attempt, usageLine(a.Usage))
		}
	}
	return nil
}

func (m batchCmds) runJobRestart(ctx context.Context, args []string) error {
	fs := m.newFlags("job restart", "BATCH JOB [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	bid, jid, err := jobArgs(pos)
	if err != nil {
		return err
	}
	res, err := m.Client().RestartJob(ctx, bid, jid)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(res)
	}
	safef(m.Stdout, "Stopping attempt %d of job %d/%d; the job runs again (counted against no retry)\n", res.Attempt, res.BatchID, res.JobID)
	return nil
}

func (m batchCmds) runJobWhy(ctx context.Context, args []string) error {
	fs := m.newFlags("job why", "BATCH JOB [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	bid, jid, err := jobArgs(pos)
	if err != nil {
		return err
	}
	why, err := m.Client().JobWhy(ctx, bid, jid)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(why)
	}
	safef(m.Stdout, "Job %d/%d is %s:\n", why.BatchID, why.JobID, why.State)
	for i, r := range why.Reasons {
		safef(m.Stdout, "  %d. %s [%s]\n", i+1, r.Message, r.Reason)
	}
	return nil
}

// warnIncomplete tells the reader of a log that parts may be missing.
func (m batchCmds) warnIncomplete(why string) {
	if why != "" {
		safef(m.Stderr, "warning: this log may be incomplete: %s; try again when every server is up\n", why)
	}
}

func (m batchCmds) runJobLogs(ctx context.Context, args []string) error {
	fs := m.newFlags("job logs", "BATCH JOB [-attempt N] [-f]")
	attempt := fs.Int("attempt", 0, "attempt whose log to print (default: the latest)")
	follow := fs.Bool("f", false, "follow the log until the job ends")
	pos, err := parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	bid, jid, err := jobArgs(pos)
	if err != nil {
		return err
	}
	c := m.Client()
	if !*follow {
		// Streamed: a long log is never held in memory here.
		l, err := c.OpenJobLog(ctx, bid, jid, *attempt)
		if err != nil {
			return err
		}
		defer l.Close()
		if _, err := io.Copy(m.Stdout, l); err != nil {
			return err
		}
		m.warnIncomplete(l.Incomplete)
		if l.Truncated != "" {
			safef(m.Stderr, "warning: this log was cut: %s\n", l.Truncated)
		}
		return nil
	}
	var printed int
	warned := ""
	for {
		data, err := c.JobLog(ctx, bid, jid, *attempt)
		var inc *api.IncompleteLogError
		if errors.As(err, &inc) {
			if inc.Reason != warned {
				m.warnIncomplete(inc.Reason)
				warned = inc.Reason
			}
			err = nil
		}
		if err != nil {
			return err
		}
		if len(data) > printed {
			if _, err := m.Stdout.Write(data[printed:]); err != nil && err != io.ErrShortWrite {
				return err
			}
			printed = len(data)
		}
		j, err := c.GetJob(ctx, bid, jid)
		if err != nil {
			return err
		}
		if j.State != api.JobRunning && j.State != api.JobReady && j.State != api.JobPending {
			data, err := c.JobLog(ctx, bid, jid, *attempt)
			if err == nil && len(data) > printed {
				_, _ = m.Stdout.Write(data[printed:])
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// jobCost adds up the cost of a job's attempts ("-" before any started).
func jobCost(j api.Job) string {
	total, any := money.Amount(0), false
	for _, a := range j.Attempts {
		if a.Cost != nil {
			total, any = total.Add(*a.Cost), true
		}
	}
	if !any {
		return "-"
	}
	return dollars(total)
}

// dollars prints an amount as the web UI and the API's sentences do
// (money.Amount.Display): cents from a dollar up, and below it the places
// that show it non-zero ($0.000043).
func dollars(a money.Amount) string { return a.Display() }
