package placement

import (
	"strings"
	"testing"
)

// TestCheckSize: a job fits when one machine holds it whole; otherwise
// the refusal names the dimension and the largest machine offering it.
func TestCheckSize(t *testing.T) {
	const GiB = int64(1) << 30
	fleet := NewSizes([]Machine{
		{CPUMilli: 16000, Memory: 64 * GiB, Where: "launch config n2-standard-16 of cluster us-east1/a"},
		{CPUMilli: 4000, Memory: 128 * GiB, Where: "launch config m1-small of cluster us-east1/a"},
		{CPUMilli: 8000, Memory: 32 * GiB, GPUType: "a100", GPUs: 4, Where: "pool gpu of cluster us-east1/a"},
		{CPUMilli: 2000, Memory: 8 * GiB, Where: "worker w1 in cluster local"},
		{CPUMilli: 16000, Memory: 64 * GiB, Where: "worker w2 in cluster us-east1/a"}, // the same size again
	})
	if len(fleet) != 3 {
		t.Fatalf("sizes %+v, want the three no other holds", fleet)
	}
	for _, c := range []struct {
		name     string
		cpu, mem int64
		gpuType  string
		gpus     int64
		want     string // "": fits
	}{
		{"small", 1000, GiB, "", 0, ""},
		{"the largest by cores", 16000, 64 * GiB, "", 0, ""},
		{"the largest by memory", 4000, 128 * GiB, "", 0, ""},
		{"gpus", 8000, 32 * GiB, "a100", 4, ""},
		{"the issue's 8 EiB (the largest int64)", 1000, 1<<63 - 1, "", 0, "memory 8388608TiB is more than the largest machine offers (128GiB: launch config m1-small of cluster us-east1/a)"},
		{"cores", 17000, GiB, "", 0, "cpu 17 cores is more than the largest machine offers (16 cores: launch config n2-standard-16 of cluster us-east1/a)"},
		{"too many gpus", 1000, GiB, "a100", 8, "gpus 8 of type a100 is more than the largest machine offers (4: pool gpu of cluster us-east1/a)"},
		{"a gpu type nobody offers", 1000, GiB, "h100", 1, "gpu_type h100: no machine offers it (GPU types offered: a100)"},
		{"cores and memory not on one machine", 16000, 128 * GiB, "", 0, "no machine holds 16 cores with memory 128GiB: the machines with 16 cores offer at most 64GiB (launch config n2-standard-16 of cluster us-east1/a)"},
		{"gpus and memory not on one machine", 1000, 64 * GiB, "a100", 1, "no machine holds 1 cores and 1 a100 GPUs with memory 64GiB: the machines with 1 cores and 1 a100 GPUs offer at most 32GiB (pool gpu of cluster us-east1/a)"},
	} {
		err := fleet.CheckSize(c.cpu, c.mem, c.gpuType, c.gpus)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// No size known: no bound but the API's.
	if err := NewSizes(nil).CheckSize(1000, 1<<63-1, "h100", 64); err != nil {
		t.Fatalf("with no fleet: %v", err)
	}
}
