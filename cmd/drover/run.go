package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/jobspec"
	"github.com/drover-sched/drover/jobspec/nomadspec"
	"github.com/drover-sched/drover/server/nomadview"
)

func parseVars(vars multiFlag) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range vars {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, usagef("-var %q: write it as NAME=VALUE", v)
		}
		out[k] = val
	}
	return out, nil
}

func (m batchCmds) parseSpec(path string, vars multiFlag) (*jobspec.Batch, error) {
	vm, err := parseVars(vars)
	if err != nil {
		return nil, err
	}
	spec, diags := jobspec.ParseFile(path, vm)
	if diags.HasErrors() {
		fmt.Fprint(m.Stderr, jobspec.FormatDiagnostics(diags))
		n := len(diags.Errs())
		return nil, fmt.Errorf("%s has %d problem%s", path, n, plural(n))
	}
	if len(diags) > 0 {
		fmt.Fprint(m.Stderr, jobspec.FormatDiagnostics(diags))
	}
	return spec, nil
}

// nomadFile is a Nomad job file read and translated.
type nomadFile struct {
	src  []byte
	vars map[string]string
	job  *nomad.Job
	tr   *nomadspec.Translation
}

// nomadJob reads a Nomad job file (nil, nil when path is a drover
// jobspec) and translates it, printing its diagnostics, warnings and
// refusals.
func (m batchCmds) nomadJob(path string, vars multiFlag) (*nomadFile, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !nomadspec.IsNomadJob(path, src) {
		return nil, nil
	}
	vm, err := parseVars(vars)
	if err != nil {
		return nil, err
	}
	job, blocks, diags := nomadspec.Parse(path, src, vm)
	if len(diags) > 0 {
		fmt.Fprint(m.Stderr, jobspec.FormatDiagnostics(diags))
	}
	if diags.HasErrors() {
		n := len(diags.Errs())
		return nil, fmt.Errorf("%s has %d problem%s", path, n, plural(n))
	}
	tr, err := nomadspec.Translate(job, blocks)
	if errs, ok := err.(nomadspec.Errors); ok {
		for _, e := range errs {
			safef(m.Stderr, "%s\n", e)
		}
		return nil, fmt.Errorf("%s: Nomad job %q has %d part%s drover cannot run (docs/nomad.md)", path, *job.ID, len(errs), plural(len(errs)))
	}
	if err != nil {
		return nil, err
	}
	for _, w := range tr.Warnings {
		safef(m.Stderr, "%s: warning: %s\n", path, w)
	}
	return &nomadFile{src: src, vars: vm, job: job, tr: tr}, nil
}

