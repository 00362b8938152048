package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// Attacks on gangs of several sizes through the API (helper review of
// f36754f).

// agsGang is a job group gang of a launcher and an array of ranks.
func agsGang(launcherCPU float64, ranks int64, rankCPU float64, rankGPUs int, gpuType string) *api.CreateBatchRequest {
	return &api.CreateBatchRequest{BillingProject: "genomics",
		JobGroups: []api.JobGroupSpec{{Path: "mpi", Gang: true}, {Path: "mpi/ranks"}},
		Jobs: []api.JobSpec{
			{JobID: 1, Name: "launcher", Command: []string{"mpirun"}, CPU: launcherCPU, Memory: 1 << 20, JobGroup: "mpi"},
			{JobID: 2, Name: "ranks", Count: ranks, Command: []string{"rank"}, CPU: rankCPU, Memory: 1 << 20, JobGroup: "mpi/ranks", GPUs: rankGPUs, GPUType: gpuType},
		}}
}

// agsAssigned syncs the workers until n jobs are assigned or wait passes,
// and returns the job IDs each got.
func agsAssigned(ws []*simWorker, n int, wait time.Duration) map[*simWorker][]int64 {
	got := map[*simWorker][]int64{}
	total := 0
	for end := time.Now().Add(wait); total < n && time.Now().Before(end); {
		for _, w := range ws {
			for _, a := range w.sync(200 * time.Millisecond).Assign {
				got[w] = append(got[w], a.JobID)
				w.known = append(w.known, a.AttemptRef)
				total++
			}
		}
	}
	return got
}

// TestAttackGangSizesIdleFleetNeverStartsIt: 4- and 6-core workers; a
// gang of two 3-core ranks and two 2-core helpers fits exactly (helpers
// on the 4, ranks on the 6). Admission takes it (pinned), and it must
// start: the scheduler's largest-first packing on the smallest worker
// does not find the fit (a rank on the 4 leaves a core); its second
// packing, the smallest first, does.
func TestAttackGangSizesIdleFleetNeverStartsIt(t *testing.T) {
	tc := startServer(t, "", nil)
	alice := tc.user("alice", "genomics")
	w4 := newSimWorker(t, tc, "sim-4", 4)
	w6 := newSimWorker(t, tc, "sim-6", 6)
	req := &api.CreateBatchRequest{BillingProject: "genomics",
		JobGroups: []api.JobGroupSpec{{Path: "mpi", Gang: true}},
		Jobs: []api.JobSpec{
			{JobID: 1, Name: "ranks", Count: 2, Command: []string{"rank"}, CPU: 3, Memory: 1 << 20, JobGroup: "mpi"},
			{JobID: 3, Name: "helpers", Count: 2, Command: []string{"help"}, CPU: 2, Memory: 1 << 20, JobGroup: "mpi"},
		}}
	if _, err := alice.CreateBatch(context.Background(), req); err != nil {
		t.Fatalf("admission refused a gang the fleet holds: %v", err)
	}
	got := agsAssigned([]*simWorker{w4, w6}, 4, 8*time.Second)
	if len(got[w4])+len(got[w6]) != 4 {
		t.Fatalf("assigned %v on the 4-core worker and %v on the 6-core one, want the 4 members", got[w4], got[w6])
	}
}

// TestAttackGangSizesGPUGangThroughTheAPI pins: a launcher without GPUs
// and three one-GPU a100 ranks on two 2-GPU a100 workers (and an 8-GPU
// h100 one) start whole, no worker given more a100 ranks than it has
// GPUs and none on the h100 worker; members of two GPU types, even past a
// member without GPUs, are refused at submit.
func TestAttackGangSizesGPUGangThroughTheAPI(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	a1 := activateSimWorker(t, tc, &api.ActivateRequest{Name: "sim-a1", CPU: 4, Memory: 64 << 30, GPUs: 2, GPUType: "a100"})
	a2 := activateSimWorker(t, tc, &api.ActivateRequest{Name: "sim-a2", CPU: 4, Memory: 64 << 30, GPUs: 2, GPUType: "a100"})
	h := activateSimWorker(t, tc, &api.ActivateRequest{Name: "sim-h", CPU: 4, Memory: 64 << 30, GPUs: 8, GPUType: "h100"})
	two := agsGang(1, 2, 1, 1, "a100")
	two.Jobs[0].GPUs, two.Jobs[0].GPUType = 0, ""
	two.Jobs = append(two.Jobs, api.JobSpec{JobID: 4, Name: "other", Command: []string{"x"}, CPU: 1, Memory: 1 << 20, JobGroup: "mpi", GPUs: 1, GPUType: "h100"})
	if _, err := alice.CreateBatch(ctx, two); !api.IsStatus(err, http.StatusBadRequest) {
		t.Errorf("members of a100 and h100: %v, want a 400", err)
	}
	if _, err := alice.CreateBatch(ctx, agsGang(1, 3, 1, 1, "a100")); err != nil {
		t.Fatal(err)
	}
	got := agsAssigned([]*simWorker{a1, a2, h}, 4, 30*time.Second)
	if len(got[a1])+len(got[a2])+len(got[h]) != 4 {
		t.Fatalf("assigned %v, %v and %v, want the 4 members", got[a1], got[a2], got[h])
	}
	for _, w := range []*simWorker{a1, a2, h} {
		ranks := 0
		for _, id := range got[w] {
			if id != 1 {
				ranks++
			}
		}
		if (w == h && ranks > 0) || ranks > 2 {
			t.Fatalf("assigned %v, %v and %v: ranks over a worker's a100s", got[a1], got[a2], got[h])
		}
	}
}
