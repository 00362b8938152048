// Package placementspec reads a placement config, the HCL file that
// `drover placement apply` sends, into an api.PlacementConfig: clusters
// with their pools, cluster groups, teams with their quotas, the
// autoscaler's settings and launch configs. It sits beside the jobspec
// parser so that every client of the API (the CLI, a Terraform provider)
// reads the same schema and reports a problem the same way, as an
// hcl.Diagnostic carrying the file, line and column it is about.
//
//	cluster "us-east1-a" {
//	  region = "us-east1"
//	  group  = "cpu"
//	  pool "standard" { cpu = 8  memory = "32GiB" price_per_hour = 0.38 }
//	}
//	cluster_group "cpu" {
//	  strategy = "least-loaded"
//	}
//	team "genomics" {
//	  billing_projects = ["gen-prod"]
//	  strategy = "spread"
//	  quota { cpu = 1000  memory = "4TiB" }
//	}
//
// What is checked here is what the file alone can tell: the schema, sizes,
// durations and names (with api's rules, the ones the server applies). The
// server checks the config again as a whole (strategies, providers, caps,
// the references between clusters, groups and launch configs) when it is
// applied.
package placementspec

import (
	"fmt"
	"os"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/money"
)

// file is the schema of a placement config. Sizes and durations are kept
// as attributes so that a bad one is reported where it is written.
type file struct {
	Clusters      []cluster      `hcl:"cluster,block"`
	Groups        []group        `hcl:"cluster_group,block"`
	Autoscaler    *autoscaler    `hcl:"autoscaler,block"`
	LaunchConfigs []launchConfig `hcl:"launch_config,block"`
	Queues        []queue        `hcl:"queue,block"`
	// Teams are the old form of a queue at the top: its quota is the
	// queue's guarantee, with a borrow_limit of 0 for what it bounds.
	Teams []team `hcl:"team,block"`
}

type cluster struct {
	Name             string            `hcl:"name,label"`
	Region           *hcl.Attribute    `hcl:"region"`
	Group            *hcl.Attribute    `hcl:"group,optional"`
	Provider         string            `hcl:"provider,optional"`
	ProviderSettings map[string]string `hcl:"provider_settings,optional"`
	Pools            []pool            `hcl:"pool,block"`
	DeclRange        hcl.Range         `hcl:",def_range"`
}

type pool struct {
	Name         string         `hcl:"name,label"`
	CPU          float64        `hcl:"cpu,optional"`
	Memory       *hcl.Attribute `hcl:"memory,optional"`
	Preemptible  bool           `hcl:"preemptible,optional"`
	PricePerHour *hcl.Attribute `hcl:"price_per_hour,optional"`
	GPUType      string         `hcl:"gpu_type,optional"`
	GPUs         int            `hcl:"gpus,optional"`
	DeclRange    hcl.Range      `hcl:",def_range"`
}

type group struct {
	Name     string `hcl:"name,label"`
	Strategy string `hcl:"strategy,optional"`
}

type autoscaler struct {
	Enabled             *bool          `hcl:"enabled,optional"`
	Strategy            string         `hcl:"strategy,optional"`
	MaxNodes            int64          `hcl:"max_nodes,optional"`
	MaxPerHour          *hcl.Attribute `hcl:"max_per_hour,optional"`
	MaxAddsPerMinute    int64          `hcl:"max_adds_per_minute,optional"`
	MaxRemovesPerMinute int64          `hcl:"max_removes_per_minute,optional"`
	BootTimeout         *hcl.Attribute `hcl:"boot_timeout,optional"`
	IdleTimeout         *hcl.Attribute `hcl:"idle_timeout,optional"`
	LameTimeout         *hcl.Attribute `hcl:"lame_timeout,optional"`
	Backoff             *hcl.Attribute `hcl:"backoff,optional"`
	MaxBackoff          *hcl.Attribute `hcl:"max_backoff,optional"`
	Window              *hcl.Attribute `hcl:"window,optional"`
	SpotPreemptions     int64          `hcl:"spot_preemptions,optional"`
	NamePrefix          string         `hcl:"name_prefix,optional"`
	Consolidate         *bool          `hcl:"consolidate,optional"`
}

