package api

import (
	"math"
	"strings"
	"testing"
)

func TestJobSpecValidate(t *testing.T) {
	ok := func() JobSpec { return JobSpec{JobID: 1, Command: []string{"true"}} }
	cases := []struct {
		name string
		edit func(*JobSpec)
		want string // "" means valid
	}{
		{"defaults", func(*JobSpec) {}, ""},
		{"fractional cpu", func(s *JobSpec) { s.CPU = 0.25 }, ""},
		{"max cpu", func(s *JobSpec) { s.CPU = MaxCPU }, ""},
		{"job id zero", func(s *JobSpec) { s.JobID = 0 }, "job_id must be between 1 and 2147483648"},
		{"negative count", func(s *JobSpec) { s.Count = -1 }, "count is -1"},
		{"count over the limit", func(s *JobSpec) { s.Count = MaxJobsPerBatch + 1 }, "count is 2147483649"},
		{"no command", func(s *JobSpec) { s.Command = nil }, "command is empty"},
		{"empty program", func(s *JobSpec) { s.Command = []string{""} }, "command is empty"},
		{"negative cpu", func(s *JobSpec) { s.CPU = -1 }, "cpu is -1"},
		{"too many cores", func(s *JobSpec) { s.CPU = MaxCPU + 1 }, "between 0 and 4096 cores"},
		{"NaN cpu", func(s *JobSpec) { s.CPU = math.NaN() }, "cpu is NaN"},
		{"below a millicore", func(s *JobSpec) { s.CPU = 0.0001 }, "below the smallest unit, 0.001 cores"},
		{"negative memory", func(s *JobSpec) { s.Memory = -5 }, "memory is -5 bytes"},
		{"max memory", func(s *JobSpec) { s.Memory = MaxMemory }, ""},
		{"the issue's 8 EiB", func(s *JobSpec) { s.Memory = math.MaxInt64 }, "memory is 9223372036854775807 bytes; a job may ask for at most 70368744177664 (64 TiB"},
		{"timeout over a year", func(s *JobSpec) { s.TimeoutSeconds = MaxTimeoutSeconds + 1 }, "one year"},
		{"too many retries", func(s *JobSpec) { s.Retries = MaxRetries + 1 }, "retries is 101"},
		{"too many lost attempts", func(s *JobSpec) { s.MaxLostAttempts = MaxLostAttempts + 1 }, "max_lost_attempts is 101"},
		{"lost attempts below -1", func(s *JobSpec) { s.MaxLostAttempts = -2 }, "max_lost_attempts is -2"},
		{"process limit", func(s *JobSpec) { s.MaxProcesses = MinJobProcesses }, ""},
		{"one process", func(s *JobSpec) { s.MaxProcesses = 1 }, ""},
		{"negative processes", func(s *JobSpec) { s.MaxProcesses = -5 }, "max_processes is -5"},
		{"too many processes", func(s *JobSpec) { s.MaxProcesses = MaxJobProcesses + 1 }, "max_processes is 65537"},
		{"env name with =", func(s *JobSpec) { s.Env = map[string]string{"A=B": "x"} }, `env name "A=B"`},
		{"parent out of range", func(s *JobSpec) { s.ParentIDs = []int64{0} }, "parents: job ID 0 is out of range"},
		{"reversed range", func(s *JobSpec) { s.BatchParentRanges = []IDRange{{5, 3}} }, "batch parents: range [5, 3]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := ok()
			c.edit(&s)
			err := s.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("valid spec refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestValidateJobsNamesTheEntryAndCountsJobs(t *testing.T) {
	specs := []JobSpec{
		{JobID: 1, Command: []string{"true"}},
		{JobID: 2, Name: "align", Command: []string{"true"}, CPU: -1},
	}
	err := ValidateJobs(specs)
	if err == nil || !strings.HasPrefix(err.Error(), `jobs[1] (job_id 2, "align"): cpu is -1`) {
		t.Fatalf("error %v", err)
	}
	if err := validateJobs(specs, 1000); err == nil || !strings.HasPrefix(err.Error(), "jobs[1001]") {
		t.Fatalf("offset: %v", err)
	}
	big := []JobSpec{
		{JobID: 1, Count: MaxJobsPerBatch, Command: []string{"true"}},
		{JobID: 2, Count: 1, Command: []string{"true"}},
	}
	if err := ValidateJobs(big); err == nil || !strings.Contains(err.Error(), "more than 2147483648 jobs") {
		t.Fatalf("total over the limit: %v", err)
	}
}

func TestSummarizeWaiting(t *testing.T) {
	got := SummarizeWaiting([]Waiting{
		{FirstJob: 1, Count: 5, Reason: "quota_cpu", Message: "team t at its cpu quota (4 of 4 cores)"},
		{FirstJob: 6, Count: 20, Reason: "cluster_disabled", Message: "cluster b disabled"},
		{FirstJob: 30, Count: 5, Reason: "quota_cpu", Message: "later"},
		{FirstJob: 40, Count: 10, Reason: "fair_share", Message: "waiting for fair share behind 2 users"},
	})
	want := []WaitingCount{
		{Reason: "cluster_disabled", Jobs: 20, Message: "cluster b disabled"},
		{Reason: "fair_share", Jobs: 10, Message: "waiting for fair share behind 2 users"},
		{Reason: "quota_cpu", Jobs: 10, Message: "team t at its cpu quota (4 of 4 cores)"},
	}
	if len(got) != len(want) {
		t.Fatalf("summary %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("summary[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}
