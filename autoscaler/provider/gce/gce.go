// Package gce makes the autoscaler's machines on Google Compute Engine
// through the official client (cloud.google.com/go/compute): instances
// inserted one per machine with an idempotency key (GCE's requestId) made
// from the launch request's, labelled with drover's labels and found
// again by an aggregated list filtered on them; spot machines are
// provisioned SPOT and stop when preempted; capacity and quota errors
// (ZONE_RESOURCE_POOL_EXHAUSTED, QUOTA_EXCEEDED, ...) are reported as
// such, so the autoscaler marks the config capacity-limited.
package gce

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"

	"github.com/drover-sched/drover/autoscaler/provider"
)

// Options say where and how machines are made.
type Options struct {
	Project string
	// Deployment is the value of drover's deployment label: List finds
	// this deployment's machines by it.
	Deployment string
	// Image is the boot disk's source image, with drover installed at
	// Binary (default /usr/local/bin/drover).
	Image  string
	Binary string
	// Network of the machines (default global/networks/default).
	Network string
	// InstanceTemplate, when set, is the template instances are made
	// from (machine type, labels and metadata are still set per launch).
	InstanceTemplate string
	// Endpoint and ClientOptions reach the API (tests point them at a
	// fake; production uses application default credentials).
	ClientOptions []option.ClientOption
}

// GCE is the provider. It implements provider.Provider.
type GCE struct {
	opts      Options
	instances *compute.InstancesClient
	zones     *compute.ZonesClient
	mu        sync.Mutex
	zoneOf    map[string]string // machine name -> zone, as last listed or made
}

var _ provider.Provider = (*GCE)(nil)

// New connects to the Compute API.
func New(ctx context.Context, opts Options) (*GCE, error) {
	if opts.Project == "" || opts.Deployment == "" {
		return nil, errors.New("gce: Project and Deployment are required")
	}
	if opts.Binary == "" {
		opts.Binary = "/usr/local/bin/drover"
	}
	if opts.Network == "" {
		opts.Network = "global/networks/default"
	}
	inst, err := compute.NewInstancesRESTClient(ctx, opts.ClientOptions...)
	if err != nil {
		return nil, fmt.Errorf("gce: instances client: %w", err)
	}
	zones, err := compute.NewZonesRESTClient(ctx, opts.ClientOptions...)
	if err != nil {
		inst.Close()
		return nil, fmt.Errorf("gce: zones client: %w", err)
	}
	return &GCE{opts: opts, instances: inst, zones: zones, zoneOf: map[string]string{}}, nil
}

// Close releases the clients.
func (g *GCE) Close() error {
	return errors.Join(g.instances.Close(), g.zones.Close())
}

// Zones lists the project's zones that are up, so configs naming another
// can be refused.
func (g *GCE) Zones(ctx context.Context) ([]string, error) {
	it := g.zones.List(ctx, &computepb.ListZonesRequest{Project: g.opts.Project})
	var out []string
	for {
		z, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("gce: list zones: %w", err)
		}
		if z.GetStatus() == "UP" {
			out = append(out, z.GetName())
		}
	}
	return out, nil
}

// capacityCodes are the operation error codes that mean the cloud could
// not make the machine for want of capacity or quota.
var capacityCodes = []string{"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "QUOTA_EXCEEDED",
	"RESOURCE_POOL_EXHAUSTED", "STOCKOUT"}

// capacityReason says whether err is a refusal for capacity or quota, and
// which.
func capacityReason(err error) (string, bool) {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		for _, e := range ge.Errors {
			// rateLimitExceeded is the API's request rate (its message
			// names the "Queries" quota metric), not the project's
			// resources: the launch is asked again at a later round, and
			// the config is not marked.
			if e.Reason == "quotaExceeded" {
				return "QUOTA_EXCEEDED", true
			}
		}
	}
	msg := err.Error()
	for _, c := range capacityCodes {
		if strings.Contains(msg, c) {
			return c, true
		}
	}
	return "", false
}

// opError is an operation's error, if it finished with one.
func opError(op *computepb.Operation) error {
	if e := op.GetError(); e != nil && len(e.GetErrors()) > 0 {
		var parts []string
		for _, x := range e.GetErrors() {
			parts = append(parts, x.GetCode()+": "+x.GetMessage())
		}
		return errors.New(strings.Join(parts, "; "))
	}
	return nil
}