type launchConfig struct {
	Name                string         `hcl:"name,label"`
	Cluster             string         `hcl:"cluster"`
	Pool                string         `hcl:"pool,optional"`
	MachineType         string         `hcl:"machine_type,optional"`
	Zone                string         `hcl:"zone,optional"`
	Spot                bool           `hcl:"spot,optional"`
	Reserved            bool           `hcl:"reserved,optional"`
	CPU                 float64        `hcl:"cpu"`
	Memory              *hcl.Attribute `hcl:"memory"`
	GPUType             string         `hcl:"gpu_type,optional"`
	GPUs                int            `hcl:"gpus,optional"`
	PricePerHour        hcl.Expression `hcl:"price_per_hour"` // an expression: required unless price_from_cloud
	PriceFromCloud      bool           `hcl:"price_from_cloud,optional"`
	MaxNodes            int64          `hcl:"max_nodes,optional"`
	MaxPerHour          *hcl.Attribute `hcl:"max_per_hour,optional"`
	MaxAddsPerMinute    int64          `hcl:"max_adds_per_minute,optional"`
	MaxRemovesPerMinute int64          `hcl:"max_removes_per_minute,optional"`
	Capacity            int64          `hcl:"capacity,optional"` // the local provider's stand-in for a cloud's
	Body                hcl.Body       `hcl:",body"`
}

type team struct {
	Name            string   `hcl:"name,label"`
	BillingProjects []string `hcl:"billing_projects,optional"`
	Strategy        string   `hcl:"strategy,optional"`
	Quota           *struct {
		CPU    float64        `hcl:"cpu,optional"`
		Memory *hcl.Attribute `hcl:"memory,optional"`
		GPUs   map[string]int `hcl:"gpus,optional"`
	} `hcl:"quota,block"`
}

// amounts is a block of cpu (cores), memory (a size) and GPUs by type.
type amounts struct {
	CPU    *float64       `hcl:"cpu,optional"`
	Memory *hcl.Attribute `hcl:"memory,optional"`
	GPUs   map[string]int `hcl:"gpus,optional"`
}

// queue is a queue block: its children are queue blocks inside it.
type queue struct {
	Name        string   `hcl:"name,label"`
	Weight      int64    `hcl:"weight,optional"`
	Guarantee   *amounts `hcl:"guarantee,block"`
	BorrowLimit *amounts `hcl:"borrow_limit,block"`
	LendLimit   *amounts `hcl:"lend_limit,block"`
	MaxRunning  *struct {
		Jobs int64   `hcl:"jobs,optional"`
		CPU  float64 `hcl:"cpu,optional"`
	} `hcl:"max_running,block"`
	ReclaimGrace        *hcl.Attribute `hcl:"reclaim_grace,optional"`
	MinRuntime          *hcl.Attribute `hcl:"min_runtime,optional"`
	Preemptible         bool           `hcl:"preemptible,optional"`
	PreemptAfter        *hcl.Attribute `hcl:"preempt_after,optional"`
	PreemptThreshold    float64        `hcl:"preempt_threshold,optional"`
	AllowPreemptionFrom []string       `hcl:"allow_preemption_from,optional"`
	Strategy            string         `hcl:"strategy,optional"`
	HomeClusters        []string       `hcl:"home_clusters,optional"`
	MaxPriority         int64          `hcl:"max_priority,optional"`
	UsageHalfLife       *hcl.Attribute `hcl:"usage_half_life,optional"`
	BillingProjects     []string       `hcl:"billing_projects,optional"`
	AllowProjects       []string       `hcl:"allow_projects,optional"`
	Recommend           *struct {
		Percentile float64   `hcl:"percentile"`
		DeclRange  hcl.Range `hcl:",def_range"`
	} `hcl:"recommend,block"`
	AutoApply *struct {
		Every     *hcl.Attribute `hcl:"every"`
		MaxChange *float64       `hcl:"max_change,optional"`
		DryRun    bool           `hcl:"dry_run,optional"`
		Days      int64          `hcl:"days,optional"`
		Keep      int64          `hcl:"keep,optional"`
		Rebalance bool           `hcl:"rebalance,optional"`
		High      float64        `hcl:"high,optional"`
		Low       float64        `hcl:"low,optional"`
		DeclRange hcl.Range      `hcl:",def_range"`
	} `hcl:"auto_apply,block"`
	Queues    []queue   `hcl:"queue,block"`
	DeclRange hcl.Range `hcl:",def_range"`
}

