package efficiency

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
)

// attackAttempt is one hour-long attempt asking 2 cores and 4 GiB that
// used cores cores on average and peaked at peak bytes.
func attackAttempt(name string, day int32, cores float64, peak int64) Attempt {
	return Attempt{Group: name, Day: day, CPU: 2, Memory: 4 << 30, Seconds: 3600, CPUSeconds: cores * 3600, PeakMemory: peak,
		Cost: money.FromDollars(0.24), Lines: []api.CostLine{{Resource: "compute/default", Units: 2, PricePerHour: money.RateFromDollars(0.1)},
			{Resource: "memory/default", Units: 4, PricePerHour: money.RateFromDollars(0.01)}}}
}

// TestAttackMergeKeepsEveryBucket: merging a summary into an empty one
// (what ReportPeriod does with every stored row) must give back the same
// histogram. Merge re-buckets each count through bucketOf(upper(b)), and
// for some buckets the float round trip lands one bucket higher (upper(b)
// = 2^(b/16) and ceil(16·log2 of it) is b+1), so a period's p95 of cores
// used can be two buckets (~9%) above the exact one, not the documented
// 4.4% (api.EfficiencyPeriod, Summary).
func TestAttackMergeKeepsEveryBucket(t *testing.T) {
	var drifted []string
	for b := -maxBucket; b <= maxBucket; b++ {
		one := Summary{Cores: Histogram{b: 1}}
		var merged Summary
		merged.Merge(&one)
		if merged.Cores[b] != 1 {
			drifted = append(drifted, fmt.Sprintf("bucket %d (cores %.4f) became %v", b, upper(b), map[int]int64(merged.Cores)))
		}
	}
	if len(drifted) > 0 {
		t.Errorf("Merge moved %d buckets' counts to another bucket (it should add counts bucket by bucket): %v", len(drifted), drifted)
	}
}

// TestAttackPeriodP95WithinDocumentedBound: one batch, one attempt that
// used 0.95 of a core: its period report's CoresP95 must be at most 4.4%
// (one bucket, 2^(1/16)) above 0.95, as api.EfficiencyPeriod promises.
func TestAttackPeriodP95WithinDocumentedBound(t *testing.T) {
	for _, cores := range []float64{0.95, 1.05, 1.6, 1.9, 3.3, 0.83, 0.76} {
		var z Summarizer
		z.Add(attackAttempt("align", 20000, cores, 1<<30))
		sums := z.Summaries()
		rep := ReportPeriod([]Owned{{BillingProject: "p", User: "u", Batch: 1, Summary: &sums[0].Summary}}, DefaultOptions())
		exact := Report([]Attempt{attackAttempt("align", 20000, cores, 1<<30)}, DefaultOptions())
		bound := cores * math.Exp2(1.0/bucketsPerOctave) * (1 + 1e-12)
		if got := rep.Groups[0].CoresP95; got < cores || got > bound {
			t.Errorf("cores used %.2f (the batch's exact p95 %.4f): the period's p95 is %.4f, more than %.4f (4.4%% above)", cores, exact.Groups[0].CoresP95, got, bound)
		}
	}
}

// TestAttackHugePeakDoesNotWrap: a worker may activate with any memory
// (handleActivate checks memory > 0 only) and report a peak up to it; a
// peak near 2^63 bytes lands in the top bucket, whose upper bound 2^63 is
// past int64: int64(math.Ceil(2^63)) wraps to math.MinInt64 (and
// finish's int64(ceil(peak × 1.2)) wraps for any peak above
// MaxInt64/1.2). The report must not turn a job that peaked past what it
// asked into a negative p95 and a suggestion to shrink to 256 MiB with
// savings to show.
func TestAttackHugePeakDoesNotWrap(t *testing.T) {
	for _, peak := range []int64{math.MaxInt64, 15 << 59, 7 << 60} {
		a := attackAttempt("hog", 20000, 1.9, peak)
		var z Summarizer
		z.Add(a)
		sums := z.Summaries()
		rep := ReportPeriod([]Owned{{BillingProject: "p", User: "u", Batch: 1, Summary: &sums[0].Summary}}, DefaultOptions())
		g := rep.Groups[0]
		if g.PeakMemoryP95 < 4<<30 || g.SuggestedMemory != 4<<30 || g.Savings != 0 {
			t.Errorf("period report, peak %d bytes on a job asking 4 GiB and using all its cores: p95 %d, suggested memory %d, savings %v; want a p95 at least 4 GiB, the 4 GiB it asked, no savings",
				peak, g.PeakMemoryP95, g.SuggestedMemory, g.Savings)
		}
		if _, err := json.Marshal(rep); err != nil {
			t.Errorf("period report of peak %d does not encode: %v", peak, err)
		}
		exact := Report([]Attempt{a}, DefaultOptions()).Groups[0]
		if exact.PeakMemoryP95 != peak || exact.SuggestedMemory != 4<<30 {
			t.Errorf("the batch's exact report, peak %d bytes on a job asking 4 GiB: p95 %d, suggested memory %d; want the 4 GiB it asked", peak, exact.PeakMemoryP95, exact.SuggestedMemory)
		}
	}
}

// TestAttackSummarizerCap: a batch of 1,500 distinct job names keeps
// MaxSummaries summaries of its own and one "(other jobs)" per day for
// the rest, every attempt counted once; groups first seen on a later day
// go to that day's "(other jobs)".
func TestAttackSummarizerCap(t *testing.T) {
	var z Summarizer
	for i := range 1500 {
		z.Add(attackAttempt(fmt.Sprintf("job-%d", i), 20000, 0.5, 1<<30))
	}
	for d := range int32(3) {
		z.Add(attackAttempt("late", 20001+d, 0.5, 1<<30))
		z.Add(attackAttempt("job-1", 20001+d, 0.5, 1<<30)) // a known name on a new day: a new key, past the cap
	}
	sums := z.Summaries()
	if len(sums) != MaxSummaries+4 {
		t.Fatalf("%d summaries; want %d of groups and 4 of other jobs (one per day)", len(sums), MaxSummaries)
	}
	var total int64
	others := map[int32]int64{}
	for _, s := range sums {
		total += s.Attempts
		if s.Name == OtherJobs {
			others[s.Day] += s.Attempts
		}
	}
	if total != 1506 || others[20000] != 500 || others[20001] != 2 || others[20002] != 2 || others[20003] != 2 {
		t.Fatalf("attempts %d, other jobs by day %v", total, others)
	}
}

// TestAttackTinyWallTime: an attempt of a nanosecond that claims the 60
// seconds of CPU time a worker's slack allows (cores used 6e10) stays in
// the top bucket and the report encodes.
func TestAttackTinyWallTime(t *testing.T) {
	a := attackAttempt("blip", 20000, 0, 1)
	a.Seconds, a.CPUSeconds = 1e-9, 60
	var z Summarizer
	z.Add(a)
	sums := z.Summaries()
	rep := ReportPeriod([]Owned{{BillingProject: "p", User: "u", Batch: 1, Summary: &sums[0].Summary}}, DefaultOptions())
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
	if g := rep.Groups[0]; math.IsInf(g.CoresP95, 0) || math.IsNaN(g.CoresP95) || g.SuggestedCPU != 2 {
		t.Fatalf("%+v", g)
	}
	if _, err := json.Marshal(sums); err != nil {
		t.Fatal(err)
	}
}
