package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drover-sched/drover/internal/units"
)

// The autoscaler's status.

func (m placementCmds) runAutoscalerStatus(ctx context.Context, args []string) error {
	fs := m.newFlags("autoscaler status", "[-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	st, err := m.Client().AutoscalerStatus(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(st)
	}
	a := st.Settings
	state := "disabled"
	if a.Enabled {
		state = "enabled"
	}
	limit := func(n int64) string {
		if n == 0 {
			return "no cap"
		}
		return fmt.Sprint(n)
	}
	spendCap := "no cap"
	if a.MaxPerHour > 0 {
		spendCap = a.MaxPerHour.Display()
	}
	strategy := a.Strategy
	if strategy == "" {
		strategy = "cheapest"
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	safef(tw, "Autoscaler\t%s, %s first\n", state, strategy)
	safef(tw, "Machines\t%d live of %s\n", st.Nodes, limit(a.MaxNodes))
	safef(tw, "Spend\t%s/hour of %s\n", st.SpendPerHour.Display(), spendCap)
	if r := st.LastRound; r != nil {
		safef(tw, "Last decision\t%s ago: %g cores waiting in the window\n", time.Since(r.At).Round(time.Second), r.DemandCPU)
		for _, l := range r.Launches {
			safef(tw, "  launch\t%s\n", l.Reason)
		}
		for _, d := range r.Deletes {
			safef(tw, "  delete\t%s: %s\n", d.Machine, d.Reason)
		}
		for _, h := range r.Held {
			safef(tw, "  held\t%d jobs (%g cores): %s\n", h.Jobs, h.CPU, h.Reason)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Pools) > 0 {
		safeln(m.Stdout)
		tw = tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
		fmt.Fprintln(tw, "CLUSTER\tPOOL\tREQUESTED\tLAUNCHING\tACTIVE\tDRAINING\tPER HOUR")
		for _, p := range st.Pools {
			safef(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", p.Cluster, p.Pool, p.Machines["requested"], p.Machines["launching"], p.Machines["active"], p.Machines["draining"], p.SpendPerHour.Display())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(st.LaunchConfigs) > 0 {
		safeln(m.Stdout)
		tw = tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
		fmt.Fprintln(tw, "LAUNCH CONFIG\tCLUSTER/POOL\tMACHINE\tZONE\tCPU\tMEMORY\tPER HOUR\tLIVE\tSTATE")
		for _, c := range st.LaunchConfigs {
			kind := ""
			if c.Spot {
				kind = " (spot)"
			}
			status := "ok"
			switch {
			case c.Misconfigured:
				status = fmt.Sprintf("misconfigured (tried again at %s): %s", c.Until.Local().Format("15:04:05"), c.Reason)
			case c.CapacityLimited:
				status = fmt.Sprintf("capacity-limited until %s: %s", c.Until.Local().Format("15:04:05"), c.Reason)
			case c.PriceFromCloud && c.PricedAt == nil && c.PricePerHour == 0:
				status = "waiting for the cloud's price"
			}
			price := c.PricePerHour.Display()
			switch {
			case c.PriceFromCloud && c.PricedAt != nil:
				price += " (cloud, read " + c.PricedAt.Local().Format("15:04") + ")"
			case c.PriceFromCloud:
				price += " (not yet read)"
			}
			live := strconv.Itoa(c.Live)
			if c.Capacity > 0 {
				live += fmt.Sprintf(" (capacity %d)", c.Capacity)
			}
			safef(tw, "%s\t%s/%s\t%s%s\t%s\t%g\t%s\t%s\t%s\t%s\n", c.Name, c.Cluster, orDash(c.Pool), c.MachineType, kind, orDash(c.Zone), c.CPU,
				units.FormatBytes(c.Memory), price, live, status)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	var live []string
	for _, mc := range st.Machines {
		if mc.State != "deleted" && mc.State != "failed" {
			boot := "-"
			if mc.BootSeconds > 0 {
				boot = (time.Duration(mc.BootSeconds * float64(time.Second))).Round(time.Second).String()
			}
			idle := "-"
			if mc.LastJobEnded != nil {
				idle = time.Since(*mc.LastJobEnded).Round(time.Second).String() + " ago"
			}
			live = append(live, rowf("%s\t%s\t%s\t%d\t%s\t%s\t%s", mc.ID, mc.Config, mc.State, mc.Running, time.Since(mc.Since).Round(time.Second), boot, idle))
		}
	}
	if len(live) > 0 {
		safeln(m.Stdout)
		tw = tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
		fmt.Fprintln(tw, "MACHINE\tCONFIG\tSTATE\tRUNNING\tFOR\tBOOTED IN\tLAST JOB ENDED")
		fmt.Fprintln(tw, strings.Join(live, "\n")) // cells escaped by rowf
		return tw.Flush()
	}
	return nil
}