// registerNomad registers a Nomad job through the servers' Nomad API
// (PUT /v1/jobs, as `nomad job run` does), so that Nomad's tools see it
// as drover's do, and reports it; with wait, it waits for its batch.
func (m batchCmds) registerNomad(ctx context.Context, path string, f *nomadFile, wait, asJSON, quiet bool) error {
	req := nomad.JobRegisterRequest{Job: f.job, Submission: &nomad.JobSubmission{Source: string(f.src), Format: "hcl2", VariableFlags: f.vars}}
	var resp nomad.JobRegisterResponse
	c := m.Client()
	ns := deref(f.job.Namespace)
	q := ""
	if ns != "" {
		q = "?namespace=" + url.QueryEscape(ns)
	}
	if err := c.Do(ctx, http.MethodPut, "/v1/jobs"+q, &req, &resp); err != nil {
		return err
	}
	id := *f.job.ID
	if resp.Warnings != "" {
		safef(m.Stderr, "%s: warning: %s\n", path, resp.Warnings)
	}
	batch, _, ok := nomadview.ParseEvalID(resp.EvalID)
	switch {
	case f.tr.Periodic != nil || f.tr.Parameterized != nil:
		if !quiet {
			safef(m.Stdout, "Registered Nomad job %q: the servers launch its children, each a batch (GET /v1/jobs?prefix=%s/ lists them)\n", id, id)
		}
		return nil
	case !ok:
		if !quiet {
			safef(m.Stdout, "Registered Nomad job %q: unchanged\n", id)
		}
		return nil
	}
	b, err := c.GetBatch(ctx, int64(batch))
	if err != nil {
		return err
	}
	switch {
	case quiet:
		safeln(m.Stdout, b.ID)
	case !asJSON:
		safef(m.Stdout, "Registered Nomad job %q as batch %d (%d jobs, billing project %s; evaluation %s)\n", id, b.ID, b.NJobs, b.BillingProject, resp.EvalID)
	}
	if !wait {
		if asJSON {
			return m.printJSON(b)
		}
		return nil
	}
	return m.waitAndReport(ctx, c, b.ID, asJSON, quiet)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func (m batchCmds) runValidate(ctx context.Context, args []string) error {
	fs := m.newFlags("validate", "[-var NAME=VALUE]... FILE")
	var vars multiFlag
	fs.Var(&vars, "var", "set a jobspec variable (repeatable)")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	nf, err := m.nomadJob(pos[0], vars)
	if err != nil {
		return err
	}
	if nf != nil {
		tr := nf.tr
		if tr.Periodic != nil || tr.Parameterized != nil {
			safef(m.Stdout, "%s: Nomad job %q is valid: a %s job, whose children the servers launch\n", pos[0], tr.Batch.Name, map[bool]string{true: "periodic", false: "parameterized"}[tr.Periodic != nil])
			return nil
		}
		n := len(tr.Batch.Jobs)
		safef(m.Stdout, "%s: Nomad job %q is valid: %d jobs in %d entr%s\n", pos[0], tr.Batch.Name, api.Jobs(tr.Batch.Jobs).NumJobs(), n, map[bool]string{true: "y", false: "ies"}[n == 1])
		return nil
	}
	spec, err := m.parseSpec(pos[0], vars)
	if err != nil {
		return err
	}
	safef(m.Stdout, "%s: batch %q is valid: %d jobs in %d job blocks\n", pos[0], spec.Name, spec.NumJobs(), len(spec.Jobs))
	return nil
}

func (m batchCmds) runRun(ctx context.Context, args []string) error {
	fs := m.newFlags("run", "[flags] FILE")
	var vars multiFlag
	fs.Var(&vars, "var", "set a jobspec variable, NAME=VALUE (repeatable)")
	wait := fs.Bool("wait", false, "wait until the batch completes; exit 0 if every job succeeded, 2 otherwise")
	asJSON := fs.Bool("json", false, "print the batch as JSON")
	project := fs.String("billing-project", "", "billing project (overrides the jobspec's)")
	queue := fs.String("queue", "", "leaf queue to run in, e.g. genomics/gwas/tier1 (overrides the jobspec's)")
	priority := fs.Int64("priority", 0, "priority within the queue, higher first (overrides the jobspec's)")
	bunch := fs.Int("bunch-size", 5000, "job entries per request when a batch is too big for one")
	quiet := fs.Bool("quiet", false, "print only the batch ID")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *bunch <= 0 {
		return usagef("-bunch-size must be positive")
	}
	nf, err := m.nomadJob(pos[0], vars)
	if err != nil {
		return err
	}
	if nf != nil {
		var refused []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "priority" || f.Name == "queue" || f.Name == "billing-project" || f.Name == "bunch-size" {
				refused = append(refused, "-"+f.Name)
			}
		})
		if len(refused) > 0 {
			return usagef("%s with a Nomad job: the job says it (priority, namespace: its billing project)", strings.Join(refused, ", "))
		}
		return m.registerNomad(ctx, pos[0], nf, *wait, *asJSON, *quiet)
	}
	spec, err := m.parseSpec(pos[0], vars)
	if err != nil {
		return err
	}
	req := &api.CreateBatchRequest{
		Name:           spec.Name,
		BillingProject: spec.BillingProject,
		Attributes:     spec.Attributes,

		CancelAfterNFailures: spec.CancelAfterNFailures,
		Queue:                spec.Queue,
		Priority:             spec.Priority,
		SLOSeconds:           spec.SLO.Seconds(),
		Callback:             spec.Callback,
		JobGroups:            spec.Groups,
	}
	if *project != "" {
		req.BillingProject = *project
	}
	if *queue != "" {
		req.Queue = *queue
	}
	if !spec.Deadline.IsZero() {
		req.Deadline = &spec.Deadline
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "priority" {
			req.Priority = *priority
		}
	})
	return m.submit(ctx, req, spec.JobSpecs(), *bunch, *wait, *asJSON, *quiet)
}

