// Package worker is the drover worker agent: it activates with the control
// plane, long-polls sync for assignments and kills, runs jobs through an
// Executor (as processes by default), ships their logs, and reports when
// attempts start and end. It talks to servers only over the public HTTP
// protocol, so a worker on this machine and one in another region behave the
// same.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/drover-sched/drover/api"
)

// Config configures a worker.
type Config struct {
	// Servers are the control-plane addresses, tried in turn.
	Servers []string
	// Name labels the machine; several workers may share it. A worker is
	// identified by the node ID kept in DataDir: activating again with it
	// retires the previous incarnation (and re-runs what it was running).
	Name string
	// CPU (cores) and Memory (bytes) offered to jobs.
	CPU    float64
	Memory int64
	// DataDir holds the worker's node ID and the jobs' working
	// directories. One worker process at a time may use it.
	DataDir string
	// Secret is the cluster's worker join secret.
	Secret string
	// SyncWait is how long the server may hold a sync open.
	SyncWait time.Duration
	// LogFlushInterval is how often running jobs' output is shipped.
	LogFlushInterval time.Duration
	// MaxLogBytes caps one attempt's log; output beyond it is dropped.
	MaxLogBytes int64
	// KillGrace is how long a job gets between SIGTERM and SIGKILL.
	KillGrace time.Duration
	// KeepWorkDirs keeps jobs' working directories after they end.
	KeepWorkDirs bool
	// Region, Cluster and Pool place the worker (empty: the servers'
	// "default"); Labels are free-form.
	Region  string
	Cluster string
	Pool    string
	Labels  map[string]string
	// GPUs of one type offered to jobs.
	GPUType string
	GPUs    int
	// Machine is the autoscaler's name for this machine (set by the
	// provider that launched it; empty for a worker started by hand).
	Machine string
	// Executor runs the jobs' commands; nil means a ProcessExecutor.
	Executor Executor
	Logger   *slog.Logger
}

// DefaultConfig returns defaults for a worker; set Servers, Name, CPU,
// Memory, DataDir and Secret.
func DefaultConfig() *Config {
	return &Config{
		SyncWait:         20 * time.Second,
		LogFlushInterval: time.Second,
		MaxLogBytes:      64 << 20,
		KillGrace:        5 * time.Second,
	}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Servers) == 0 {
		errs = append(errs, errors.New("config field Servers: at least one server address is required"))
	}
	if c.Name == "" {
		errs = append(errs, errors.New("config field Name is required"))
	}
	if c.CPU <= 0 {
		errs = append(errs, fmt.Errorf("config field CPU is %g; it must be positive", c.CPU))
	}
	if c.Memory <= 0 {
		errs = append(errs, fmt.Errorf("config field Memory is %d; it must be positive", c.Memory))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("config field DataDir is required"))
	}
	if c.Secret == "" {
		errs = append(errs, errors.New("config field Secret is required (the cluster's -worker-secret-file)"))
	}
	if c.SyncWait < 0 || c.LogFlushInterval <= 0 || c.KillGrace < 0 || c.MaxLogBytes <= 0 {
		errs = append(errs, errors.New("config fields SyncWait, LogFlushInterval, KillGrace and MaxLogBytes must be positive"))
	}
	return errors.Join(errs...)
}

// Worker runs jobs for the control plane.
type Worker struct {
	cfg    *Config
	log    *slog.Logger
	client *api.Client
	exec   Executor
	id     *identity

	mu       sync.Mutex
	tasks    map[api.AttemptRef]*task
	outbox   []api.AttemptEvent
	instance int64

	wake chan struct{}
	wg   sync.WaitGroup
}

