package httpapi

import (
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/state"
)

// maxGoneMachines bounds the deleted and failed machines a status lists
// (the newest).
const maxGoneMachines = 50

func durationString(ns int64) string {
	if ns == 0 {
		return ""
	}
	return time.Duration(ns).String()
}

// maxDecisions is how many of the autoscaler's last decisions its status
// shows, newest first.
const maxDecisions = 20

// handleAutoscalerStatus answers the autoscaler's settings, configs,
// machines and the leader's last decision.
func (s *placementHandlers) handleAutoscalerStatus(w http.ResponseWriter, r *http.Request) (any, error) {
	// One read: the machines, their configs' marks and the decisions of
	// one moment.
	var (
		a         state.Autoscaler
		cfgs      []state.LaunchConfig
		marks     map[string]state.CapacityMark
		machines  []state.MachineInfo
		decisions []state.Decision
	)
	s.state.Read(func(r state.Reader) {
		a, cfgs, marks = r.AutoscalerRecord()
		machines = r.MachineRecords()
		d := r.Decisions()
		decisions = slices.Clone(d[max(len(d)-maxDecisions, 0):])
	})
	out := api.AutoscalerStatus{Settings: api.AutoscalerSettings{Enabled: a.Enabled, Strategy: a.Strategy, MaxNodes: a.MaxNodes, MaxPerHour: a.MaxPerHour,
		MaxAddsPerMinute: a.MaxAddsPerMinute, MaxRemovesPerMinute: a.MaxRemovesPerMinute, BootTimeout: durationString(a.BootTimeout),
		IdleTimeout: durationString(a.IdleTimeout), LameTimeout: durationString(a.LameTimeout), Backoff: durationString(a.Backoff),
		MaxBackoff: durationString(a.MaxBackoff), Window: durationString(a.Window), SpotPreemptions: a.SpotPreemptions, NamePrefix: a.NamePrefix,
		Consolidate: &a.Consolidate},
		LaunchConfigs: []api.LaunchConfigStatus{}, Pools: []api.AutoscalerPool{}, Machines: []api.Machine{}}
	live := map[string]int{}
	pools := map[[2]string]*api.AutoscalerPool{}
	gone := 0
	for _, m := range machines {
		isLive := m.State >= state.MachineRequested && m.State <= state.MachineDraining
		if isLive {
			live[m.Config]++
			out.Nodes++
			out.SpendPerHour = out.SpendPerHour.Add(m.PricePerHour)
			key := [2]string{m.Cluster, m.Pool}
			p := pools[key]
			if p == nil {
				p = &api.AutoscalerPool{Cluster: m.Cluster, Pool: m.Pool, Machines: map[string]int{}}
				pools[key] = p
			}
			p.Machines[state.MachineStateName(m.State)]++
			p.SpendPerHour = p.SpendPerHour.Add(m.PricePerHour)
		} else if gone++; gone > maxGoneMachines {
			continue
		}
		out.Machines = append(out.Machines, api.Machine{ID: m.ID, Config: m.Config, Cluster: m.Cluster, Pool: m.Pool, State: state.MachineStateName(m.State),
			PricePerHour: m.PricePerHour, ProviderID: m.ProviderID, Instance: int64(m.Instance), Running: m.Running,
			Created: time.Unix(0, m.Created).UTC(), Since: time.Unix(0, m.Since).UTC(), Reason: m.Reason, BootSeconds: m.BootSeconds(), LastJobEnded: timePtrNanos(m.LastJobEnded),
			ForBatch: int64(m.ForBatch), ForJob: int64(m.ForJob)})
	}
	for _, c := range cfgs {
		cs := api.LaunchConfigStatus{LaunchConfig: api.LaunchConfig{Name: c.Name, Cluster: c.Cluster, Pool: c.Pool, MachineType: c.MachineType, Zone: c.Zone,
			Spot: c.Spot, Reserved: c.Reserved, CPU: float64(c.CPUMilli) / 1000, Memory: c.Memory, GPUType: c.GPUType, GPUs: int(c.GPUs),
			PricePerHour: c.PricePerHour, MaxNodes: c.MaxNodes, MaxPerHour: c.MaxPerHour, MaxAddsPerMinute: c.MaxAddsPerMinute, MaxRemovesPerMinute: c.MaxRemovesPerMinute,
			PriceFromCloud: c.PriceFromCloud, Capacity: c.Capacity}, Live: live[c.Name], PricedAt: timePtrNanos(c.PriceAt)}
		if mk, ok := marks[c.Name]; ok && mk.Until > time.Now().UnixNano() {
			until := time.Unix(0, mk.Until).UTC()
			cs.CapacityLimited, cs.Until, cs.Reason, cs.Misconfigured = !mk.Misconfigured, &until, mk.Reason, mk.Misconfigured
		}
		out.LaunchConfigs = append(out.LaunchConfigs, cs)
	}
	keys := make([][2]string, 0, len(pools))
	for k := range pools {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		if a[0] != b[0] {
			if a[0] < b[0] {
				return -1
			}
			return 1
		}
		if a[1] < b[1] {
			return -1
		}
		if a[1] > b[1] {
			return 1
		}
		return 0
	})
	for _, k := range keys {
		out.Pools = append(out.Pools, *pools[k])
	}
	if s.autoscaler != nil {
		out.LastRound = s.autoscaler.LastRound()
	}

	for i := len(decisions) - 1; i >= 0; i-- {
		out.Decisions = append(out.Decisions, api.AutoscalerDecision{Time: time.Unix(0, decisions[i].Time).UTC(), Text: decisions[i].Text})
	}
	s.hideOthersJobs(r, &out)
	out.SpendHistory = spendHistory(machines, time.Now(), spendHistorySpan, spendHistoryPoints)
	return out, nil
}

