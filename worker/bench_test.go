package worker

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/testlog"
	"github.com/drover-sched/drover/worker/cgroups"
)

// BenchmarkAttemptProcess times what a worker does for one `true` job on
// its machine, without the control plane: the sandbox (directory, user,
// cgroup) when the worker isolates jobs, the process, its usage, and the
// cleanup. -benchtime and -cpu as usual; it reports the worker's own CPU
// and the children's per job.
func BenchmarkAttemptProcess(b *testing.B) {
	for _, c := range []struct {
		name    string
		isolate bool
		network string
	}{{"plain", false, ""}, {"isolated/host", true, api.NetworkHost}, {"isolated/none", true, api.NetworkNone}, {"isolated/bridge", true, api.NetworkBridge}} {
		b.Run(c.name, func(b *testing.B) {
			if c.isolate && os.Geteuid() != 0 {
				b.Skip("isolation needs root")
			}
			data := b.TempDir()
			jobs, err := os.MkdirTemp("", "drover-bench-jobs-")
			if err != nil {
				b.Fatal(err)
			}
			defer os.RemoveAll(jobs)
			os.Chmod(jobs, 0o711)
			cfg := DefaultConfig()
			cfg.DataDir, cfg.JobsDir, cfg.Logger = data, filepath.Join(jobs, "j"), testlog.New(b)
			cfg.UIDLeaseDir = filepath.Join(data, "uids")
			sb, err := openSandbox(cfg, testNodeID(b), c.isolate, cfg.Logger)
			if err != nil {
				b.Fatal(err)
			}
			defer sb.close()
			ex := &ProcessExecutor{}
			a := api.Assignment{AttemptRef: api.AttemptRef{BatchID: 1, JobID: 1, Attempt: 1}, Command: []string{"true"}, CPU: 1, Memory: 16 << 20, Network: c.network}
			var self0, self1, kids0, kids1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
			syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				a.JobID = int64(i + 1)
				bx, err := sb.prepare(a)
				if err != nil {
					b.Fatal(err)
				}
				spec := Spec{Ref: a.AttemptRef, Command: a.Command, Dir: bx.dir, UID: bx.uid(), GID: bx.uid(), Cgroup: bx.slot}
				if bx.jail != nil {
					spec.Start = bx.start
				}
				h, err := ex.Start(context.Background(), spec, io.Discard)
				if err != nil {
					b.Fatal(err)
				}
				if res, err := h.Wait(); err != nil || res.ExitCode != 0 {
					b.Fatal(res, err)
				}
				if bx.slot != nil {
					if _, err := bx.slot.Usage(); err != nil {
						b.Fatal(err)
					}
					if _, err := bx.slot.OOMKilled(); err != nil {
						b.Fatal(err)
					}
				}
				bx.release(false)
			}
			b.StopTimer()
			syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
			syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids1)
			cpu := func(a, b syscall.Rusage) float64 {
				return float64(b.Utime.Nano()+b.Stime.Nano()-a.Utime.Nano()-a.Stime.Nano()) / 1000
			}
			b.ReportMetric(cpu(self0, self1)/float64(b.N), "self-µs/op")
			b.ReportMetric(cpu(kids0, kids1)/float64(b.N), "child-µs/op")
		})
	}
}

// BenchmarkAttemptContainer times one `true` container of a cached image,
// one at a time, as the worker runs it: the sandbox, the bundle and its
// overlay root filesystem, `runc run`, and the cleanup. It reports the
// worker's own CPU and its children's (runc's) per container.
func BenchmarkAttemptContainer(b *testing.B) {
	_, ref := jobtoolRef(b)
	r := newContainerRig(b)
	img, err := r.store.Get(context.Background(), ref)
	if err != nil {
		b.Fatal(err)
	}
	defer img.Release()
	var self0, self1, kids0, kids1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lease, err := r.uids.lease()
		if err != nil {
			b.Fatal(err)
		}
		slot, err := r.cg.Acquire(cgroups.Limits{CPUMilli: 1000, Memory: 64 << 20})
		if err != nil {
			b.Fatal(err)
		}
		h, err := r.ex.Start(context.Background(), Spec{Ref: api.AttemptRef{BatchID: 1, JobID: int64(i + 1), Attempt: 1}, Command: []string{"jobtool", "true"},
			Dir: r.jobs, UID: lease.uid, GID: lease.uid, Cgroup: slot, Image: img, Network: api.NetworkNone}, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		if res, err := h.Wait(); err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
		slot.Release()
		lease.release()
	}
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids1)
	cpu := func(a, b syscall.Rusage) float64 {
		return float64(b.Utime.Nano()+b.Stime.Nano()-a.Utime.Nano()-a.Stime.Nano()) / 1000
	}
	b.ReportMetric(cpu(self0, self1)/float64(b.N), "self-µs/op")
	b.ReportMetric(cpu(kids0, kids1)/float64(b.N), "child-µs/op")
}

// BenchmarkJailMake times making and destroying a jail of each network
// mode (its thread, namespaces, veth and cgroup slot): what a job start
// would pay without the pool.
func BenchmarkJailMake(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("jails need root")
	}
	for _, mode := range []string{api.NetworkHost, api.NetworkNone, api.NetworkBridge} {
		b.Run(mode, func(b *testing.B) {
			data := b.TempDir()
			cfg := DefaultConfig()
			cfg.DataDir, cfg.Logger = data, testlog.New(b)
			cfg.JobsDir, cfg.UIDLeaseDir = sharedDir(b, 0o711), filepath.Join(data, "uids")
			sb, err := openSandbox(cfg, testNodeID(b), true, cfg.Logger)
			if err != nil {
				b.Fatal(err)
			}
			defer sb.close()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				j, err := sb.jails.make(mode, cgroups.Limits{CPUMilli: 1000, Memory: 16 << 20, Pids: 64})
				if err != nil {
					b.Fatal(err)
				}
				sb.jails.destroy(j)
			}
		})
	}
}
