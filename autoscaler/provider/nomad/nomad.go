// Package nomad runs the autoscaler's machines on an existing Nomad
// cluster, through the official client (github.com/hashicorp/nomad/api):
// each machine is a Nomad job of one task group (count 1) that runs
// `drover worker` with the machine's cores and memory as its resources, so
// a Nomad fleet carries drover's work. A job per machine, not one job
// whose group count is scaled: Nomad chooses which allocations a lower
// count stops, and the autoscaler must stop the idle machine it chose, not
// a busy one. The job's ID is the machine's name, so registering it again
// (a new leader repeating a launch) changes nothing; a job Nomad can place
// nowhere (its evaluation fails for want of resources or quota) is
// removed and reported as capacity.
package nomad

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-sched/drover/autoscaler/provider"
)

// Options say which Nomad cluster carries the machines, and how a worker
// runs there.
type Options struct {
	Address     string
	Region      string
	Namespace   string
	Datacenters []string
	Token       string
	// Deployment is the value of drover's deployment label (job meta).
	Deployment string
	// Driver runs the worker (default raw_exec) from Binary (default
	// /usr/local/bin/drover on the Nomad clients).
	Driver string
	Binary string
	// MHzPerCore converts cores to Nomad's CPU shares (default 1000).
	MHzPerCore int
	// EvalTimeout bounds the wait for a job's first evaluation.
	EvalTimeout time.Duration
}

// Nomad is the provider. It implements provider.Provider.
type Nomad struct {
	opts   Options
	client *nomadapi.Client
}

var _ provider.Provider = (*Nomad)(nil)

// New connects to a Nomad cluster.
func New(opts Options) (*Nomad, error) {
	if opts.Deployment == "" {
		return nil, errors.New("nomad: Deployment is required")
	}
	if opts.Driver == "" {
		opts.Driver = "raw_exec"
	}
	if opts.Binary == "" {
		opts.Binary = "/usr/local/bin/drover"
	}
	if opts.MHzPerCore <= 0 {
		opts.MHzPerCore = 1000
	}
	if opts.EvalTimeout <= 0 {
		opts.EvalTimeout = 30 * time.Second
	}
	cfg := nomadapi.DefaultConfig()
	if opts.Address != "" {
		cfg.Address = opts.Address
	}
	cfg.Region, cfg.Namespace, cfg.SecretID = opts.Region, opts.Namespace, opts.Token
	c, err := nomadapi.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("nomad: client for %s: %w", cfg.Address, err)
	}
	return &Nomad{opts: opts, client: c}, nil
}

func (n *Nomad) write(ctx context.Context) *nomadapi.WriteOptions {
	return (&nomadapi.WriteOptions{Region: n.opts.Region, Namespace: n.opts.Namespace}).WithContext(ctx)
}

func (n *Nomad) query(ctx context.Context) *nomadapi.QueryOptions {
	return (&nomadapi.QueryOptions{Region: n.opts.Region, Namespace: n.opts.Namespace}).WithContext(ctx)
}

// job is the Nomad job of one machine; its worker finds the machine's
// join token in its task's environment (provider.JoinTokenEnv).
func (n *Nomad) job(req *provider.LaunchRequest, name, joinToken string) *nomadapi.Job {
	// The worker's data dir is its default (/var/lib/drover-worker-NAME
	// as root): a worker refuses one under a directory others may write,
	// as Nomad makes a task's local/ (0777).
	args := provider.WorkerArgs(req, name)
	meta := map[string]string{provider.LabelDeployment: n.opts.Deployment, provider.LabelMachine: name}
	for k, v := range req.Labels {
		meta[k] = v
	}
	cpu := int(req.Config.CPUMilli * int64(n.opts.MHzPerCore) / 1000)
	mem := int(req.Config.Memory >> 20)
	task := nomadapi.NewTask("worker", n.opts.Driver).
		SetConfig("command", n.opts.Binary).
		SetConfig("args", args).
		Require(&nomadapi.Resources{CPU: &cpu, MemoryMB: &mem})
	task.Env = map[string]string{provider.JoinTokenEnv: joinToken}
	group := nomadapi.NewTaskGroup("worker", 1).AddTask(task)
	job := nomadapi.NewServiceJob(name, name, n.opts.Region, 50).AddTaskGroup(group)
	job.Datacenters = n.opts.Datacenters
	if n.opts.Namespace != "" {
		job.Namespace = &n.opts.Namespace
	}
	job.Meta = meta
	return job
}