// submit creates a batch of jobs and reports it, waiting for it if asked.
func (m batchCmds) submit(ctx context.Context, req *api.CreateBatchRequest, jobs []api.JobSpec, bunch int, wait, asJSON, quiet bool) error {
	c := m.Client()
	b, err := c.Submit(ctx, req, api.Jobs(jobs), &api.SubmitOptions{BunchSize: bunch})
	if err != nil {
		return err
	}
	switch {
	case quiet:
		safeln(m.Stdout, b.ID)
	case !asJSON:
		safef(m.Stdout, "Submitted batch %d (%q, %d jobs, billing project %s)\n", b.ID, req.Name, b.NJobs, b.BillingProject)
	}
	if !wait {
		if asJSON {
			return m.printJSON(b)
		}
		return nil
	}
	return m.waitAndReport(ctx, c, b.ID, asJSON, quiet)
}

// waitAndReport waits for a batch, printing progress, then summarises it.
// It returns exit code 2 unless every job succeeded.
func (m batchCmds) waitAndReport(ctx context.Context, c *api.Client, id int64, asJSON, quiet bool) error {
	last := ""
	lastPrint := time.Now()
	b, err := c.WaitBatch(ctx, id, func(b *api.Batch) {
		if asJSON || quiet {
			return
		}
		line := progressLine(b)
		if line != last && time.Since(lastPrint) > 2*time.Second {
			safeln(m.Stderr, line)
			last, lastPrint = line, time.Now()
		}
	})
	if err != nil {
		return fmt.Errorf("wait for batch %d: %w", id, err)
	}
	switch {
	case asJSON:
		if err := m.printJSON(b); err != nil {
			return err
		}
	case !quiet:
		safeln(m.Stdout, summaryLine(b))
		if b.NSucceeded != b.NJobs {
			m.printBadJobs(ctx, c, b)
		}
	}
	if b.NSucceeded != b.NJobs {
		return &exitError{code: 2}
	}
	return nil
}

func progressLine(b *api.Batch) string {
	return fmt.Sprintf("batch %d: %d/%d done (%d running, %d ready, %d pending)", b.ID, b.NCompleted, b.NJobs, b.NRunning, b.NReady, b.NPending)
}

func summaryLine(b *api.Batch) string {
	took := ""
	if b.TimeCompleted != nil {
		took = " in " + b.TimeCompleted.Sub(b.TimeCreated).Round(10*time.Millisecond).String()
	}
	verdict := "succeeded"
	if b.NSucceeded != b.NJobs {
		verdict = "did not fully succeed"
	}
	if b.Cancelled {
		verdict = "was cancelled"
		if b.CancelReason != "" {
			verdict += " (" + b.CancelReason + ")"
		}
	}
	return fmt.Sprintf("Batch %d %s%s: %d jobs, %d succeeded, %d failed, %d error, %d cancelled",
		b.ID, verdict, took, b.NJobs, b.NSucceeded, b.NFailed, b.NError, b.NCancelled)
}

// printBadJobs lists a few jobs that failed or errored, with how to see more.
func (m batchCmds) printBadJobs(ctx context.Context, c *api.Client, b *api.Batch) {
	page, err := c.ListJobs(ctx, b.ID, "state=bad", 0)
	if err != nil {
		return
	}
	shown := 0
	for _, j := range page.Jobs {
		if j.State == api.JobCancelled {
			continue
		}
		if shown == 10 {
			fmt.Fprintln(m.Stdout, "  ...")
			break
		}
		msg := j.Message
		if j.ExitCode != nil && msg == "" {
			msg = fmt.Sprintf("exit code %d", *j.ExitCode)
		}
		safef(m.Stdout, "  job %d %s %s: %s (drover job logs %d %d)\n", j.JobID, j.Name, j.State, msg, b.ID, j.JobID)
		shown++
	}
	if b.NCancelled > 0 && !b.Cancelled {
		safef(m.Stdout, "  %d job(s) cancelled because a parent did not succeed (drover job list %d -state cancelled)\n", b.NCancelled, b.ID)
	}
}
