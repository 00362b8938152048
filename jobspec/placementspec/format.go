package placementspec

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/drover-sched/drover/api"
)

// FormatQueues writes queues (paths, a parent before its children) as the
// nested queue blocks of a placement config, every setting they have:
// what drover queue recommend -hcl prints for drover placement apply.
// Parse reads it back to the same queues (sizes in bytes, durations as
// Go prints them).
func FormatQueues(queues []api.Queue) []byte {
	f := hclwrite.NewEmptyFile()
	blocks := map[string]*hclwrite.Body{"": f.Body()}
	for _, q := range queues {
		parent := ""
		if i := strings.LastIndex(q.Path, "/"); i >= 0 {
			parent = q.Path[:i]
		}
		body, ok := blocks[parent]
		if !ok {
			body = f.Body() // a parent not listed: the queue at the top of the file
		}
		name := q.Path[strings.LastIndex(q.Path, "/")+1:]
		if len(body.Blocks()) > 0 || len(body.Attributes()) > 0 {
			body.AppendNewline()
		}
		b := body.AppendNewBlock("queue", []string{name}).Body()
		blocks[q.Path] = b
		writeQueue(b, &q)
	}
	return f.Bytes()
}

func writeQueue(b *hclwrite.Body, q *api.Queue) {
	if q.Weight > 0 {
		b.SetAttributeValue("weight", cty.NumberIntVal(q.Weight))
	}
	if g := q.Guarantee; g.CPU > 0 || g.Memory > 0 || len(g.GPUs) > 0 {
		writeAmounts(b.AppendNewBlock("guarantee", nil).Body(), &g.CPU, memPtr(g.Memory), g.GPUs)
	}
	if l := q.BorrowLimit; l != nil {
		writeAmounts(b.AppendNewBlock("borrow_limit", nil).Body(), l.CPU, l.Memory, l.GPUs)
	}
	if l := q.LendLimit; l != nil {
		writeAmounts(b.AppendNewBlock("lend_limit", nil).Body(), l.CPU, l.Memory, l.GPUs)
	}
	if m := q.MaxRunning; m.Jobs > 0 || m.CPU > 0 {
		mb := b.AppendNewBlock("max_running", nil).Body()
		if m.Jobs > 0 {
			mb.SetAttributeValue("jobs", cty.NumberIntVal(m.Jobs))
		}
		if m.CPU > 0 {
			mb.SetAttributeValue("cpu", cty.NumberFloatVal(m.CPU))
		}
	}
	str := func(name, v string) {
		if v != "" {
			b.SetAttributeValue(name, cty.StringVal(v))
		}
	}
	list := func(name string, vs []string) {
		if len(vs) > 0 {
			vals := make([]cty.Value, len(vs))
			for i, v := range vs {
				vals[i] = cty.StringVal(v)
			}
			b.SetAttributeValue(name, cty.ListVal(vals))
		}
	}
	str("reclaim_grace", q.ReclaimGrace)
	str("min_runtime", q.MinRuntime)
	if q.Preemptible {
		b.SetAttributeValue("preemptible", cty.True)
	}
	str("preempt_after", q.PreemptAfter)
	str("usage_half_life", q.UsageHalfLife)
	if q.PreemptThreshold > 0 {
		b.SetAttributeValue("preempt_threshold", cty.NumberFloatVal(q.PreemptThreshold))
	}
	list("allow_preemption_from", q.AllowPreemptionFrom)
	str("strategy", q.Strategy)
	list("home_clusters", q.HomeClusters)
	if q.MaxPriority != 0 {
		b.SetAttributeValue("max_priority", cty.NumberIntVal(q.MaxPriority))
	}
	list("billing_projects", q.BillingProjects)
	list("allow_projects", q.AllowProjects)
	if r := q.Recommend; r != nil {
		b.AppendNewBlock("recommend", nil).Body().SetAttributeValue("percentile", cty.NumberFloatVal(r.Percentile))
	}
	if a := q.AutoApply; a != nil {
		ab := b.AppendNewBlock("auto_apply", nil).Body()
		ab.SetAttributeValue("every", cty.StringVal(a.Every))
		if a.MaxChange > 0 {
			ab.SetAttributeValue("max_change", cty.NumberFloatVal(a.MaxChange))
		}
		if a.DryRun {
			ab.SetAttributeValue("dry_run", cty.True)
		}
		if a.Days > 0 {
			ab.SetAttributeValue("days", cty.NumberIntVal(a.Days))
		}
		if a.Keep > 0 {
			ab.SetAttributeValue("keep", cty.NumberIntVal(a.Keep))
		}
		if a.Rebalance {
			ab.SetAttributeValue("rebalance", cty.True)
		}
		if a.High > 0 {
			ab.SetAttributeValue("high", cty.NumberFloatVal(a.High))
		}
		if a.Low > 0 {
			ab.SetAttributeValue("low", cty.NumberFloatVal(a.Low))
		}
	}
}

func memPtr(m int64) *int64 {
	if m == 0 {
		return nil
	}
	return &m
}

func writeAmounts(b *hclwrite.Body, cpu *float64, mem *int64, gpus map[string]int) {
	if cpu != nil {
		b.SetAttributeValue("cpu", cty.NumberFloatVal(*cpu))
	}
	if mem != nil {
		b.SetAttributeValue("memory", cty.StringVal(fmt.Sprintf("%dB", *mem)))
	}
	if len(gpus) > 0 {
		m := map[string]cty.Value{}
		for _, t := range slices.Sorted(maps.Keys(gpus)) {
			m[t] = cty.NumberIntVal(int64(gpus[t]))
		}
		b.SetAttributeValue("gpus", cty.ObjectVal(m))
	}
}