// queues flattens a queue block and those inside it into the API's
// queues, each named by its path, a parent before its children.
func (d *decoder) queues(parent string, qs []queue, out []api.Queue) []api.Queue {
	for _, q := range qs {
		d.name("queue", q.Name, q.DeclRange)
		path := q.Name
		if parent != "" {
			path = parent + "/" + q.Name
		}
		aq := api.Queue{Path: path, Weight: q.Weight, Preemptible: q.Preemptible, PreemptThreshold: q.PreemptThreshold,
			AllowPreemptionFrom: q.AllowPreemptionFrom, Strategy: q.Strategy, HomeClusters: q.HomeClusters, MaxPriority: q.MaxPriority,
			BillingProjects: q.BillingProjects, AllowProjects: q.AllowProjects,
			ReclaimGrace: d.duration(q.ReclaimGrace), MinRuntime: d.duration(q.MinRuntime), PreemptAfter: d.duration(q.PreemptAfter),
			UsageHalfLife: d.duration(q.UsageHalfLife)}
		if g := q.Guarantee; g != nil {
			aq.Guarantee = api.Quota{Memory: d.size(g.Memory), GPUs: g.GPUs}
			if g.CPU != nil {
				aq.Guarantee.CPU = *g.CPU
			}
		}
		if r := q.Recommend; r != nil {
			if !(r.Percentile > 0 && r.Percentile <= 1) {
				d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid recommend percentile",
					Detail: fmt.Sprintf("percentile = %g: write a fraction more than 0 and at most 1, e.g. 0.95 (the guarantee covers 95%% of the time the queue is in use).", r.Percentile), Subject: r.DeclRange.Ptr()})
			}
			aq.Recommend = &api.QueueRecommendSettings{Percentile: r.Percentile}
		}
		if a := q.AutoApply; a != nil {
			var maxChange float64
			if a.MaxChange != nil {
				maxChange = *a.MaxChange
				if !(maxChange > 0 && maxChange <= 1) {
					d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid auto_apply max_change",
						Detail: fmt.Sprintf("max_change = %g: write a fraction more than 0 and at most 1, e.g. 0.25 (a step moves a setting at most a quarter; leave it out for 0.25).", maxChange), Subject: a.DeclRange.Ptr()})
				}
			}
			aq.AutoApply = &api.QueueAutoApply{Every: d.duration(a.Every), MaxChange: maxChange, DryRun: a.DryRun, Days: a.Days, Keep: a.Keep,
				Rebalance: a.Rebalance, High: a.High, Low: a.Low}
		}
		aq.BorrowLimit = d.limit(q.BorrowLimit)
		aq.LendLimit = d.limit(q.LendLimit)
		if m := q.MaxRunning; m != nil {
			aq.MaxRunning = api.MaxRunning{Jobs: m.Jobs, CPU: m.CPU}
		}
		out = append(out, aq)
		out = d.queues(path, q.Queues, out)
	}
	return out
}

// limit is an amounts block as a limit: what it does not name is not
// bounded.
func (d *decoder) limit(a *amounts) *api.Limit {
	if a == nil {
		return nil
	}
	l := &api.Limit{CPU: a.CPU, GPUs: a.GPUs}
	if a.Memory != nil {
		m := d.size(a.Memory)
		l.Memory = &m
	}
	return l
}

// ParseFile reads and parses the placement config at path.
func ParseFile(path string) (*api.PlacementConfig, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read placement config", Detail: err.Error()}}
	}
	return Parse(path, src)
}

