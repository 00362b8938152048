package why

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/view"
)

// JobInput is what job why decides from: where the state says the job is
// (view.Place, in one consistent read) and what the leader remembers of
// its last rounds.
type JobInput struct {
	Place view.JobPlace
	Batch uint64
	Job   uint32
	Now   time.Time
	// Round is why the last scheduling round left the job unplaced (nil:
	// it recorded nothing of it, or the read is a follower's); Queue what
	// the last preemption round found of its leaf queue.
	Round *api.Waiting
	Queue []api.Waiting
	// Clusters name the disabled clusters' records; Machines the
	// autoscaler's machines (a job waiting for its own).
	Clusters []state.ClusterInfo
	Machines []state.MachineInfo
	// Autoscaling: an autoscaler runs; LastRound is its last decision and
	// Marks the configs the cloud could not fill.
	Autoscaling bool
	LastRound   *api.AutoscaleRound
	Marks       map[string]state.CapacityMark
}

// Job says why a job is where it is: the parents it waits for, the reason
// the leader's last scheduling round recorded for a Ready job (or, when
// it recorded none, the rule that holds it, in the round's words), the
// autoscaler's part, or where it runs; then its constraint, its project's
// spend and its queues' use.
func Job(in JobInput) api.JobWhy {
	jp, now := &in.Place, in.Now.UnixNano()
	disabled := func(names []string) string {
		return DisabledClusters(names, func(name string) (string, string, int64, bool) {
			for _, c := range in.Clusters {
				if c.Name == name {
					return c.Reason, c.By, c.Since, true
				}
			}
			return "", "", 0, false
		})
	}
	out := api.JobWhy{BatchID: int64(in.Batch), JobID: int64(in.Job), State: jp.State.String()}
	add := func(reason, msg string) {
		out.Reasons = append(out.Reasons, api.WhyReason{Reason: reason, Message: msg})
	}
	switch jp.State {
	case state.Pending:
		for i, p := range jp.Parents {
			if i == 8 {
				add("parents", fmt.Sprintf("and %d more parent ranges not finished", len(jp.Parents)-i))
				break
			}
			if p.Range.Lo == p.Range.Hi {
				add("parents", fmt.Sprintf("parent %d not finished", p.Range.Lo))
			} else {
				add("parents", fmt.Sprintf("parents %d-%d not finished (%d of %d)", p.Range.Lo, p.Range.Hi, p.Unfinished, p.Range.Len()))
			}
		}
		if len(jp.Parents) == 0 {
			add("parents", "its parents are finishing")
		}
	case state.Ready:
		// The first queue on the way up whose quota refuses one more
		// job, as the round checks them.
		quota, quotaWhy, quotaOf := jp.QuotaRefusal()
		switch wt := in.Round; {
		case jp.Gang > 0 && jp.GangRunning > 0:
			verb := "run"
			if jp.GangRunning == 1 {
				verb = "runs"
			}
			add("gang_incomplete", fmt.Sprintf("waiting for its gang: %d of its %d members still %s (an attempt of a member ended, so the others are being stopped; the gang starts again together once they have)",
				jp.GangRunning, jp.Gang, verb))
		case wt != nil:
			add(wt.Reason, wt.Message)
		case jp.Budget.Reached(now):
			// The round passes on one run of a project at its spend
			// limit: the others are told from the project's spend.
			add("spend_limit", billing.LimitReason(jp.BillingProject, jp.Budget.Limit, jp.Budget.Cost(now)))
		case quotaWhy != 0:
			// The round passes on one run of those a queue's quota blocks:
			// the others are told from the queue's use, by the rule and
			// in the words the round uses.
			add(quotaWhy.String(), quota.Explain(quotaOf, quotaWhy, jp.GPUType))
		case jp.Usable == 0 && len(jp.DisabledClusters) > 0:
			add("cluster_disabled", disabled(jp.DisabledClusters)+"; no other cluster it may use has workers")
		case jp.Active == 0:
			add("no_workers", "no worker is active (an autoscaler launches them for waiting jobs)")
		case jp.Usable == 0 && jp.SpotOnly > 0:
			add("spot_excluded", fmt.Sprintf("no on-demand worker it may use: %s are spot machines, which it is kept off; it waits for an on-demand one (an autoscaler launches one)", plural(jp.SpotOnly, "active worker")))
		case jp.Usable == 0:
			add("region_not_allowed", "no active worker in a cluster it may use")
		case jp.Busy && jp.Ahead > 0:
			// A round with no free cores records nothing: say it from the
			// state, in the scheduler's terms.
			add("fair_share", fmt.Sprintf("waiting for fair share behind %s: every worker it may use is busy", plural(jp.Ahead, "user")))
		case jp.Busy:
			add("cpu_exhausted", "waiting for cores: every worker it may use is busy")
		default:
			add("queued", "waiting for its turn: the last scheduling round gave the free cores to other users' jobs (fair share) or to earlier jobs of its user (oldest batch first)")
		}
		if jp.Gang > 0 {
			add("gang", fmt.Sprintf("a member of a gang of %d: its members that have not succeeded start together, %s, or none does", jp.Gang, gangWhere(jp.GangUniform)))
		}
		if jp.PastCoreHours > 0 {
			add("past_use", fmt.Sprintf("its user's past use in this queue tree, %.1f core-hours after decay, weighs as %s running cores in fair share", jp.PastCoreHours, trimCores(jp.PastMilli)))
		}
		if jp.OffSpot {
			add("on_demand_only", fmt.Sprintf("on on-demand machines only: the cloud reclaimed spot machines under %d of its attempts (max_spot_attempts)", jp.MaxSpot))
		}
		if jp.OOMFrom > 0 {
			add("oom_retry", fmt.Sprintf("retrying with %s after running out of memory with %s", units.FormatBytes(jp.Memory), units.FormatBytes(jp.OOMFrom)))
		}
		out.Position = jp.Position
		if jp.Position > 1 {
			add("position", fmt.Sprintf("number %d in its user's line%s: %d Ready jobs of higher priority, %d of older batches, %d of its own batch queued before it", jp.Position, inQueue(jp.Queues), jp.AheadByPriority, jp.AheadOlder, jp.AheadInBatch))
		}
		if e := jp.Estimate; e.Known && jp.GangRunning == 0 {
			at := in.Now.Add(e.In).UTC()
			out.EstimatedStart = &at
			switch {
			case e.Now:
				add("estimate", "estimated start: at the next scheduling round (a worker it may use has room)")
			default:
				basis := fmt.Sprintf("the mean run time of %s of its job group", plural(e.Runs, "finished job"))
				if e.Runs == 0 {
					basis = "the mean run time of its line's running job groups (none of its own group has finished)"
				}
				add("estimate", fmt.Sprintf("estimated start in about %s, at %s (an estimate: its user's %s in its queue free up by %s, %s, and its user keeps that share)",
					roundWait(e.In), at.Format("2006-01-02 15:04 MST"), plural(e.Slots, "running attempt"), basis, roundWait(e.Run)))
			}
		}
		if jp.AheadByPriority > 0 && len(jp.Queues) > 0 {
			add("priority", fmt.Sprintf("behind %d Ready jobs of its user's batches of higher priority in queue %s", jp.AheadByPriority, jp.Queues[0].Path))
		}
		for _, w := range in.Queue {
			add(w.Reason, w.Message)
		}
		if len(jp.DisabledClusters) > 0 && jp.Usable > 0 {
			add("cluster_disabled", "not used while disabled: "+disabled(jp.DisabledClusters))
		}
		for _, r := range autoscalerReasons(&in) {
			add(r[0], r[1])
		}
	case state.Creating:
		msg := "waiting for a machine of its own"
		for _, m := range in.Machines {
			if m.ForBatch == in.Batch && m.ForJob == in.Job && m.State >= state.MachineRequested && m.State <= state.MachineLaunching {
				msg = fmt.Sprintf("waiting for its own machine: %s (%s, %s), %s for %s", m.ID, m.Config, jp.MachineType,
					state.MachineStateName(m.State), in.Now.Sub(time.Unix(0, m.Created)).Round(time.Second))
			}
		}
		add("creating", msg)
	case state.Running:
		add("running", fmt.Sprintf("running on %s in cluster %s (region %s)", jp.Instance, jp.Cluster, jp.Region))
	default:
		msg := "finished: " + jp.State.String()
		if jp.BatchCancelled {
			msg += " (batch cancelled)"
		}
		add("finished", msg)
	}
	if len(jp.Regions) > 0 || len(jp.Clusters) > 0 || jp.Pool != "" || len(jp.Labels) > 0 || len(jp.HomeClusters) > 0 {
		var parts []string
		if len(jp.Regions) > 0 {
			parts = append(parts, "regions "+strings.Join(jp.Regions, ", "))
		}
		if len(jp.Clusters) > 0 {
			parts = append(parts, "clusters "+strings.Join(jp.Clusters, ", "))
		}
		if jp.Pool != "" {
			parts = append(parts, "pool "+jp.Pool)
		}
		if len(jp.Labels) > 0 {
			parts = append(parts, "workers labelled "+strings.Join(jp.Labels, ", "))
		}
		if len(jp.HomeClusters) > 0 {
			parts = append(parts, "clusters "+strings.Join(jp.HomeClusters, ", ")+" (where its queue is routed)")
		}
		add("constraint", "may run only in "+strings.Join(parts, " and "))
	}
	if jp.Budget.Limit > 0 {
		add("spend", fmt.Sprintf("billing project %s has spent %s of its %s spend limit", jp.BillingProject, jp.Budget.Cost(now).Display(), jp.Budget.Limit.Display()))
	}
	for i := range jp.Queues {
		q := &jp.Queues[i]
		c := q.Quota()
		msg := fmt.Sprintf("queue %s runs %d jobs holding %g cores and %s memory", q.Path, q.UsedJobs, float64(q.UsedMilli)/1000, units.FormatBytes(q.UsedMemory))
		if g := q.Guarantee; g.CPUMilli > 0 || g.Memory > 0 {
			msg += fmt.Sprintf("; guaranteed %g cores, %s memory", float64(g.CPUMilli)/1000, quotaMem(g.Memory))
		}
		if c.CPUMilli > 0 || c.Memory > 0 {
			msg += fmt.Sprintf("; may hold %s cores, %s memory", quotaCores(c.CPUMilli), quotaMem(c.Memory))
		}
		if c.MaxJobs > 0 || c.MaxMilli > 0 {
			msg += fmt.Sprintf("; max_running %s jobs, %s cores", quotaCount(c.MaxJobs), quotaCores(c.MaxMilli))
		}
		add("queue", msg)
	}
	return out
}

