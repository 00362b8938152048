package state

import "fmt"

// Filters are the API's (api.ParseBatchQuery, api.ParseJobQuery: the
// history store reads the same terms); server/apiview compiles them into
// these tests on the state's records, each term with api's rule for it.
// The state only walks its batches and jobs in ID order and asks.

// BatchFilter selects batches by their records (nil: all).
type BatchFilter func(b *BatchRecord) bool

// JobFilter selects jobs of one batch by what a filter may test of them
// (nil: all).
type JobFilter func(j *JobFacts) bool

// JobFacts is what a job filter may test of a job, read without copying
// the job out: its ID, state and spec (a constant to the reader), and its
// name on demand.
type JobFacts struct {
	ID    uint32
	State JobState
	Spec  *Spec
	// GroupPath is the job group it is in (empty: none).
	GroupPath string
	base      uint32 // its array's first job (group.base)
}

// Name is the job's name: the spec's, with its index for an array's.
func (f *JobFacts) Name() string {
	if f.Spec.Array {
		return fmt.Sprintf("%s[%d]", f.Spec.Name, f.ID-f.base)
	}
	return f.Spec.Name
}

func jobName(g *group, id uint32) string {
	f := JobFacts{ID: id, Spec: g.spec, base: g.base}
	return f.Name()
}