// Parse parses a placement config; filename is only used in diagnostics.
// Every problem found is returned, each with its position.
func Parse(filename string, src []byte) (*api.PlacementConfig, hcl.Diagnostics) {
	f, diags := hclparse.NewParser().ParseHCL(src, filename)
	if diags.HasErrors() {
		return nil, diags
	}
	var pf file
	diags = gohcl.DecodeBody(f.Body, nil, &pf)
	for _, lc := range pf.LaunchConfigs {
		// An expression is never required by gohcl (absent, it is null).
		if (lc.PricePerHour == nil || isNull(lc.PricePerHour)) && !lc.PriceFromCloud {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing required argument",
				Detail: `The argument "price_per_hour" is required, but no definition was found (or set price_from_cloud = true to take the cloud's price).`, Subject: lc.Body.MissingItemRange().Ptr()})
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	d := &decoder{}
	cfg := &api.PlacementConfig{}
	for _, c := range pf.Clusters {
		cd := api.ClusterDecl{Name: c.Name, Region: d.string(c.Region), Group: d.string(c.Group), Provider: c.Provider, ProviderSettings: c.ProviderSettings}
		d.name("cluster", c.Name, c.DeclRange)
		if c.Region != nil {
			d.name("region", cd.Region, c.Region.Expr.Range())
		}
		if cd.Group != "" {
			d.name("cluster group", cd.Group, c.Group.Expr.Range())
		}
		for _, pl := range c.Pools {
			d.name("pool", pl.Name, pl.DeclRange)
			cd.Pools = append(cd.Pools, api.Pool{Name: pl.Name, CPU: pl.CPU, Memory: d.size(pl.Memory), Preemptible: pl.Preemptible,
				PricePerHour: d.price(pl.PricePerHour), GPUType: pl.GPUType, GPUs: pl.GPUs})
		}
		cfg.Clusters = append(cfg.Clusters, cd)
	}
	for _, g := range pf.Groups {
		cfg.Groups = append(cfg.Groups, api.ClusterGroup{Name: g.Name, Strategy: g.Strategy})
	}
	if a := pf.Autoscaler; a != nil {
		cfg.Autoscaler = &api.AutoscalerSettings{Enabled: a.Enabled == nil || *a.Enabled, Strategy: a.Strategy, MaxNodes: a.MaxNodes, MaxPerHour: d.price(a.MaxPerHour),
			MaxAddsPerMinute: a.MaxAddsPerMinute, MaxRemovesPerMinute: a.MaxRemovesPerMinute,
			BootTimeout: d.duration(a.BootTimeout), IdleTimeout: d.duration(a.IdleTimeout), LameTimeout: d.duration(a.LameTimeout),
			Backoff: d.duration(a.Backoff), MaxBackoff: d.duration(a.MaxBackoff), Window: d.duration(a.Window),
			SpotPreemptions: a.SpotPreemptions, NamePrefix: a.NamePrefix, Consolidate: a.Consolidate}
	}
	for _, lc := range pf.LaunchConfigs {
		var price money.Rate
		if lc.PricePerHour != nil && !isNull(lc.PricePerHour) {
			price = d.priceExpr("price_per_hour", lc.PricePerHour)
		}
		cfg.LaunchConfigs = append(cfg.LaunchConfigs, api.LaunchConfig{Name: lc.Name, Cluster: lc.Cluster, Pool: lc.Pool, MachineType: lc.MachineType,
			Zone: lc.Zone, Spot: lc.Spot, Reserved: lc.Reserved, CPU: lc.CPU, Memory: d.size(lc.Memory), GPUType: lc.GPUType, GPUs: lc.GPUs,
			PricePerHour: price, PriceFromCloud: lc.PriceFromCloud, MaxNodes: lc.MaxNodes, MaxPerHour: d.price(lc.MaxPerHour), MaxAddsPerMinute: lc.MaxAddsPerMinute, MaxRemovesPerMinute: lc.MaxRemovesPerMinute,
			Capacity: lc.Capacity})
	}
	cfg.Queues = d.queues("", pf.Queues, cfg.Queues)
	for _, t := range pf.Teams {
		cfg.Queues = append(cfg.Queues, TeamQueue(t.Name, t.BillingProjects, t.Strategy, func() (float64, int64, map[string]int) {
			if t.Quota == nil {
				return 0, 0, nil
			}
			return t.Quota.CPU, d.size(t.Quota.Memory), t.Quota.GPUs
		}))
	}
	if d.diags.HasErrors() {
		return nil, d.diags
	}
	return cfg, nil
}

// decoder evaluates the attributes the schema keeps as such, collecting a
// diagnostic for each one that is wrong.
type decoder struct {
	diags hcl.Diagnostics
}

func (d *decoder) fail(attr *hcl.Attribute, detail string) {
	d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + attr.Name, Detail: detail, Subject: attr.Expr.Range().Ptr()})
}

