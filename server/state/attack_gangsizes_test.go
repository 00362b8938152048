package state

import (
	"fmt"
	"testing"
)

// Attacks on gangs of several sizes at apply (helper review of f36754f).

// agsGPUWorker activates a worker of cores, 16 GiB, and gpus of typ.
func agsGPUWorker(h *Harness, name string, cores, gpus int64, typ string) uint32 {
	h.T.Helper()
	res := h.Must(&Activate{Now: h.Tick(), Name: name, CPUMilli: cores * 1000, Memory: 16 << 30, TokenHash: "tok-" + name + fmt.Sprint(h.Now), GPUType: typ, GPUs: gpus})
	return res.(*ActivateResult).Instance
}

// agsLauncherAndRanks commits a gang of a launcher (cpu cores, mem GiB,
// no GPUs) and n ranks of rankCPU cores, a GiB and rankGPUs a100s each.
func agsLauncherAndRanks(h *Harness, cpu float64, mem int64, n uint32, rankCPU float64, rankGPUs int64) uint64 {
	h.T.Helper()
	launcher := spec("launcher", cpu)
	launcher.Memory = mem << 30
	launcher.Run = &Run{Group: 1, Gang: &Gang{Size: 1 + n}}
	ranks := spec("ranks", rankCPU)
	ranks.Array = true
	if rankGPUs > 0 {
		ranks.Where = &Where{GPUType: "a100", GPUs: rankGPUs}
	}
	ranks.Run = &Run{Group: 1, Gang: &Gang{Size: 1 + n, Lead: 1}}
	return h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default",
		Groups: []JobGroupDecl{{Path: "mpi", Gang: true}}, Jobs: []JobEntry{entry(1, 1, launcher), entry(2, n, ranks)}}).(*UpdateResult).Batch
}

// TestAttackGangSizesApplyGPURoom pins: apply counts GPUs by each
// member's own count (the launcher none): three ranks of one GPU on a
// worker of two are refused, two ranks beside each other and the third
// beside the launcher are taken.
func TestAttackGangSizesApplyGPURoom(t *testing.T) {
	h := newHarness(t)
	w1 := agsGPUWorker(h, "g1", 4, 2, "a100")
	w2 := agsGPUWorker(h, "g2", 4, 2, "a100")
	b := agsLauncherAndRanks(h, 1, 1, 3, 1, 1)
	if res := h.Must(gangPlan(h, b, 1, [3]uint32{1, 1, w2}, [3]uint32{2, 3, w1})).(*PlanResult); res.Placed != 0 {
		t.Fatalf("three one-GPU ranks on a worker of two GPUs: placed %d, want refused", res.Placed)
	}
	if res := h.Must(gangPlan(h, b, 1, [3]uint32{1, 1, w2}, [3]uint32{2, 2, w1}, [3]uint32{4, 1, w2})).(*PlanResult); res.Placed != 4 {
		t.Fatalf("a valid plan: %+v", res)
	}
	h.Restored()
}

// TestAttackGangSizesApplyMemoryRoom pins: a launcher of 7 GiB beside a
// rank of 1 GiB and 1 core on a worker of 2 cores and 8 GiB fits; a
// second rank beside them (cores enough on a 4-core worker, memory not)
// is refused.
func TestAttackGangSizesApplyMemoryRoom(t *testing.T) {
	h := newHarness(t)
	w1 := h.Activate("m1", 4, 8)
	w2 := h.Activate("m2", 4, 8)
	b := agsLauncherAndRanks(h, 1, 7, 2, 1, 0)
	if res := h.Must(gangPlan(h, b, 1, [3]uint32{1, 1, w1}, [3]uint32{2, 2, w1})).(*PlanResult); res.Placed != 0 {
		t.Fatalf("9 GiB on a worker of 8: placed %d, want refused", res.Placed)
	}
	if res := h.Must(gangPlan(h, b, 1, [3]uint32{1, 1, w1}, [3]uint32{2, 1, w1}, [3]uint32{3, 1, w2})).(*PlanResult); res.Placed != 3 {
		t.Fatalf("a valid plan: %+v", res)
	}
}
