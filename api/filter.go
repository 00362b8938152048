package api

import (
	"fmt"
	"strings"
)

// A filter string (the q parameter of batch and job listings) is a
// whitespace-separated list of terms that must all hold.
//
// Batch terms: state=running|complete|cancelled|success|failure,
// billing_project=NAME, user=NAME, name=NAME, attr:KEY=VALUE, attr:KEY.
//
// Job terms: state=pending|ready|running|success|failed|cancelled|error|
// done|bad, name=NAME (a job, or every job of an array), attr:KEY=VALUE,
// attr:KEY.
//
// The server's live state and the history store both read the parsed
// form, so a batch matches the same filter wherever it is kept.

// Term is one term of a filter: Key=Value, or an attribute test (Key
// "attr:NAME", HasValue false when only the attribute's presence counts).
type Term struct {
	Key      string
	Value    string
	HasValue bool
}

// Attr is the attribute a term tests ("" when it tests something else).
func (t Term) Attr() string { return strings.TrimPrefix(t.Key, "attr:") }

// IsAttr reports whether the term tests an attribute.
func (t Term) IsAttr() bool { return strings.HasPrefix(t.Key, "attr:") }

// Batch filter states.
var batchFilterStates = []string{"running", "complete", "cancelled", "success", "failure"}

// Job filter states besides the job states themselves.
const (
	JobFilterDone = "done" // any final state
	JobFilterBad  = "bad"  // a final state other than success
)

var jobFilterStates = []string{JobPending, JobReady, JobCreating, JobRunning, JobSuccess, JobFailed, JobCancelled, JobError, JobFilterDone, JobFilterBad}

// BatchQuery is a parsed batch filter.
type BatchQuery []Term

// JobQuery is a parsed job filter.
type JobQuery []Term

// ParseBatchQuery parses a batch filter string.
func ParseBatchQuery(q string) (BatchQuery, error) {
	return parseTerms[BatchQuery](q, func(raw string, t Term) error {
		switch {
		case t.IsAttr():
		case t.Key == "state" && t.HasValue:
			if !contains(batchFilterStates, t.Value) {
				return fmt.Errorf("filter term %q: batch state must be running, complete, cancelled, success or failure", raw)
			}
		case (t.Key == "billing_project" || t.Key == "user" || t.Key == "name") && t.HasValue:
		default:
			return fmt.Errorf("unknown filter term %q: use state=, billing_project=, user=, name= or attr:KEY=VALUE", raw)
		}
		return nil
	})
}

// ParseJobQuery parses a job filter string.
func ParseJobQuery(q string) (JobQuery, error) {
	return parseTerms[JobQuery](q, func(raw string, t Term) error {
		switch {
		case t.IsAttr():
		case t.Key == "state" && t.HasValue:
			if !contains(jobFilterStates, t.Value) {
				return fmt.Errorf("filter term %q: job state must be pending, ready, running, success, failed, cancelled, error, done or bad", raw)
			}
		case t.Key == "name" && t.HasValue:
		case t.Key == "group" && t.HasValue:
			if err := ValidateJobGroupPath(t.Value); err != nil {
				return fmt.Errorf("filter term %q: %w", raw, err)
			}
		default:
			return fmt.Errorf("unknown filter term %q: use state=, name=, group= or attr:KEY=VALUE", raw)
		}
		return nil
	})
}

// parseTerms splits a filter string into terms, each checked by check.
func parseTerms[Q ~[]Term](q string, check func(raw string, t Term) error) (Q, error) {
	var out Q
	for _, raw := range strings.Fields(q) {
		t, err := parseTerm(raw)
		if err == nil {
			err = check(raw, t)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func parseTerm(raw string) (Term, error) {
	key, val, hasVal := strings.Cut(raw, "=")
	t := Term{Key: key, Value: val, HasValue: hasVal}
	if t.IsAttr() && t.Attr() == "" {
		return t, fmt.Errorf("filter term %q: attr: needs a key, as in attr:sample=NA12878", raw)
	}
	return t, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// MatchAttr reports whether attributes satisfy an attribute term.
func (t Term) MatchAttr(attrs map[string]string) bool {
	v, ok := attrs[t.Attr()]
	return ok && (!t.HasValue || v == t.Value)
}

// Match reports whether a batch satisfies every term.
func (q BatchQuery) Match(b *Batch) bool {
	for _, t := range q {
		if !t.matchBatch(b) {
			return false
		}
	}
	return true
}

func (t Term) matchBatch(b *Batch) bool {
	switch {
	case t.IsAttr():
		return t.MatchAttr(b.Attributes)
	case t.Key == "billing_project":
		return b.BillingProject == t.Value
	case t.Key == "user":
		return b.User == t.Value
	case t.Key == "name":
		return b.Name == t.Value
	}
	return BatchStateMatches(t.Value, b.State == BatchComplete, b.Cancelled, b.NSucceeded == b.NJobs, b.NFailed+b.NError > 0)
}

// BatchStateMatches decides a state= term of a batch filter from what it
// tests: whether the batch is complete, cancelled, whether all its jobs
// succeeded and whether any failed or ended in error.
func BatchStateMatches(want string, complete, cancelled, allSucceeded, anyBad bool) bool {
	switch want {
	case "running":
		return !complete
	case "complete":
		return complete
	case "cancelled":
		return cancelled
	case "success":
		return complete && allSucceeded
	case "failure":
		return anyBad
	}
	return false
}

// JobStateMatches decides a state= term of a job filter for a job in
// state st.
func JobStateMatches(want, st string) bool {
	final := st == JobSuccess || st == JobFailed || st == JobCancelled || st == JobError
	switch want {
	case JobFilterDone:
		return final
	case JobFilterBad:
		return final && st != JobSuccess
	}
	return st == want
}

// Match reports whether a job satisfies every term; base is the name of
// the job's spec (an array's name, without the index).
func (q JobQuery) Match(j *Job, base string) bool {
	for _, t := range q {
		switch {
		case t.IsAttr():
			if !t.MatchAttr(j.Attributes) {
				return false
			}
		case t.Key == "name":
			if j.Name != t.Value && base != t.Value {
				return false
			}
		case t.Key == "state":
			if !JobStateMatches(t.Value, j.State) {
				return false
			}
		case t.Key == "group":
			if !InJobGroup(j.JobGroup, t.Value) {
				return false
			}
		}
	}
	return true
}

// InJobGroup reports whether a job of the group at path is in group (the
// group itself or one below it).
func InJobGroup(path, group string) bool {
	return path == group || len(path) > len(group) && path[len(group)] == '/' && path[:len(group)] == group
}

// States lists the job states a query's state terms allow (nil: any), so
// a store can select them before it reads the jobs.
func (q JobQuery) States() []string {
	var allowed []string
	first := true
	for _, t := range q {
		if t.Key != "state" {
			continue
		}
		var these []string
		for _, st := range []string{JobPending, JobReady, JobCreating, JobRunning, JobSuccess, JobFailed, JobCancelled, JobError} {
			if JobStateMatches(t.Value, st) && (first || contains(allowed, st)) {
				these = append(these, st)
			}
		}
		allowed, first = these, false
	}
	if first {
		return nil
	}
	if allowed == nil {
		allowed = []string{}
	}
	return allowed
}