// The autoscaler status's spend history: the last six hours in 73
// points, five minutes apart.
const (
	spendHistorySpan   = 6 * time.Hour
	spendHistoryPoints = 73
)

// spendHistory is the fleet's price an hour at points even steps apart
// over span up to now: a machine counts from its creation until its
// deletion was decided (live ones until now; one that failed until it
// did).
func spendHistory(machines []state.MachineInfo, now time.Time, span time.Duration, points int) []api.SpendPoint {
	if points < 2 {
		return nil
	}
	step := span / time.Duration(points-1)
	start := now.Add(-span)
	out := make([]api.SpendPoint, points)
	for i := range out {
		out[i].Time = start.Add(time.Duration(i) * step).UTC()
	}
	for _, m := range machines {
		from, to := m.Created, m.Deleted
		switch {
		case to != 0:
		case m.State >= state.MachineRequested && m.State <= state.MachineDraining:
			to = now.UnixNano() + 1
		default:
			to = m.Since
		}
		for i := range out {
			t := out[i].Time.UnixNano()
			if from <= t && t < to {
				out[i].SpendPerHour = out[i].SpendPerHour.Add(m.PricePerHour)
				out[i].Nodes++
			}
		}
	}
	return out
}

// timePtrNanos is a unix-nanosecond time, or nil for 0.
func timePtrNanos(ns int64) *time.Time {
	if ns == 0 {
		return nil
	}
	t := time.Unix(0, ns).UTC()
	return &t
}

// jobRef is how the autoscaler's words name a job: "job 12/3".
var jobRef = regexp.MustCompile(`\bjob (\d+)/\d+\b`)

// hideOthersJobs keeps the jobs of batches the caller may not read out
// of the status: a machine made for one job alone names its batch and
// job only to those who may read it (its reason and the decisions that
// name it say "a job" to the others).
func (s *placementHandlers) hideOthersJobs(r *http.Request, out *api.AutoscalerStatus) {
	v := viewerOf(r)
	if v.Admin {
		return
	}
	seen := map[uint64]bool{}
	may := func(batch uint64) bool {
		ok, found := seen[batch]
		if !found {
			ok = s.state.Access(batch, v) >= state.Visible
			seen[batch] = ok
		}
		return ok
	}
	hide := func(text string) string {
		return jobRef.ReplaceAllStringFunc(text, func(m string) string {
			b, err := strconv.ParseUint(jobRef.FindStringSubmatch(m)[1], 10, 64)
			if err == nil && may(b) {
				return m
			}
			return "a job"
		})
	}
	for i := range out.Machines {
		m := &out.Machines[i]
		if m.ForBatch != 0 && !may(uint64(m.ForBatch)) {
			m.ForBatch, m.ForJob = 0, 0
		}
		m.Reason = hide(m.Reason)
	}
	for i := range out.Decisions {
		out.Decisions[i].Text = hide(out.Decisions[i].Text)
	}
}