// string is an attribute's string value ("" when absent).
func (d *decoder) string(attr *hcl.Attribute) string {
	if attr == nil {
		return ""
	}
	var s string
	if diags := gohcl.DecodeExpression(attr.Expr, nil, &s); diags.HasErrors() {
		d.diags = append(d.diags, diags...)
	}
	return s
}

// size is a size such as "32GiB" in bytes (0 when absent).
func (d *decoder) size(attr *hcl.Attribute) int64 {
	s := d.string(attr)
	if s == "" {
		return 0
	}
	b, err := units.ParseBytes(s)
	if err != nil {
		d.fail(attr, fmt.Sprintf("%v.", err))
	}
	return b
}

// price is a price or a spend cap in dollars an hour (0 when absent),
// read exactly from the number as written: HCL keeps a number as a
// decimal-exact big float, so 0.1 is a tenth of a dollar, not the
// float64 nearest to it. A string of a number is read as HCL reads one
// for a number; more than nine decimal places (a nano-dollar) or a
// negative price is refused where it is written.
func (d *decoder) price(attr *hcl.Attribute) money.Rate {
	if attr == nil {
		return 0
	}
	return d.priceExpr(attr.Name, attr.Expr)
}

// isNull reports whether an expression is absent (gohcl's null).
func isNull(expr hcl.Expression) bool {
	v, diags := expr.Value(nil)
	return !diags.HasErrors() && v.IsNull()
}

// priceExpr is price for an attribute's expression and name.
func (d *decoder) priceExpr(name string, expr hcl.Expression) money.Rate {
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		d.diags = append(d.diags, diags...)
		return 0
	}
	n, err := convert.Convert(v, cty.Number)
	if err != nil || n.IsNull() || !n.IsKnown() {
		d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unsuitable value type",
			Detail: "Unsuitable value: a number is required", Subject: expr.Range().Ptr()})
		return 0
	}
	text := n.AsBigFloat().Text('f', -1)
	r, err := money.ParseRate(text)
	fail := func(detail string) {
		d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + name, Detail: detail, Subject: expr.Range().Ptr()})
	}
	switch {
	case err != nil:
		fail(fmt.Sprintf("%s = %.40s dollars an hour: %v.", name, text, err))
	case r < 0:
		fail(fmt.Sprintf("%s = %s: a price is 0 or more dollars an hour.", name, text))
	}
	return r
}

// duration checks a Go duration such as "90s" and returns it as written,
// the form the API carries.
func (d *decoder) duration(attr *hcl.Attribute) string {
	s := d.string(attr)
	if s == "" {
		return ""
	}
	if v, err := api.ParseDuration(s); err != nil || v < 0 {
		d.fail(attr, fmt.Sprintf("%s %.40q: write a duration such as 90s, 10m or 7d.", attr.Name, s))
	}
	return s
}

// name checks a cluster, region, group or pool name with the server's
// rule, api.ValidatePlaceName.
func (d *decoder) name(what, s string, at hcl.Range) {
	if err := api.ValidatePlaceName(what, s); err != nil {
		d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + what + " name", Detail: err.Error() + ".", Subject: at.Ptr()})
	}
}

// TeamQueue is a team of old as a queue at the top: its quota is the
// queue's guarantee, and it borrows nothing beyond what the quota bounded
// (a quota of 0 bounded nothing).
func TeamQueue(name string, projects []string, strategy string, quota func() (cpu float64, memory int64, gpus map[string]int)) api.Queue {
	cpu, mem, gpus := quota()
	q := api.Queue{Path: name, BillingProjects: projects, Strategy: strategy, Guarantee: api.Quota{CPU: cpu, Memory: mem, GPUs: gpus}}
	if cpu > 0 || mem > 0 || len(gpus) > 0 {
		q.BorrowLimit = &api.Limit{}
		if cpu > 0 {
			q.BorrowLimit.CPU = new(float64)
		}
		if mem > 0 {
			q.BorrowLimit.Memory = new(int64)
		}
		for typ := range gpus {
			if q.BorrowLimit.GPUs == nil {
				q.BorrowLimit.GPUs = map[string]int{}
			}
			q.BorrowLimit.GPUs[typ] = 0
		}
	}
	return q
}
