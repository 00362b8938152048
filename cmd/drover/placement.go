package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/jobspec"
	"github.com/drover-sched/drover/jobspec/placementspec"
)

// Regions, clusters, teams, quotas and the placement config.

// placementCmds are the commands for where jobs run: regions, clusters,
// queues, the autoscaler and the placement config.
type placementCmds struct{ *Main }

func (m placementCmds) runRegionList(ctx context.Context, args []string) error {
	return runList(m.Main, ctx, args, "region list", "No regions: no worker has activated and no placement config was applied.",
		"REGION\tCLUSTERS\tENABLED\tWORKERS\tCPU\tFREE CPU", m.Client().ListRegions, func(r api.Region) string {
			return rowf("%s\t%s\t%d\t%d\t%g\t%g", r.Name, strings.Join(r.Clusters, ","), r.Enabled, r.Workers, r.CPU, r.FreeCPU)
		})
}

// runList is a list command: with -json it prints what fetch returned;
// otherwise a table, or empty when there is nothing.
func runList[T any](m *Main, ctx context.Context, args []string, name, empty, header string,
	fetch func(context.Context) ([]T, error), row func(T) string) error {
	fs := m.newFlags(name, "[-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	items, err := fetch(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(items)
	}
	if len(items) == 0 {
		safeln(m.Stdout, empty)
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, header) // the callers' constant
	for _, it := range items {
		fmt.Fprintln(tw, row(it)) // cells escaped by rowf
	}
	return tw.Flush()
}

func clusterState(c api.Cluster) string {
	if c.Enabled && c.Down {
		return "enabled, down: no worker heard from"
	}
	if c.Enabled {
		return "enabled"
	}
	s := "disabled"
	var parts []string
	if c.Reason != "" {
		parts = append(parts, c.Reason)
	}
	if c.Since != nil {
		parts = append(parts, "since "+c.Since.Local().Format("2006-01-02 15:04"))
	}
	if c.By != "" {
		parts = append(parts, "by "+c.By)
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

func (m placementCmds) runClusterList(ctx context.Context, args []string) error {
	return runList(m.Main, ctx, args, "cluster list", "No clusters.", "CLUSTER\tREGION\tGROUP\tWORKERS\tCPU\tFREE CPU\tRUNNING\tSTATE",
		m.Client().ListClusters, func(c api.Cluster) string {
			return rowf("%s\t%s\t%s\t%d\t%g\t%g\t%d\t%s", c.Name, c.Region, orDash(c.Group), c.Workers, c.CPU, c.FreeCPU, c.Running, clusterState(c))
		})
}

func (m placementCmds) runClusterGroups(ctx context.Context, args []string) error {
	return runList(m.Main, ctx, args, "cluster groups", "No cluster groups: a placement config declares them.", "GROUP\tSTRATEGY\tCLUSTERS",
		m.Client().ListClusterGroups, func(g api.ClusterGroup) string {
			strategy := g.Strategy
			if strategy == "" {
				strategy = "(each team's)"
			}
			return rowf("%s\t%s\t%s", g.Name, strategy, strings.Join(g.Clusters, ","))
		})
}

// orDash prints an empty column as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (m placementCmds) runClusterStatus(ctx context.Context, args []string) error {
	fs := m.newFlags("cluster status", "NAME [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, err := m.Client().GetCluster(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(c)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	safef(tw, "Cluster\t%s\n", c.Name)
	safef(tw, "Region\t%s\n", c.Region)
	safef(tw, "Group\t%s\n", orDash(c.Group))
	safef(tw, "State\t%s\n", clusterState(*c))
	safef(tw, "Workers\t%d active, %d heard from in the last 10s\n", c.Workers, c.Heard)
	safef(tw, "CPU\t%g of %g free\n", c.FreeCPU, c.CPU)
	safef(tw, "Memory\t%s of %s free\n", units.FormatBytes(c.FreeMemory), units.FormatBytes(c.Memory))
	safef(tw, "Running\t%d attempts\n", c.Running)
	for _, p := range c.Pools {
		safef(tw, "Pool %s\t%g cpu, %s, $%s/hour%s\n", p.Name, p.CPU, units.FormatBytes(p.Memory), p.PricePerHour, map[bool]string{true: ", preemptible"}[p.Preemptible])
	}
	return tw.Flush()
}

func (m placementCmds) runClusterDisable(ctx context.Context, args []string) error {
	fs := m.newFlags("cluster disable", `NAME -reason "..." [-evacuate] [-json]`)
	reason := fs.String("reason", "", "why the cluster is taken out of service (shown to users whose jobs wait for it)")
	evacuate := fs.Bool("evacuate", false, "stop the attempts running there: they are recorded as preempted and run again elsewhere")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *reason == "" {
		return usagef("drover cluster disable needs -reason: say why, for the users whose jobs wait")
	}
	res, err := m.Client().DisableCluster(ctx, pos[0], &api.ClusterStateRequest{Reason: *reason, Evacuate: *evacuate})
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(res)
	}
	safef(m.Stdout, "Cluster %s %s.", res.Cluster.Name, clusterState(res.Cluster))
	if *evacuate {
		safef(m.Stdout, " %d running attempts preempted; their jobs run elsewhere.", res.Preempted)
	}
	safeln(m.Stdout)
	return nil
}

func (m placementCmds) runClusterEnable(ctx context.Context, args []string) error {
	fs := m.newFlags("cluster enable", `NAME [-reason "..."] [-json]`)
	reason := fs.String("reason", "", "note kept with the cluster")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	res, err := m.Client().EnableCluster(ctx, pos[0], &api.ClusterStateRequest{Reason: *reason})
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(res)
	}
	safef(m.Stdout, "Cluster %s enabled.\n", res.Cluster.Name)
	return nil
}