// autoscalerReasons says what the autoscaler does about waiting work: the
// machines coming up, what its last decision launched, and what it held
// and why (a cap, capacity).
func autoscalerReasons(in *JobInput) [][2]string {
	if !in.Autoscaling {
		return nil
	}
	var out [][2]string
	coming := 0
	for _, m := range in.Machines {
		if m.State == state.MachineRequested || m.State == state.MachineLaunching {
			coming++
		}
	}
	r := in.LastRound
	if r == nil {
		if coming > 0 {
			out = append(out, [2]string{"autoscaler_launching", plural(coming, "machine") + " coming up (drover autoscaler status)"})
		}
		return out
	}
	marks, now := in.Marks, in.Now.UnixNano()
	// marked says, for a config the cloud could not fill, which of the
	// two marks holds it and until when, in the words of job why.
	marked := func(config, what string) (code, msg string, ok bool) {
		m, ok := marks[config]
		if !ok || m.Until <= now {
			return "", "", false
		}
		until := time.Unix(0, m.Until).UTC().Format(time.RFC3339)
		if m.Misconfigured {
			return "autoscaler_misconfigured", fmt.Sprintf("autoscaler could not launch %s: the provider can never fill launch config %s as it is (tried again at %s): %s", what, config, until, m.Reason), true
		}
		return "autoscaler_capacity_limited", fmt.Sprintf("autoscaler could not launch %s: launch config %s is capacity-limited until %s: %s", what, config, until, m.Reason), true
	}
	for _, l := range r.Launches {
		// The launch may have failed since: the cloud could not fill
		// the config, which is then marked.
		if code, msg, ok := marked(l.Config, l.Reason); ok {
			out = append(out, [2]string{code, msg})
			continue
		}
		out = append(out, [2]string{"autoscaler_launching", "autoscaler launching " + l.Reason})
	}
	if coming > 0 && len(out) == 0 {
		out = append(out, [2]string{"autoscaler_launching", plural(coming, "machine") + " coming up (drover autoscaler status)"})
	}
	for _, h := range r.Held {
		// Rounds after the failed launch hold the jobs for the mark.
		if h.Config != "" {
			if code, msg, ok := marked(h.Config, "machines for "+plural(int(h.Jobs), "waiting job")); ok {
				out = append(out, [2]string{code, msg})
				continue
			}
		}
		out = append(out, [2]string{"autoscaler_held", fmt.Sprintf("autoscaler holds %s: %s", plural(int(h.Jobs), "waiting job"), h.Reason)})
	}
	return out
}

func quotaMem(b int64) string {
	if b == 0 {
		return "unlimited"
	}
	return units.FormatBytes(b)
}

func quotaCores(milli int64) string {
	if milli == 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%g", float64(milli)/1000)
}

func quotaCount(n int64) string {
	if n == 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

// roundWait writes a wait to the minute (to the second under one).
func roundWait(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// trimCores writes millicores as cores, without trailing zeros.
func trimCores(milli int64) string {
	return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64)
}

// inQueue names the leaf queue (the first of queues), as " in queue P".
func inQueue(queues []state.QueueInfo) string {
	if len(queues) == 0 {
		return ""
	}
	return " in queue " + queues[0].Path
}

// gangWhere says where a gang's members start together.
func gangWhere(uniform string) string {
	switch {
	case uniform == "pool":
		return "on workers of one pool of one cluster"
	case strings.HasPrefix(uniform, "label:"):
		return fmt.Sprintf("on workers of one cluster with one value of label %s", strings.TrimPrefix(uniform, "label:"))
	}
	return "on workers of one cluster"
}