// Launch registers one job per name and waits for each first evaluation:
// a job placed nowhere for want of resources is deregistered, and the
// launch is capacity-limited from there on.
func (n *Nomad) Launch(ctx context.Context, req *provider.LaunchRequest) (*provider.LaunchResult, error) {
	res := &provider.LaunchResult{}
	var lastErr error
	for _, name := range req.Names {
		joinToken, err := req.JoinToken(name)
		if err != nil {
			lastErr = fmt.Errorf("nomad: register %s: %w", name, err)
			continue
		}
		reg, _, err := n.client.Jobs().Register(n.job(req, name, joinToken), n.write(ctx))
		if err != nil {
			lastErr = fmt.Errorf("nomad: register %s: %w", name, err)
			continue
		}
		if reason, failed, err := n.placed(ctx, reg.EvalID); err != nil {
			lastErr = err
			continue
		} else if failed != placedOK {
			if _, _, err := n.client.Jobs().Deregister(name, true, n.write(ctx)); err != nil {
				lastErr = fmt.Errorf("nomad: deregister %s placed nowhere: %w", name, err)
			}
			if failed == placedNever && len(res.Created) == 0 {
				// No node could ever take it: a configuration error, not
				// capacity (which comes back).
				return nil, &provider.ConfigError{Reason: reason}
			}
			res.CapacityLimited, res.Reason = true, reason
			break
		}
		res.Created = append(res.Created, provider.Instance{Name: name, ID: name, Config: req.Config.Name, Labels: req.Labels})
	}
	return provider.Finish(res, lastErr)
}

// placement is what an evaluation did with a machine's job.
type placement int

const (
	placedOK placement = iota
	// placedFull: the nodes that could run it are full (capacity).
	placedFull
	// placedNever: no node can ever run it (every one filtered out by a
	// constraint or for a missing driver).
	placedNever
)

// placed waits for an evaluation to finish (Nomad answers "pending" at
// first) and says whether it left the group unplaced, how, and why.
func (n *Nomad) placed(ctx context.Context, evalID string) (string, placement, error) {
	if evalID == "" {
		return "", placedOK, nil
	}
	deadline := time.Now().Add(n.opts.EvalTimeout)
	for {
		ev, _, err := n.client.Evaluations().Info(evalID, n.query(ctx))
		if err != nil {
			return "", placedOK, fmt.Errorf("nomad: evaluation %s: %w", evalID, err)
		}
		if ev.Status == "complete" || ev.Status == "failed" || ev.Status == "canceled" {
			for _, m := range ev.FailedTGAllocs {
				if m.NodesExhausted == 0 && len(m.QuotaExhausted) == 0 && (m.NodesFiltered > 0 || len(m.ConstraintFiltered) > 0 || len(m.ClassFiltered) > 0) {
					var why []string
					for c, k := range m.ConstraintFiltered {
						why = append(why, fmt.Sprintf("%s on %d", c, k))
					}
					for c, k := range m.ClassFiltered {
						why = append(why, fmt.Sprintf("class %s on %d", c, k))
					}
					slices.Sort(why)
					return fmt.Sprintf("NOMAD_PLACEMENT_IMPOSSIBLE: %d of %d nodes filtered out (%s)", m.NodesFiltered, m.NodesEvaluated, strings.Join(why, ", ")), placedNever, nil
				}
				var dims []string
				for d := range m.DimensionExhausted {
					dims = append(dims, d)
				}
				dims = append(dims, m.QuotaExhausted...)
				slices.Sort(dims)
				return fmt.Sprintf("NOMAD_PLACEMENT_FAILED: %d nodes exhausted (%s)", m.NodesExhausted, strings.Join(dims, ", ")), placedFull, nil
			}
			return "", placedOK, nil
		}
		if time.Now().After(deadline) {
			return "", placedOK, fmt.Errorf("nomad: evaluation %s still %s after %s", evalID, ev.Status, n.opts.EvalTimeout)
		}
		select {
		case <-ctx.Done():
			return "", placedOK, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Delete deregisters (and purges) machines' jobs; one already gone is not
// an error.
func (n *Nomad) Delete(ctx context.Context, names []string) error {
	var errs []error
	for _, name := range names {
		if _, _, err := n.client.Jobs().Deregister(name, true, n.write(ctx)); err != nil && !strings.Contains(err.Error(), "404") {
			errs = append(errs, fmt.Errorf("nomad: deregister %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// List returns this deployment's machines: jobs whose meta carries its
// label. A machine whose worker allocation runs is up.
func (n *Nomad) List(ctx context.Context) ([]provider.Instance, error) {
	stubs, _, err := n.client.Jobs().ListOptions(&nomadapi.JobListOptions{Fields: &nomadapi.JobListFields{Meta: true}}, n.query(ctx))
	if err != nil {
		return nil, fmt.Errorf("nomad: list jobs: %w", err)
	}
	var out []provider.Instance
	for _, j := range stubs {
		if j.Meta[provider.LabelDeployment] != n.opts.Deployment || j.Stop {
			continue
		}
		running := false
		if j.JobSummary != nil {
			running = j.JobSummary.Summary["worker"].Running > 0
		}
		out = append(out, provider.Instance{Name: j.ID, ID: j.ID, Config: j.Meta[provider.LabelConfig], Labels: j.Meta, Running: running})
	}
	return out, nil
}
