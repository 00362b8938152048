// Package provider is the seam between the autoscaler's decisions and the
// clouds that carry them out. Each provider (local processes, a simulated
// cloud, GCE, Nomad) makes, lists and deletes machines that run a drover
// worker; the machines carry drover's labels so a new leader can find
// every machine it owns, and each launch carries an idempotency key so a
// request repeated after a leader change makes nothing twice.
package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/drover-sched/drover/autoscaler"
	"github.com/drover-sched/drover/money"
)

// Labels every machine carries.
const (
	LabelDeployment = "drover-deployment"
	LabelMachine    = "drover-machine"
	LabelCluster    = "drover-cluster"
	LabelConfig     = "drover-config"
)

// Instance is a machine as the provider knows it.
type Instance struct {
	// Name is drover's machine ID (the worker's -machine).
	Name string
	// ID is the provider's own (an instance ID, an allocation ID).
	ID     string
	Config string
	Labels map[string]string
	// Running: the machine is up (a probe that succeeded).
	Running bool
	// Preempted: a spot machine the cloud reclaimed.
	Preempted bool
}

// Worker tells a new machine how its drover worker reaches the servers.
// It carries no credential: each machine joins with its own one-time
// token (LaunchRequest.JoinTokens), never with the worker secret, which
// whatever runs on the machine could read where the provider puts it.
type Worker struct {
	Servers    string // comma-separated server addresses
	Region     string
	Cluster    string
	Pool       string
	ExtraFlags []string
}

// LaunchRequest asks for one machine per name, of one config.
type LaunchRequest struct {
	Config autoscaler.LaunchConfig
	Names  []string
	// RequestID is the idempotency key, derived from the Raft entry that
	// decided the launch: the same request again (a new leader finishing
	// what the old one started) returns what the first made.
	RequestID string
	Labels    map[string]string
	Worker    Worker
	// JoinTokens holds each machine's one-time join token, by name: the
	// provider hands a machine its own (and nothing else gets it), and
	// the worker joins with it (-join-token-file, or JoinTokenEnv). The
	// same request repeated carries the same tokens.
	JoinTokens map[string]string
}

// JoinTokenEnv is the environment variable a worker reads its machine's
// join token from when it has no -join-token-file (a Nomad task's
// environment).
const JoinTokenEnv = "DROVER_JOIN_TOKEN"

// JoinToken returns the join token of a machine of the request, or an
// error when the request has none for it (such a machine could not join:
// better not made).
func (r *LaunchRequest) JoinToken(name string) (string, error) {
	if tok := r.JoinTokens[name]; tok != "" {
		return tok, nil
	}
	return "", fmt.Errorf("launch request %s has no join token for machine %s", r.RequestID, name)
}

// LaunchResult is what a launch made: possibly fewer machines than asked.
type LaunchResult struct {
	Created []Instance
	// CapacityLimited: the provider could not make them all for want of
	// capacity or quota (Reason says which); the config should be skipped
	// for a while.
	CapacityLimited bool
	Reason          string
}

// Provider makes, lists and deletes machines.
type Provider interface {
	// Launch makes the machines of a request. An error means nothing was
	// made (or the provider cannot say); a *CapacityError, that the
	// provider refused for capacity or quota.
	Launch(ctx context.Context, req *LaunchRequest) (*LaunchResult, error)
	// Delete removes machines by name; a name the provider does not know
	// is not an error.
	Delete(ctx context.Context, names []string) error
	// List returns every machine carrying this deployment's labels.
	List(ctx context.Context) ([]Instance, error)
}

// CapacityError is a launch refused for want of capacity or quota (GCE's
// ZONE_RESOURCE_POOL_EXHAUSTED or QUOTA_EXCEEDED, a Nomad placement
// failure).
type CapacityError struct {
	Reason string
}

func (e *CapacityError) Error() string { return "capacity: " + e.Reason }

// CapacityHolder is a provider that holds each launch config to the
// capacity it declares (autoscaler.LaunchConfig.Capacity) and refuses a
// launch past it as a cloud out of capacity does: the local provider,
// whose "cloud" is this machine. A real cloud's capacity is its own;
// placement apply refuses a capacity on a cluster whose provider is not
// a CapacityHolder, and such a provider ignores one it is given.
type CapacityHolder interface {
	// HoldsCapacity reports whether the provider honours capacities.
	HoldsCapacity() bool
}

// Zoner is a provider that can list the zones it launches in (GCE): a
// launch config naming another is refused when it is applied.
type Zoner interface {
	Zones(ctx context.Context) ([]string, error)
}

// ConfigError is a launch the provider can never fill as configured (a
// constraint no node meets, a task driver no node has): not capacity,
// which comes back; the config waits for an operator.
type ConfigError struct {
	Reason string
}

func (e *ConfigError) Error() string { return "configuration: " + e.Reason }

// IsConfig reports whether err is a *ConfigError, and its reason.
func IsConfig(err error) (string, bool) {
	var ce *ConfigError
	if errors.As(err, &ce) {
		return ce.Reason, true
	}
	return "", false
}

// IsCapacity reports whether err is a *CapacityError, and its reason.
func IsCapacity(err error) (string, bool) {
	var ce *CapacityError
	if errors.As(err, &ce) {
		return ce.Reason, true
	}
	return "", false
}

// Finish is what a provider's Launch answers after trying every name:
// what it made (possibly part: then CapacityLimited says whether the rest
// were refused), a *CapacityError when it made nothing for want of
// capacity, or the last error when it made nothing otherwise.
func Finish(res *LaunchResult, lastErr error) (*LaunchResult, error) {
	if len(res.Created) == 0 {
		if res.CapacityLimited {
			return nil, &CapacityError{Reason: res.Reason}
		}
		if lastErr != nil {
			return nil, lastErr
		}
	}
	return res, nil
}

// WorkerArgs are the flags of `drover worker` for a machine of the
// request: the servers and where the machine is from the request's
// Worker, its size from its launch config. Its credential is not among
// them: each provider adds how the machine's join token reaches it.
func WorkerArgs(req *LaunchRequest, name string) []string {
	w, c := &req.Worker, &req.Config
	args := []string{"worker", "-servers", w.Servers, "-name", name, "-machine", name,
		"-cores", fmt.Sprintf("%g", float64(c.CPUMilli)/1000), "-memory", fmt.Sprintf("%dB", c.Memory)}
	if w.Region != "" {
		args = append(args, "-region", w.Region)
	}
	if w.Cluster != "" {
		args = append(args, "-cluster", w.Cluster)
	}
	if w.Pool != "" {
		args = append(args, "-pool", w.Pool)
	}
	if c.GPUs > 0 {
		args = append(args, "-gpus", fmt.Sprintf("%s:%d", c.GPUType, c.GPUs))
	}
	return append(args, w.ExtraFlags...)
}

// Pricer is a provider that can say what the cloud charges for its
// machines now (GCE, through the Cloud Billing Catalog; the simulated
// cloud, replaying its price changes). The leader asks it every
// AutoscaleConfig.PriceRefresh for the launch configs that take the
// cloud's price (price_from_cloud) and records what changed in the state,
// where ranking and billing read it.
type Pricer interface {
	// Prices returns each config's price per hour, in the order asked; 0
	// for a config the cloud has no price for (it is not launched until
	// it has one). An error means none could be read.
	Prices(ctx context.Context, configs []autoscaler.LaunchConfig) ([]money.Rate, error)
}