// New returns a worker; Run starts it.
func New(cfg *Config) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("worker config: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ex := cfg.Executor
	if ex == nil {
		ex = &ProcessExecutor{}
	}
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "jobs"), 0o755); err != nil {
		return nil, fmt.Errorf("create worker data dir: %w", err)
	}
	id, err := claimIdentity(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	return &Worker{
		cfg:    cfg,
		id:     id,
		log:    log.With("worker", cfg.Name, "node", id.nodeID[:8]),
		client: api.NewClient(strings.Join(cfg.Servers, ","), ""),
		exec:   ex,
		tasks:  map[api.AttemptRef]*task{},
		wake:   make(chan struct{}, 1),
	}, nil
}

// Run activates and syncs until ctx ends. On the way out it kills running
// jobs and deactivates, so the control plane re-runs them elsewhere at once.
func (w *Worker) Run(ctx context.Context) error {
	defer w.shutdown()
	for ctx.Err() == nil {
		if err := w.activate(ctx); err != nil {
			return err
		}
		w.syncLoop(ctx)
	}
	return nil
}

// activate registers with the control plane, retrying until it works or the
// secret is refused.
func (w *Worker) activate(ctx context.Context) error {
	backoff := 200 * time.Millisecond
	// One token for every try: a retry whose first try was applied finds
	// the instance that try made.
	req := &api.ActivateRequest{
		Name: w.cfg.Name, NodeID: w.id.nodeID, PreviousToken: w.id.previousToken(), Token: api.NewToken(),
		CPU: w.cfg.CPU, Memory: w.cfg.Memory, Secret: w.cfg.Secret,
		Region: w.cfg.Region, Cluster: w.cfg.Cluster, Pool: w.cfg.Pool, Labels: w.cfg.Labels,
		GPUType: w.cfg.GPUType, GPUs: w.cfg.GPUs, Machine: w.cfg.Machine,
	}
	for {
		w.client.SetToken("")
		res, err := w.client.Activate(ctx, req)
		if err == nil {
			if err := w.id.keepToken(res.Token); err != nil {
				w.log.Warn("cannot keep the instance token; a quick restart may be refused as a duplicate", "err", err)
			}
			w.client.SetToken(res.Token)
			w.mu.Lock()
			w.instance = res.InstanceID
			w.mu.Unlock()
			w.log.Info("activated", "instance", res.InstanceID, "cpu", w.cfg.CPU, "memory", w.cfg.Memory)
			return nil
		}
		if api.IsStatus(err, http.StatusUnauthorized) || api.IsStatus(err, http.StatusForbidden) ||
			api.IsStatus(err, http.StatusConflict) || api.IsStatus(err, http.StatusBadRequest) {
			return fmt.Errorf("activation refused: %w", err)
		}
		if ctx.Err() != nil {
			return nil
		}
		w.log.Warn("activation failed; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// syncLoop syncs until ctx ends or the instance is retired.
func (w *Worker) syncLoop(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		req, covered := w.report()
		if len(req.Events) == 0 {
			req.WaitMillis = w.cfg.SyncWait.Milliseconds()
		}
		res, err := w.syncOnce(ctx, req)
		switch {
		case err == nil:
			backoff = 100 * time.Millisecond
		case ctx.Err() != nil:
			return
		case errors.Is(err, errInterrupted):
			continue
		case api.IsStatus(err, http.StatusGone), api.IsStatus(err, http.StatusUnauthorized):
			w.log.Warn("control plane no longer knows this instance; killing its jobs and activating again", "err", err)
			w.abandonAll("instance retired by the control plane")
			return
		default:
			w.log.Warn("sync failed; retrying", "err", err, "in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		if res.Retired {
			w.log.Warn("instance retired by the control plane; activating again")
			w.abandonAll("instance retired by the control plane")
			return
		}
		if res.Acked == len(req.Events) {
			w.ack(covered)
		}
		for _, k := range res.Kill {
			w.kill(k, "killed by the control plane")
		}
		for _, a := range res.Assign {
			w.start(a)
		}
	}
}

var errInterrupted = errors.New("sync interrupted by a new event")

// syncOnce sends one sync. A long-polling sync is cut short when a task
// produces an event, so completions are reported at once.
func (w *Worker) syncOnce(ctx context.Context, req *api.SyncRequest) (*api.SyncResponse, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	interrupted := make(chan struct{})
	if req.WaitMillis > 0 {
		go func() {
			select {
			case <-w.wake:
				close(interrupted)
				cancel()
			case <-rctx.Done():
			}
		}()
	}
	res, err := w.client.Sync(rctx, req)
	if err != nil {
		select {
		case <-interrupted:
			return nil, errInterrupted
		default:
		}
		return nil, err
	}
	return res, nil
}

// report builds a sync request: queued events and every attempt the worker
// holds (running, or finished with an event not yet acknowledged). It also
// returns how many queued events the request covers.
func (w *Worker) report() (*api.SyncRequest, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Drain a stale wake-up: the events it announced are in this report.
	select {
	case <-w.wake:
	default:
	}
	// A started event whose attempt has already completed adds nothing: the
	// completed event carries the start time.
	completed := map[api.AttemptRef]bool{}
	for _, e := range w.outbox {
		if e.Kind == api.EventCompleted {
			completed[e.AttemptRef] = true
		}
	}
	req := &api.SyncRequest{Events: make([]api.AttemptEvent, 0, len(w.outbox))}
	for _, e := range w.outbox {
		if e.Kind == api.EventStarted && completed[e.AttemptRef] {
			continue
		}
		req.Events = append(req.Events, e)
	}
	for ref := range w.tasks {
		req.Known = append(req.Known, ref)
	}
	return req, len(w.outbox)
}

// ack drops the first n queued events (the server committed the request
// that covered them) and forgets tasks whose completion is now recorded.
func (w *Worker) ack(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.outbox[:n] {
		if e.Kind == api.EventCompleted {
			delete(w.tasks, e.AttemptRef)
		}
	}
	w.outbox = append(w.outbox[:0], w.outbox[n:]...)
}

// emit queues an event and wakes the sync loop.
func (w *Worker) emit(e api.AttemptEvent) {
	w.mu.Lock()
	w.outbox = append(w.outbox, e)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Worker) start(a api.Assignment) {
	w.mu.Lock()
	if _, ok := w.tasks[a.AttemptRef]; ok {
		w.mu.Unlock()
		return
	}
	t := newTask(w, a)
	w.tasks[a.AttemptRef] = t
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t.run()
	}()
}

func (w *Worker) kill(ref api.AttemptRef, reason string) {
	w.mu.Lock()
	t := w.tasks[ref]
	w.mu.Unlock()
	if t != nil {
		t.kill(reason)
	}
}

// abandonAll kills every task and forgets them and their events: the
// control plane has already given up on these attempts.
func (w *Worker) abandonAll(reason string) {
	w.mu.Lock()
	tasks := make([]*task, 0, len(w.tasks))
	for _, t := range w.tasks {
		tasks = append(tasks, t)
	}
	w.mu.Unlock()
	for _, t := range tasks {
		t.abandon(reason)
	}
	w.wg.Wait()
	w.mu.Lock()
	w.tasks = map[api.AttemptRef]*task{}
	w.outbox = nil
	w.mu.Unlock()
}

func (w *Worker) shutdown() {
	defer w.id.release()
	w.abandonAll("worker shutting down")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w.mu.Lock()
	active := w.instance != 0
	w.mu.Unlock()
	if active {
		if err := w.client.Deactivate(ctx); err != nil && !api.IsStatus(err, http.StatusGone) {
			w.log.Warn("deactivate", "err", err)
		} else {
			w.log.Info("deactivated")
		}
	}
}

// Running returns the attempts the worker is running (tests).
func (w *Worker) Running() []api.AttemptRef {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []api.AttemptRef
	for ref, t := range w.tasks {
		if !t.finished() {
			out = append(out, ref)
		}
	}
	return out
}
