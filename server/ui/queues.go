package ui

import (
	"fmt"
	"html/template"
	"maps"
	"slices"
	"strings"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/units"
)

// queueRow is one queue of the queues page: what it holds of each
// resource (cores, memory, each GPU type) against its guarantee and cap,
// and what its Ready jobs ask for.
type queueRow struct {
	api.Queue
	Resources []queueResource
	// Waiting says what waits ("" : nothing).
	Waiting string
}

// queueResource is one resource of a queue.
type queueResource struct {
	Name string // cores, memory, or "GPUs a100"
	Bar  template.HTML
	// Used, Guarantee and Cap in the resource's unit ("" for a cap: no
	// bound); Borrowed what it holds beyond its guarantee ("": none).
	Used, Guarantee, Cap, Borrowed string
}

// queueRows shapes the API's queues for the page: every resource any
// queue guarantees, bounds, uses or waits for has a column.
func queueRows(queues []api.Queue) []queueRow {
	gpuTypes := map[string]bool{}
	for _, q := range queues {
		for _, m := range []map[string]int{q.Guarantee.GPUs, q.Used.GPUs, q.Waiting.GPUs} {
			for t := range m {
				gpuTypes[t] = true
			}
		}
		if q.Cap != nil {
			for t := range q.Cap.GPUs {
				gpuTypes[t] = true
			}
		}
	}
	types := slices.Sorted(maps.Keys(gpuTypes))
	bytes := func(v float64) string { return units.FormatBytes(int64(v)) }
	count := func(v float64) string { return fmt.Sprint(int64(v)) }
	out := make([]queueRow, 0, len(queues))
	for _, q := range queues {
		row := queueRow{Queue: q, Waiting: waitingWords(q)}
		var capCPU, capMem float64
		capGPUs := map[string]int{}
		if q.Cap != nil {
			capCPU, capMem, capGPUs = q.Cap.CPU, float64(q.Cap.Memory), q.Cap.GPUs
		}
		row.Resources = append(row.Resources,
			resource("cores", q.Used.CPU, q.Guarantee.CPU, capCPU, trimFloat),
			resource("memory", float64(q.Used.Memory), float64(q.Guarantee.Memory), capMem, bytes))
		for _, t := range types {
			name := "GPUs " + t
			if t == "" {
				name = "GPUs of any type"
			}
			row.Resources = append(row.Resources, resource(name, float64(q.Used.GPUs[t]), float64(q.Guarantee.GPUs[t]), float64(capGPUs[t]), count))
		}
		out = append(out, row)
	}
	return out
}

// resource is one resource of a queue, in its unit; capacity 0: no cap.
func resource(name string, used, guarantee, capacity float64, format func(float64) string) queueResource {
	r := queueResource{Name: name, Used: format(used), Guarantee: format(guarantee)}
	if capacity > 0 {
		r.Cap = format(capacity)
	}
	borrowed := max(used-guarantee, 0)
	if borrowed > 0 {
		r.Borrowed = format(borrowed)
	}
	within := min(used, guarantee)
	title := fmt.Sprintf("%s: %s used of %s guaranteed", name, format(used), format(guarantee))
	if capacity > 0 {
		title += fmt.Sprintf(" (at most %s)", format(capacity))
	}
	if borrowed > 0 {
		title += fmt.Sprintf(", %s borrowed", format(borrowed))
	}
	r.Bar = bar(120, 12, max(capacity, guarantee, used), title, []segment{
		{"use-within", format(within) + " within guarantee", within},
		{"use-borrowed", format(borrowed) + " borrowed", borrowed},
		{"use-room", "room to the guarantee", max(guarantee-used, 0)},
	})
	return r
}

// waitingWords says what a queue's Ready jobs ask for: "12 jobs: 14
// cores, 18 GiB, 4 GPUs a100".
func waitingWords(q api.Queue) string {
	if q.WaitingJobs == 0 {
		return ""
	}
	parts := []string{trimFloat(q.Waiting.CPU) + " cores"}
	if q.Waiting.Memory > 0 {
		parts = append(parts, units.FormatBytes(q.Waiting.Memory))
	}
	for _, t := range slices.Sorted(maps.Keys(q.Waiting.GPUs)) {
		if t == "" {
			parts = append(parts, fmt.Sprintf("%d GPUs of any type", q.Waiting.GPUs[t]))
		} else {
			parts = append(parts, fmt.Sprintf("%d GPUs %s", q.Waiting.GPUs[t], t))
		}
	}
	jobs := "jobs"
	if q.WaitingJobs == 1 {
		jobs = "job"
	}
	return fmt.Sprintf("%d %s: %s", q.WaitingJobs, jobs, strings.Join(parts, ", "))
}