// RequestID is the GCE requestId of one machine of a launch request: a
// UUID from the request's key and the machine's name, the same on every
// leader.
func RequestID(key, name string) string {
	sum := sha1.Sum([]byte(key + "/" + name))
	sum[6] = sum[6]&0x0f | 0x50
	sum[8] = sum[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
}

// Launch inserts one instance per name and waits for the operations. A
// name that exists already (an earlier leader made it) counts as made.
func (g *GCE) Launch(ctx context.Context, req *provider.LaunchRequest) (*provider.LaunchResult, error) {
	res := &provider.LaunchResult{}
	var lastErr error
	for _, name := range req.Names {
		inst, err := g.insert(ctx, req, name)
		if err != nil {
			if reason, ok := capacityReason(err); ok {
				res.CapacityLimited, res.Reason = true, reason
				break
			}
			lastErr = err
			continue
		}
		res.Created = append(res.Created, inst)
	}
	return provider.Finish(res, lastErr)
}

func (g *GCE) insert(ctx context.Context, req *provider.LaunchRequest, name string) (provider.Instance, error) {
	c := &req.Config
	zone := c.Zone
	labels := map[string]string{}
	for k, v := range req.Labels {
		labels[k] = labelValue(v)
	}
	labels[provider.LabelDeployment] = labelValue(g.opts.Deployment)
	labels[provider.LabelMachine] = labelValue(name)
	joinToken, err := req.JoinToken(name)
	if err != nil {
		return provider.Instance{}, fmt.Errorf("gce: insert %s: %w", name, err)
	}
	script := startupScript(g.opts.Binary, req, name)
	in := &computepb.Instance{
		Name:        proto.String(name),
		MachineType: proto.String(fmt.Sprintf("zones/%s/machineTypes/%s", zone, c.MachineType)),
		Labels:      labels,
		Metadata: &computepb.Metadata{Items: []*computepb.Items{
			{Key: proto.String("startup-script"), Value: proto.String(script)},
			{Key: proto.String(MetadataJoinToken), Value: proto.String(joinToken)},
		}},
	}
	if g.opts.InstanceTemplate == "" {
		in.Disks = []*computepb.AttachedDisk{{Boot: proto.Bool(true), AutoDelete: proto.Bool(true),
			InitializeParams: &computepb.AttachedDiskInitializeParams{SourceImage: proto.String(g.opts.Image)}}}
		in.NetworkInterfaces = []*computepb.NetworkInterface{{Network: proto.String(g.opts.Network)}}
	}
	if c.Spot {
		in.Scheduling = &computepb.Scheduling{ProvisioningModel: proto.String("SPOT"), InstanceTerminationAction: proto.String("STOP")}
	}
	ir := &computepb.InsertInstanceRequest{Project: g.opts.Project, Zone: zone, InstanceResource: in, RequestId: proto.String(RequestID(req.RequestID, name))}
	if g.opts.InstanceTemplate != "" {
		ir.SourceInstanceTemplate = proto.String(g.opts.InstanceTemplate)
	}
	op, err := g.instances.Insert(ctx, ir)
	if err != nil {
		var ge *googleapi.Error
		if errors.As(err, &ge) && ge.Code == 409 {
			// Made before (by a leader whose answer was lost).
			return g.remember(name, zone, c.Name, labels), nil
		}
		if errors.As(err, &ge) && slices.ContainsFunc(ge.Errors, func(e googleapi.ErrorItem) bool { return e.Reason == "rateLimitExceeded" }) {
			return provider.Instance{}, fmt.Errorf("gce: insert %s in %s: the Compute API's request rate limit (asked again at the next round, not a capacity refusal): %w", name, zone, err)
		}
		return provider.Instance{}, fmt.Errorf("gce: insert %s in %s: %w", name, zone, err)
	}
	if err := op.Wait(ctx); err != nil {
		return provider.Instance{}, fmt.Errorf("gce: insert %s in %s: %w", name, zone, err)
	}
	if err := opError(op.Proto()); err != nil {
		return provider.Instance{}, fmt.Errorf("gce: insert %s in %s: %w", name, zone, err)
	}
	return g.remember(name, zone, c.Name, labels), nil
}

func (g *GCE) remember(name, zone, config string, labels map[string]string) provider.Instance {
	g.mu.Lock()
	g.zoneOf[name] = zone
	g.mu.Unlock()
	return provider.Instance{Name: name, ID: zone + "/" + name, Config: config, Labels: labels}
}

// labelValue makes a value GCE accepts in a label: lowercase letters,
// digits, '-' and '_', at most 63.
func labelValue(v string) string {
	b := []byte(strings.ToLower(v))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '-'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return string(b)
}

// spotNoticeURL is where a GCE spot machine learns it is being taken
// back.
const spotNoticeURL = "http://metadata.google.internal/computeMetadata/v1/instance/preempted"

// MetadataJoinToken is the instance metadata key that holds the
// machine's one-time join token. Anything on the machine can read its
// metadata, jobs included; by the time a job runs there, the worker has
// joined and the token is spent.
const MetadataJoinToken = "drover-join-token"

// joinTokenFile is where the startup script keeps the token for the
// worker (root's alone).
const joinTokenFile = "/run/drover/join.token"

// startupScript starts the worker when the machine boots, with the join
// token from the instance's metadata. On a spot machine the worker
// watches for the preemption notice, to hand its jobs back at once.
func startupScript(binary string, req *provider.LaunchRequest, name string) string {
	args := append(provider.WorkerArgs(req, name), "-join-token-file", joinTokenFile)
	if req.Config.Spot {
		args = append(args, "-spot-notice", spotNoticeURL)
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return "#!/bin/sh\nset -e\n" +
		"(umask 077; mkdir -p /run/drover; curl -sf -H 'Metadata-Flavor: Google' http://metadata.google.internal/computeMetadata/v1/instance/attributes/" +
		MetadataJoinToken + " > " + joinTokenFile + ")\n" +
		"exec " + binary + " " + strings.Join(quoted, " ") + " -data-dir /var/lib/drover\n"
}

// Delete deletes instances by name (in the zone they were listed or made
// in); one already gone is not an error.
func (g *GCE) Delete(ctx context.Context, names []string) error {
	var errs []error
	for _, name := range names {
		g.mu.Lock()
		zone, ok := g.zoneOf[name]
		g.mu.Unlock()
		if !ok {
			if _, err := g.List(ctx); err != nil {
				return err
			}
			g.mu.Lock()
			zone, ok = g.zoneOf[name]
			g.mu.Unlock()
			if !ok {
				continue
			}
		}
		op, err := g.instances.Delete(ctx, &computepb.DeleteInstanceRequest{Project: g.opts.Project, Zone: zone, Instance: name})
		if err != nil {
			var ge *googleapi.Error
			if errors.As(err, &ge) && ge.Code == 404 {
				continue
			}
			errs = append(errs, fmt.Errorf("gce: delete %s: %w", name, err))
			continue
		}
		if err := op.Wait(ctx); err != nil {
			errs = append(errs, fmt.Errorf("gce: delete %s: %w", name, err))
			continue
		}
		g.mu.Lock()
		delete(g.zoneOf, name)
		g.mu.Unlock()
	}
	return errors.Join(errs...)
}

// List lists this deployment's instances in every zone (an aggregated list
// filtered on the deployment label). A spot instance the cloud stopped is
// preempted; a RUNNING one is up.
func (g *GCE) List(ctx context.Context) ([]provider.Instance, error) {
	filter := fmt.Sprintf("labels.%s = %q", provider.LabelDeployment, labelValue(g.opts.Deployment))
	it := g.instances.AggregatedList(ctx, &computepb.AggregatedListInstancesRequest{Project: g.opts.Project, Filter: proto.String(filter),
		ReturnPartialSuccess: proto.Bool(true)})
	var out []provider.Instance
	zones := map[string]string{}
	for {
		pair, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("gce: list instances: %w", err)
		}
		for _, in := range pair.Value.GetInstances() {
			zone := in.GetZone()
			if i := strings.LastIndex(zone, "/"); i >= 0 {
				zone = zone[i+1:]
			}
			zones[in.GetName()] = zone
			spot := in.GetScheduling().GetProvisioningModel() == "SPOT"
			out = append(out, provider.Instance{Name: in.GetName(), ID: fmt.Sprint(in.GetId()), Config: in.GetLabels()[provider.LabelConfig],
				Labels: in.GetLabels(), Running: in.GetStatus() == "RUNNING",
				Preempted: spot && (in.GetStatus() == "TERMINATED" || in.GetStatus() == "STOPPED")})
		}
	}
	slices.SortFunc(out, func(a, b provider.Instance) int { return strings.Compare(a.Name, b.Name) })
	g.mu.Lock()
	for n, z := range zones {
		g.zoneOf[n] = z
	}
	g.mu.Unlock()
	return out, nil
}