// runRemove removes one declared object by name with del.
func (m placementCmds) runRemove(ctx context.Context, args []string, cmd, what string, del func(context.Context, string) error) error {
	fs := m.newFlags(cmd, "NAME")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if err := del(ctx, pos[0]); err != nil {
		return err
	}
	safef(m.Stdout, "%s %s removed.\n", what, pos[0])
	return nil
}

func (m placementCmds) runClusterDelete(ctx context.Context, args []string) error {
	return m.runRemove(ctx, args, "cluster delete", "Cluster", m.Client().DeleteCluster)
}

func (m placementCmds) runClusterGroupDelete(ctx context.Context, args []string) error {
	return m.runRemove(ctx, args, "cluster delete-group", "Cluster group", m.Client().DeleteClusterGroup)
}

func (m placementCmds) runLaunchConfigDelete(ctx context.Context, args []string) error {
	return m.runRemove(ctx, args, "autoscaler delete-config", "Launch config", m.Client().DeleteLaunchConfig)
}

func limitString(v float64) string {
	if v == 0 {
		return "unlimited"
	}
	return fmt.Sprint(v)
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func quotaArgs(cpu float64, memory string, gpus []string) (api.Quota, error) {
	q := api.Quota{CPU: cpu}
	for _, g := range gpus {
		typ, n, ok := strings.Cut(g, "=")
		count, err := strconv.Atoi(n)
		if !ok || typ == "" || err != nil || count < 0 {
			return q, usagef("-gpu %q: write TYPE=COUNT, as in a100=8", g)
		}
		if q.GPUs == nil {
			q.GPUs = map[string]int{}
		}
		q.GPUs[typ] = count
	}
	if memory != "" {
		b, err := units.ParseBytes(memory)
		if err != nil {
			return q, usagef("-memory: %v", err)
		}
		q.Memory = b
	}
	return q, nil
}

func (m placementCmds) runPlacementApply(ctx context.Context, args []string) error {
	fs := m.newFlags("placement apply", "FILE [-prune]")
	prune := fs.Bool("prune", false, "remove queues, cluster groups and launch configs the file does not name")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	src, err := os.ReadFile(pos[0])
	if err != nil {
		return err
	}
	cfg, diags := placementspec.Parse(pos[0], src)
	if diags.HasErrors() {
		return fmt.Errorf("%s", strings.TrimSpace(jobspec.FormatDiagnostics(diags)))
	}
	cfg.Prune = *prune
	if err := m.Client().ApplyPlacement(ctx, cfg); err != nil {
		return err
	}
	safef(m.Stdout, "Applied %s: %d clusters, %d cluster groups, %d queues, %d launch configs.\n", pos[0], len(cfg.Clusters), len(cfg.Groups), len(cfg.Queues), len(cfg.LaunchConfigs))
	return nil
}
