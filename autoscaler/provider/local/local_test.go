package local

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sched/drover/autoscaler"
	"github.com/drover-sched/drover/autoscaler/provider"
	"github.com/drover-sched/drover/testkit/testlog"
)

// standInEnv makes the test binary a stand-in for `drover worker`: the
// provider starts it as it starts a worker, and it writes its arguments
// to <data-dir>/args and runs until SIGTERM.
const standInEnv = "DROVER_LOCAL_TEST_STAND_IN"

func TestMain(m *testing.M) {
	if os.Getenv(standInEnv) != "" {
		os.Exit(standInWorker(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func standInWorker(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	i := slices.Index(args, "-data-dir")
	if i < 0 || i+1 >= len(args) {
		fmt.Fprintln(os.Stderr, "stand-in worker: no -data-dir")
		return 2
	}
	if err := os.WriteFile(filepath.Join(args[i+1], "args"), []byte(strings.Join(args, "\n")), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "stand-in worker:", err)
		return 1
	}
	<-ctx.Done()
	return 0
}

// newTestLocal makes a local provider whose workers are stand-ins, and
// stops them when the test ends.
func newTestLocal(t *testing.T) *Local {
	t.Helper()
	t.Setenv(standInEnv, "1")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	l := New(Options{Binary: self, Dir: t.TempDir(), Logger: testlog.New(t)})
	t.Cleanup(l.Stop)
	return l
}

// request asks for machines of a config, each with its join token.
func request(id string, cfg autoscaler.LaunchConfig, names ...string) *provider.LaunchRequest {
	req := &provider.LaunchRequest{Config: cfg, Names: names, RequestID: id, JoinTokens: map[string]string{},
		Worker: provider.Worker{Servers: "http://127.0.0.1:1"}}
	for _, n := range names {
		req.JoinTokens[n] = "token-of-" + n
	}
	return req
}

// waitStarted waits until a machine's stand-in worker has run and
// returns the arguments it was given.
func waitStarted(t *testing.T, l *Local, name string) []string {
	t.Helper()
	path := filepath.Join(l.opts.Dir, name, "args")
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			return strings.Split(string(b), "\n")
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker of machine %s never ran: %v", name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// names returns the names of instances.
func names(insts []provider.Instance) []string {
	var out []string
	for _, in := range insts {
		out = append(out, in.Name)
	}
	return out
}

// TestLaunchPastCapacityIsRefused: a config of capacity 2 asked for 3
// machines makes 2 (their workers really run) and says the rest were
// refused for want of capacity; asked for more while 2 run, it makes
// none (a *provider.CapacityError); once one is deleted, one more fits.
// A config without a capacity, and the same request asked again, are
// not held to it.
func TestLaunchPastCapacityIsRefused(t *testing.T) {
	l := newTestLocal(t)
	ctx := context.Background()
	small := autoscaler.LaunchConfig{Name: "small", CPUMilli: 2000, Memory: 1 << 30, Capacity: 2}

	res, err := l.Launch(ctx, request("r1", small, "m1", "m2", "m3"))
	if err != nil {
		t.Fatal(err)
	}
	if got := names(res.Created); !slices.Equal(got, []string{"m1", "m2"}) || !res.CapacityLimited {
		t.Fatalf("made %v (capacity-limited: %v); want m1 and m2 made and the rest refused", got, res.CapacityLimited)
	}
	for _, want := range []string{"launch config small", "at most 2 machines", "capacity = 2", "2 running"} {
		if !strings.Contains(res.Reason, want) {
			t.Fatalf("reason %q does not say %q", res.Reason, want)
		}
	}
	for _, in := range res.Created {
		args := waitStarted(t, l, in.Name)
		if i := slices.Index(args, "-machine"); i < 0 || args[i+1] != in.Name || !slices.Contains(args, "-join-token-file") {
			t.Fatalf("machine %s's worker ran with %q", in.Name, args)
		}
	}
	if _, err := os.Stat(filepath.Join(l.opts.Dir, "m3")); !os.IsNotExist(err) {
		t.Fatalf("the refused machine m3 has a data dir (err %v)", err)
	}

	// The same request again (a new leader finishing it): the same answer.
	again, err := l.Launch(ctx, request("r1", small, "m1", "m2", "m3"))
	if err != nil || !slices.Equal(names(again.Created), []string{"m1", "m2"}) || !again.CapacityLimited {
		t.Fatalf("the request repeated: %+v, %v", again, err)
	}

	// Full: nothing is made, and the error says why.
	_, err = l.Launch(ctx, request("r2", small, "m4"))
	reason, ok := provider.IsCapacity(err)
	if !ok || !strings.Contains(reason, "capacity = 2") {
		t.Fatalf("a launch into a full config: %v; want a capacity error", err)
	}

	// Another config has no capacity: it is not held to small's.
	other := autoscaler.LaunchConfig{Name: "other", CPUMilli: 1000, Memory: 1 << 30}
	res, err = l.Launch(ctx, request("r3", other, "o1", "o2", "o3"))
	if err != nil || len(res.Created) != 3 || res.CapacityLimited {
		t.Fatalf("a config without a capacity: %+v, %v; want all 3 made", res, err)
	}

	// One of small's machines deleted: room for one more, not two.
	if err := l.Delete(ctx, []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	res, err = l.Launch(ctx, request("r4", small, "m5", "m6"))
	if err != nil || !slices.Equal(names(res.Created), []string{"m5"}) || !res.CapacityLimited {
		t.Fatalf("after a delete: %+v, %v; want m5 made and m6 refused", res, err)
	}
	waitStarted(t, l, "m5")
	insts, err := l.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, in := range insts {
		if in.Config == "small" && in.Running {
			running++
		}
	}
	if running != 2 {
		t.Fatalf("%d of small's machines run; its capacity is 2: %+v", running, insts)
	}
}

// TestExitedWorkerFreesCapacity: a worker process that exited on its own
// no longer counts against its config's capacity (this machine has the
// room again), though the provider still lists it until it is deleted.
func TestExitedWorkerFreesCapacity(t *testing.T) {
	l := newTestLocal(t)
	ctx := context.Background()
	one := autoscaler.LaunchConfig{Name: "one", CPUMilli: 1000, Memory: 1 << 30, Capacity: 1}
	res, err := l.Launch(ctx, request("r1", one, "m1"))
	if err != nil || len(res.Created) != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
	waitStarted(t, l, "m1")
	if _, err := l.Launch(ctx, request("r2", one, "m2")); err == nil {
		t.Fatal("a second machine of a config of capacity 1 was made")
	}
	l.mu.Lock()
	p := l.procs["m1"]
	l.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.done
	res, err = l.Launch(ctx, request("r3", one, "m3"))
	if err != nil || len(res.Created) != 1 || res.CapacityLimited {
		t.Fatalf("after m1's worker exited: %+v, %v; want m3 made", res, err)
	}
}
