// Package local is the autoscaler's provider of the dev agent: a machine
// is a `drover worker` process on this machine, started with the cores and
// memory of its launch config. The dev agent scales from no worker at all
// to its caps and back. A launch config's capacity stands in for a
// cloud's: past it, a launch is refused for want of capacity, as GCE
// refuses one, so the dev agent shows what drover does then.
package local

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/drover-sched/drover/autoscaler/provider"
)

// Options shape the local provider.
type Options struct {
	// Binary is the drover executable the workers run.
	Binary string
	// Dir holds each machine's data dir.
	Dir string
	// Output receives the workers' logs (nil: discarded).
	Output io.Writer
	// Args are more flags for every worker (e.g. -log-level).
	Args   []string
	Logger *slog.Logger
}

// Local runs machines as worker processes. It implements provider.Provider.
type Local struct {
	opts     Options
	mu       sync.Mutex
	procs    map[string]*proc
	requests map[string]*provider.LaunchResult
	seq      int
}

type proc struct {
	inst provider.Instance
	cmd  *exec.Cmd
	done chan struct{}
}

var (
	_ provider.Provider       = (*Local)(nil)
	_ provider.CapacityHolder = (*Local)(nil)
)

// New makes a local provider.
func New(opts Options) *Local {
	if opts.Output == nil {
		opts.Output = io.Discard
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Local{opts: opts, procs: map[string]*proc{}, requests: map[string]*provider.LaunchResult{}}
}

// HoldsCapacity reports that the local provider honours launch config
// capacities (provider.CapacityHolder).
func (l *Local) HoldsCapacity() bool { return true }

// Launch starts one worker process per name; a request seen before
// returns its first result, and a name already running is not started
// again. A config with a capacity gets no more running machines than it:
// the rest are refused for want of capacity (all of them: a
// *provider.CapacityError).
func (l *Local) Launch(ctx context.Context, req *provider.LaunchRequest) (*provider.LaunchResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if res, ok := l.requests[req.RequestID]; ok && req.RequestID != "" {
		return provider.Finish(res, nil)
	}
	res := &provider.LaunchResult{}
	capacity, running := req.Config.Capacity, l.running(req.Config.Name)
	for _, name := range req.Names {
		if p, ok := l.procs[name]; ok {
			res.Created = append(res.Created, p.inst)
			continue
		}
		if capacity > 0 && running >= capacity {
			res.CapacityLimited = true
			res.Reason = fmt.Sprintf("local provider: launch config %s holds at most %s at once (capacity = %d); %d running",
				req.Config.Name, plural(capacity, "machine"), capacity, running)
			l.opts.Logger.Info("launch refused for want of capacity", "config", req.Config.Name, "capacity", capacity, "running", running,
				"refused", len(req.Names)-len(res.Created))
			break
		}
		tokenFile, err := l.writeJoinToken(req, name)
		if err != nil {
			if len(res.Created) == 0 {
				return nil, fmt.Errorf("local provider: %w", err)
			}
			break
		}
		args := provider.WorkerArgs(req, name)
		args = append(args, "-join-token-file", tokenFile, "-data-dir", filepath.Join(l.opts.Dir, name), "-parent-pid", strconv.Itoa(os.Getpid()))
		args = append(args, l.opts.Args...)
		cmd := exec.Command(l.opts.Binary, args...)
		cmd.Stdout, cmd.Stderr = l.opts.Output, l.opts.Output
		// Its own process group (a terminal's Ctrl-C reaches the agent,
		// which stops workers in order); killed with the agent.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			if len(res.Created) == 0 {
				return nil, fmt.Errorf("local provider: start worker %s: %w", name, err)
			}
			break
		}
		l.seq++
		p := &proc{inst: provider.Instance{Name: name, ID: fmt.Sprintf("pid-%d", cmd.Process.Pid), Config: req.Config.Name, Labels: req.Labels, Running: true},
			cmd: cmd, done: make(chan struct{})}
		go func() {
			_ = cmd.Wait()
			close(p.done)
		}()
		l.procs[name] = p
		running++
		res.Created = append(res.Created, p.inst)
		l.opts.Logger.Info("machine started", "machine", name, "pid", cmd.Process.Pid, "config", req.Config.Name)
	}
	l.requests[req.RequestID] = res
	return provider.Finish(res, nil)
}

// running counts the machines of a config whose worker process has not
// exited. The caller holds l.mu.
func (l *Local) running(config string) int {
	n := 0
	for _, p := range l.procs {
		if p.inst.Config != config {
			continue
		}
		select {
		case <-p.done:
		default:
			n++
		}
	}
	return n
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// writeJoinToken puts a machine's join token in its data dir, which only
// its worker's user may enter (not on its command line, which every
// process of the host can read), and returns the file's path.
func (l *Local) writeJoinToken(req *provider.LaunchRequest, name string) (string, error) {
	tok, err := req.JoinToken(name)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(l.opts.Dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("machine %s: %w", name, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", fmt.Errorf("machine %s: %w", name, err)
	}
	path := filepath.Join(dir, "join.token")
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("machine %s: write its join token: %w", name, err)
	}
	return path, nil
}

// Delete stops worker processes (SIGTERM to all, SIGKILL to those left
// after 10 s) and waits for them.
func (l *Local) Delete(ctx context.Context, names []string) error {
	l.mu.Lock()
	var stop []*proc
	for _, n := range names {
		if p, ok := l.procs[n]; ok {
			stop = append(stop, p)
			delete(l.procs, n)
		}
	}
	l.mu.Unlock()
	for _, p := range stop {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(10 * time.Second)
	for _, p := range stop {
		select {
		case <-p.done:
		case <-deadline:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		_ = os.RemoveAll(filepath.Join(l.opts.Dir, p.inst.Name))
		l.opts.Logger.Info("machine stopped", "machine", p.inst.Name)
	}
	return nil
}

// List returns the worker processes started and not deleted; one that
// exited on its own is listed as not running.
func (l *Local) List(ctx context.Context) ([]provider.Instance, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := make([]string, 0, len(l.procs))
	for n := range l.procs {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]provider.Instance, 0, len(names))
	for _, n := range names {
		p := l.procs[n]
		inst := p.inst
		select {
		case <-p.done:
			inst.Running = false
		default:
			inst.Running = true
		}
		out = append(out, inst)
	}
	return out, nil
}

// Stop stops every worker process (the agent is shutting down).
func (l *Local) Stop() {
	l.mu.Lock()
	names := make([]string, 0, len(l.procs))
	for n := range l.procs {
		names = append(names, n)
	}
	l.mu.Unlock()
	_ = l.Delete(context.Background(), names)
}
