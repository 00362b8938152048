package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestTwoWorkersOnOneHostShareAName: two workers with one name (as two
// `drover worker` processes on one host without -name) and their own data
// dirs are two nodes. Before node IDs, each activation retired the other,
// every job was lost again and again, and the batch never completed.
func TestTwoWorkersOnOneHostShareAName(t *testing.T) {
	e := start(t, nil)
	e.second(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if insts := e.waitActive(ctx, t, 2); insts[0].NodeID == insts[1].NodeID || insts[0].Name != insts[1].Name {
		t.Fatalf("instances %+v: want one name and two node IDs", insts)
	}
	arr := api.JobSpec{JobID: 1, Count: 300, Command: []string{"true"}, CPU: 0.1, Memory: 16 << 20}
	b := e.run(arr)
	if b.NSucceeded != 300 {
		t.Fatalf("batch: %+v", b)
	}
	jobs, err := e.client.ListJobs(ctx, b.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Jobs {
		if len(j.Attempts) != 1 {
			t.Fatalf("job %d took %d attempts: %+v", j.JobID, len(j.Attempts), j.Attempts)
		}
	}
	insts, err := e.client.ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 2 {
		t.Fatalf("%d instances after the batch (each activation retiring the other?): %+v", len(insts), insts)
	}
}

// waitActive waits until the server knows exactly n instances, all active,
// and returns them; any other count past the deadline (or more than n at
// any time: instances retiring each other) fails the test.
func (e *env) waitActive(ctx context.Context, t *testing.T, n int) []api.Instance {
	t.Helper()
	for {
		insts, err := e.client.ListInstances(ctx)
		if err != nil {
			t.Fatal(err)
		}
		active := 0
		for _, in := range insts {
			if in.Active {
				active++
			}
		}
		if len(insts) == n && active == n {
			return insts
		}
		if len(insts) > n || ctx.Err() != nil {
			t.Fatalf("want %d active instances: %+v", n, insts)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// second starts another worker like e's, with its own data dir, changed
// by the options.
func (e *env) second(t *testing.T, dir string, options ...func(*Config)) (*Worker, <-chan error) {
	t.Helper()
	cfg := *e.worker.cfg
	cfg.DataDir = dir
	for _, o := range options {
		o(&cfg)
	}
	w, err := New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, stopped := make(chan error, 1), make(chan struct{})
	go func() {
		done <- w.Run(ctx)
		close(stopped)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Error("second worker did not stop")
		}
	})
	return w, done
}

// TestOneDataDirOneWorker: a second worker on a data dir in use is refused
// at once, with an error that says what to do.
func TestOneDataDirOneWorker(t *testing.T) {
	e := start(t, nil)
	cfg := *e.worker.cfg
	_, err := New(&cfg)
	if err == nil || !strings.Contains(err.Error(), "is in use by another drover worker") || !strings.Contains(err.Error(), "own -data-dir") {
		t.Fatalf("second worker on %s: %v", cfg.DataDir, err)
	}
}

// TestLiveNodeIDIsNotTakenOver: a worker whose node ID is live elsewhere (a
// copied data dir) is refused by the server with 409 and stops, instead of
// retiring the live worker.
func TestLiveNodeIDIsNotTakenOver(t *testing.T) {
	e := start(t, nil)
	dir := t.TempDir()
	id, err := os.ReadFile(filepath.Join(e.dir, nodeIDFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, nodeIDFile), id, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.waitActive(ctx, t, 1)
	// The copy runs on another host in real life. Here it runs without
	// jails: on one host, its job bridge would be refused at once, the
	// live worker's node holding it (TestBridgeLeftoversAreRemoved).
	_, done := e.second(t, dir, func(c *Config) { c.Isolation = IsolationNone })
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "is in use by instance") {
			t.Fatalf("second worker: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the second worker was not refused")
	}
	insts, err := e.client.ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 1 || !insts[0].Active {
		t.Fatalf("instances: %+v", insts)
	}
}
