package state

import (
	"fmt"
	"strings"
)

// A filter string is a whitespace-separated list of terms that must all
// hold. Batch terms: state=running|complete|cancelled|success|failure,
// billing_project=NAME, user=NAME, name=NAME, attr:KEY=VALUE, attr:KEY.
// Job terms: state=pending|ready|running|success|failed|cancelled|error|
// done|bad, name=NAME (a job or its array), attr:KEY=VALUE, attr:KEY.

// BatchFilter selects batches.
type BatchFilter func(b *Batch) bool

// JobFilter selects jobs of one batch.
type JobFilter func(b *Batch, id uint32, j *job, g *group) bool

// ParseBatchFilter compiles a batch filter string.
func ParseBatchFilter(q string) (BatchFilter, error) {
	var preds []BatchFilter
	for _, term := range strings.Fields(q) {
		key, val, hasVal := strings.Cut(term, "=")
		switch {
		case strings.HasPrefix(key, "attr:"):
			attr := strings.TrimPrefix(key, "attr:")
			if attr == "" {
				return nil, fmt.Errorf("filter term %q: attr: needs a key, as in attr:sample=NA12878", term)
			}
			preds = append(preds, func(b *Batch) bool {
				v, ok := b.Attributes[attr]
				return ok && (!hasVal || v == val)
			})
		case key == "state" && hasVal:
			var p BatchFilter
			switch val {
			case "running":
				p = func(b *Batch) bool { return b.Completed == 0 }
			case "complete":
				p = func(b *Batch) bool { return b.Completed != 0 }
			case "cancelled":
				p = func(b *Batch) bool { return b.Cancelled }
			case "success":
				p = func(b *Batch) bool { return b.Completed != 0 && b.counts[Success] == b.nJobs }
			case "failure":
				p = func(b *Batch) bool { return b.counts[Failed]+b.counts[Error] > 0 }
			default:
				return nil, fmt.Errorf("filter term %q: batch state must be running, complete, cancelled, success or failure", term)
			}
			preds = append(preds, p)
		case key == "billing_project" && hasVal:
			preds = append(preds, func(b *Batch) bool { return b.BillingProject == val })
		case key == "user" && hasVal:
			preds = append(preds, func(b *Batch) bool { return b.User == val })
		case key == "name" && hasVal:
			preds = append(preds, func(b *Batch) bool { return b.Name == val })
		default:
			return nil, fmt.Errorf("unknown filter term %q: use state=, billing_project=, user=, name= or attr:KEY=VALUE", term)
		}
	}
	return func(b *Batch) bool {
		for _, p := range preds {
			if !p(b) {
				return false
			}
		}
		return true
	}, nil
}

// ParseJobFilter compiles a job filter string.
func ParseJobFilter(q string) (JobFilter, error) {
	var preds []JobFilter
	for _, term := range strings.Fields(q) {
		key, val, hasVal := strings.Cut(term, "=")
		switch {
		case strings.HasPrefix(key, "attr:"):
			attr := strings.TrimPrefix(key, "attr:")
			if attr == "" {
				return nil, fmt.Errorf("filter term %q: attr: needs a key", term)
			}
			preds = append(preds, func(_ *Batch, _ uint32, _ *job, g *group) bool {
				v, ok := g.spec.Attributes[attr]
				return ok && (!hasVal || v == val)
			})
		case key == "state" && hasVal:
			var p JobFilter
			switch val {
			case "done":
				p = func(_ *Batch, _ uint32, j *job, _ *group) bool { return j.state.Final() }
			case "bad":
				p = func(_ *Batch, _ uint32, j *job, _ *group) bool { return j.state.Final() && j.state != Success }
			default:
				st, ok := ParseJobState(val)
				if !ok {
					return nil, fmt.Errorf("filter term %q: job state must be pending, ready, running, success, failed, cancelled, error, done or bad", term)
				}
				p = func(_ *Batch, _ uint32, j *job, _ *group) bool { return j.state == st }
			}
			preds = append(preds, p)
		case key == "name" && hasVal:
			preds = append(preds, func(_ *Batch, id uint32, _ *job, g *group) bool {
				return g.spec.Name == val || jobName(g, id) == val
			})
		default:
			return nil, fmt.Errorf("unknown filter term %q: use state=, name= or attr:KEY=VALUE", term)
		}
	}
	return func(b *Batch, id uint32, j *job, g *group) bool {
		for _, p := range preds {
			if !p(b, id, j, g) {
				return false
			}
		}
		return true
	}, nil
}

func jobName(g *group, id uint32) string {
	if g.spec.Array {
		return fmt.Sprintf("%s[%d]", g.spec.Name, id-g.first)
	}
	return g.spec.Name
}
