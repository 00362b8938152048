package ui

import (
	"cmp"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/units"
)

// The fleet: the workers that joined (GET /api/v1/instances, admins'),
// and the machines the autoscaler made for them (GET /api/v1/autoscaler),
// each list with a count by state.

// stateCount is how many of a list are in one state.
type stateCount struct {
	State string
	N     int
}

// countStates counts a list's states, in the order given and then any
// other by name.
func countStates(states []string, order []string) []stateCount {
	n := map[string]int{}
	for _, s := range states {
		n[s]++
	}
	var out []stateCount
	for _, s := range order {
		if n[s] > 0 {
			out = append(out, stateCount{s, n[s]})
			delete(n, s)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(n)) {
		out = append(out, stateCount{s, n[s]})
	}
	return out
}

// workerRow is one worker as the workers page shows it.
type workerRow struct {
	api.Instance
	State  string
	Labels string
	// CoresBar and MemoryBar: in use of the capacity, as bars.
	CoresBar, MemoryBar template.HTML
	UsedCPU             float64
	UsedMemory          int64
	UsedGPUs            int
	// Heard: when the leader last heard from it (zero: not since it
	// leads).
	Heard time.Time
}

// maxRetiredShown bounds the retired workers listed (the most recently
// retired).
const maxRetiredShown = 200

// workersData is the workers page's data, live.
func (u *UI) workersData(r *http.Request, s *session) (map[string]any, error) {
	list, err := s.client.ListInstances(withRemote(r.Context(), r))
	if err != nil {
		return nil, err
	}
	showRetired := r.URL.Query().Get("retired") != ""
	var active, retired []workerRow
	var states []string
	for _, in := range list {
		row := workerRow{Instance: in, State: "active", UsedCPU: max(in.CPU-in.FreeCPU, 0), UsedMemory: max(in.Memory-in.FreeMemory, 0),
			UsedGPUs: max(in.GPUs-in.FreeGPUs, 0)}
		if !in.Active {
			row.State = "retired"
		}
		if in.LastHeard != nil {
			row.Heard = *in.LastHeard
		}
		var labels []string
		for _, k := range slices.Sorted(maps.Keys(in.Labels)) {
			labels = append(labels, k+"="+in.Labels[k])
		}
		row.Labels = strings.Join(labels, ", ")
		row.CoresBar = amountBar(row.UsedCPU, in.CPU, trimFloat, "cores")
		row.MemoryBar = amountBar(float64(row.UsedMemory), float64(in.Memory), func(v float64) string { return units.FormatBytes(int64(v)) }, "memory")
		states = append(states, row.State)
		if in.Active {
			active = append(active, row)
		} else {
			retired = append(retired, row)
		}
	}
	slices.SortFunc(active, func(a, b workerRow) int {
		return cmp.Or(cmp.Compare(a.Region, b.Region), cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	slices.SortFunc(retired, func(a, b workerRow) int { return retiredAt(b).Compare(retiredAt(a)) })
	data := map[string]any{"Title": "Workers", "Active": active, "NRetired": len(retired), "ShowRetired": showRetired,
		"States": countStates(states, []string{"active", "retired"})}
	if showRetired {
		data["Retired"] = retired[:min(len(retired), maxRetiredShown)]
	}
	data["Live"] = liveURL(r)
	return data, nil
}

func retiredAt(w workerRow) time.Time {
	if w.TimeRetired != nil {
		return *w.TimeRetired
	}
	return time.Time{}
}

// amountBar is an amount in use of a capacity, as a bar titled in the
// amount's own unit.
func amountBar(used, capacity float64, format func(float64) string, what string) template.HTML {
	return bar(120, 12, capacity, fmt.Sprintf("%s of %s %s in use", format(used), format(capacity), what),
		[]segment{{"use-within", format(used) + " in use", used}})
}

// machineStates are the autoscaler's machine states in their order.
var machineStates = []string{"requested", "launching", "active", "draining", "deleted", "failed"}

// machinesData is the machines page's data, live.
func (u *UI) machinesData(r *http.Request, s *session) (map[string]any, error) {
	st, err := s.client.AutoscalerStatus(withRemote(r.Context(), r))
	if err != nil {
		return nil, err
	}
	machines := slices.Clone(st.Machines)
	rank := func(m api.Machine) int {
		if i := slices.Index(machineStates, m.State); i >= 0 {
			return i
		}
		return len(machineStates)
	}
	live := func(m api.Machine) bool { return rank(m) <= slices.Index(machineStates, "draining") }
	slices.SortStableFunc(machines, func(a, b api.Machine) int {
		if la, lb := live(a), live(b); la != lb {
			if la {
				return -1
			}
			return 1
		}
		return cmp.Or(b.Created.Compare(a.Created), cmp.Compare(a.ID, b.ID))
	})
	var states []string
	for _, m := range machines {
		states = append(states, m.State)
	}
	data := map[string]any{"Title": "Machines", "Machines": machines,
		"States": countStates(states, machineStates), "Status": st}
	data["Live"] = liveURL(r)
	return data, nil
}
