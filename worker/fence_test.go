package worker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server"
	"github.com/drover-sched/drover/testkit/faultnet"
	"github.com/drover-sched/drover/testkit/testlog"
)

// TestAWorkerCutOffFencesItself: a worker cut off from the servers by a
// partition (its link drops everything) stops its attempt within its
// lease, before the servers give the attempt up as lost and run it on
// another worker: the job's two attempts never run at once. When the
// link heals, the fenced worker comes back as a new instance and the
// job ends once, in success, on the other worker.
func TestAWorkerCutOffFencesItself(t *testing.T) {
	log := testlog.New(t)
	scfg := server.TestConfig(t.TempDir(), log)
	scfg.LostTimeout = 8 * time.Second // a lease of 6s, a fence grace of 1s
	srv, token, err := server.StartReady(scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	link := faultnet.New(t, srv.HTTPAddr())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jobs := sharedDir(t, 0o711)
	// The attempts' heartbeats, written where the test reads them.
	dir := sharedDir(t, 0o777)
	runWorker := func(name, addr string) *Worker {
		cfg := DefaultConfig()
		cfg.Servers = []string{"http://" + addr}
		cfg.Name, cfg.CPU, cfg.Memory = name, 1, 1<<30
		cfg.DataDir, cfg.JobsDir = t.TempDir(), jobs
		cfg.JobWritableDirs = []string{dir}
		cfg.Secret = "test-secret"
		cfg.SyncWait, cfg.LogFlushInterval, cfg.KillGrace = 2*time.Second, 100*time.Millisecond, 5*time.Second
		cfg.Logger = log.With("worker", name)
		w, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = w.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		return w
	}
	cutoff := runWorker("cut-off", link.Addr())
	client := api.NewClient("http://"+srv.HTTPAddr(), token)

	// Each attempt appends "attempt nanoseconds" to a file of its own
	// (attempts may run as different users) every 50ms for 16s.
	b, err := client.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: []api.JobSpec{sh(1,
		fmt.Sprintf(`i=0; while [ $i -lt 320 ]; do echo "$DROVER_ATTEMPT $(date +%%s%%N)" >> %s/beats.$DROVER_ATTEMPT; sleep 0.05; i=$((i+1)); done`, dir))}})
	if err != nil {
		t.Fatal(err)
	}
	beats := func() string {
		var all []byte
		for _, a := range []string{"1", "2", "3"} {
			data, _ := os.ReadFile(filepath.Join(dir, "beats."+a))
			all = append(all, data...)
		}
		return string(all)
	}
	waitUntil(t, "the first attempt to run on the worker that will be cut off", 30*time.Second, func() bool {
		return len(cutoff.Running()) == 1 && strings.Count(beats(), "\n") >= 5
	})
	link.Cut()
	runWorker("other", srv.HTTPAddr())
	waitUntil(t, "the second attempt to run on the other worker", 60*time.Second, func() bool {
		return strings.Contains(beats(), "2 ")
	})
	link.Heal()
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	done, err := client.WaitBatch(wctx, b.ID, nil)
	if err != nil || done.NSucceeded != 1 {
		t.Fatalf("batch: %+v (%v)", done, err)
	}
	last, first := map[string]int64{}, map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(beats()), "\n") {
		attempt, at, ok := strings.Cut(line, " ")
		ns, err := strconv.ParseInt(at, 10, 64)
		if !ok || err != nil {
			continue // a line cut short by the kill
		}
		last[attempt] = max(last[attempt], ns)
		if f, seen := first[attempt]; !seen || ns < f {
			first[attempt] = ns
		}
	}
	attempts := make([]string, 0, len(last))
	for a := range last {
		attempts = append(attempts, a)
	}
	sort.Strings(attempts)
	if len(attempts) != 2 || attempts[0] != "1" || attempts[1] != "2" {
		t.Fatalf("attempts that ran: %v", attempts)
	}
	if gap := time.Duration(first["2"] - last["1"]); gap <= 0 {
		t.Fatalf("attempt 1 still ran %s after attempt 2 started: the cut-off worker did not fence itself", -gap)
	} else {
		t.Logf("attempt 1's last beat came %s before attempt 2's first", gap)
	}
	if job, err := client.GetJob(ctx, b.ID, 1); err != nil || job.State != api.JobSuccess || len(job.Attempts) != 2 {
		t.Fatalf("job: %+v (%v)", job, err)
	}
}

// waitUntil waits up to limit for cond.
func waitUntil(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
