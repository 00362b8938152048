package apiview

import (
	"fmt"
	"math"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/state"
)

// MaxPlacementItems bounds the clusters, pools per cluster and teams one
// placement config declares.
const MaxPlacementItems = 1000

// PlacementFromAPI checks a placement config as apply will, and every
// size and name in it, before a command is made of it.
func PlacementFromAPI(req *api.PlacementConfig) (*state.ApplyPlacement, error) {
	if len(req.Clusters) > MaxPlacementItems || len(req.Groups) > MaxPlacementItems {
		return nil, fmt.Errorf("a placement config declares at most %d clusters and %d cluster groups", MaxPlacementItems, MaxPlacementItems)
	}
	c := &state.ApplyPlacement{Prune: req.Prune}
	for _, g := range req.Groups {
		sg := state.ClusterGroup{Name: g.Name, Strategy: g.Strategy}
		if err := state.ValidateGroup(&sg); err != nil {
			return nil, err
		}
		c.Groups = append(c.Groups, sg)
	}
	for _, cd := range req.Clusters {
		if err := api.ValidatePlaceName("cluster", cd.Name); err != nil {
			return nil, err
		}
		if err := api.ValidatePlaceName("region", cd.Region); err != nil {
			return nil, fmt.Errorf("cluster %s: %v", cd.Name, err)
		}
		if len(cd.Pools) > MaxPlacementItems {
			return nil, fmt.Errorf("cluster %s declares %d pools; the limit is %d", cd.Name, len(cd.Pools), MaxPlacementItems)
		}
		if cd.Group != "" {
			if err := api.ValidatePlaceName("cluster group", cd.Group); err != nil {
				return nil, fmt.Errorf("cluster %s: %v", cd.Name, err)
			}
		}
		cl := state.Cluster{Name: cd.Name, Region: cd.Region, Group: cd.Group, Provider: cd.Provider, ProviderSettings: cd.ProviderSettings}
		if err := state.ValidateProvider(&cl); err != nil {
			return nil, err
		}
		for _, p := range cd.Pools {
			if err := api.ValidatePlaceName("pool", p.Name); err != nil {
				return nil, fmt.Errorf("cluster %s: %v", cd.Name, err)
			}
			if p.CPU < 0 || p.CPU > api.MaxCPU*64 || p.Memory < 0 || math.IsNaN(p.CPU) {
				return nil, fmt.Errorf("pool %s/%s: cpu and memory must be 0 or more", cd.Name, p.Name)
			}
			if err := state.ValidatePrice("pool "+cd.Name+"/"+p.Name+": price_per_hour", p.PricePerHour); err != nil {
				return nil, err
			}
			if p.GPUs < 0 || p.GPUs > api.MaxGPUs || (p.GPUs > 0 && api.ValidatePlaceName("gpu_type", p.GPUType) != nil) {
				return nil, fmt.Errorf("pool %s/%s: gpus 0 to %d, with a gpu_type when more than 0", cd.Name, p.Name, api.MaxGPUs)
			}
			cl.Pools = append(cl.Pools, state.Pool{Name: p.Name, CPUMilli: int64(math.Round(p.CPU * 1000)), Memory: p.Memory, Preemptible: p.Preemptible,
				PricePerHour: p.PricePerHour, GPUType: p.GPUType, GPUs: int64(p.GPUs)})
		}
		c.Clusters = append(c.Clusters, cl)
	}
	if len(req.Queues) > placement.MaxQueues {
		return nil, fmt.Errorf("a placement config declares at most %d queues", placement.MaxQueues)
	}
	for _, q := range req.Queues {
		sq, err := QueueFromAPI(q)
		if err != nil {
			return nil, err
		}
		c.Queues = append(c.Queues, sq)
	}
	if len(req.LaunchConfigs) > state.MaxLaunchConfigs {
		return nil, fmt.Errorf("a placement config declares at most %d launch configs", state.MaxLaunchConfigs)
	}
	if a := req.Autoscaler; a != nil {
		sa, err := AutoscalerFromAPI(a)
		if err != nil {
			return nil, err
		}
		c.Autoscaler = sa
	}
	for _, lc := range req.LaunchConfigs {
		if lc.CPU <= 0 || lc.CPU > api.MaxCPU*64 || math.IsNaN(lc.CPU) || lc.GPUs < 0 || lc.GPUs > api.MaxGPUs {
			return nil, fmt.Errorf("launch config %.64s: cpu must be more than 0 and at most %d, gpus 0 to %d", lc.Name, api.MaxCPU*64, api.MaxGPUs)
		}
		sl := state.LaunchConfig{Name: lc.Name, Cluster: lc.Cluster, Pool: lc.Pool, MachineType: lc.MachineType, Zone: lc.Zone, Spot: lc.Spot, Reserved: lc.Reserved,
			CPUMilli: int64(math.Round(lc.CPU * 1000)), Memory: lc.Memory, GPUType: lc.GPUType, GPUs: int64(lc.GPUs), PricePerHour: lc.PricePerHour,
			MaxNodes: lc.MaxNodes, MaxPerHour: lc.MaxPerHour, MaxAddsPerMinute: lc.MaxAddsPerMinute, MaxRemovesPerMinute: lc.MaxRemovesPerMinute,
			PriceFromCloud: lc.PriceFromCloud, Capacity: lc.Capacity}
		if err := state.ValidateLaunchConfig(&sl); err != nil {
			return nil, err
		}
		c.LaunchConfigs = append(c.LaunchConfigs, sl)
	}
	return c, nil
}

// AutoscalerFromAPI converts and checks autoscaler settings.
func AutoscalerFromAPI(a *api.AutoscalerSettings) (*state.Autoscaler, error) {
	sa := &state.Autoscaler{Enabled: a.Enabled, Strategy: a.Strategy, MaxNodes: a.MaxNodes, MaxPerHour: a.MaxPerHour,
		MaxAddsPerMinute: a.MaxAddsPerMinute, MaxRemovesPerMinute: a.MaxRemovesPerMinute, SpotPreemptions: a.SpotPreemptions, NamePrefix: a.NamePrefix,
		Consolidate: a.Consolidate == nil || *a.Consolidate}
	for _, d := range []struct {
		name, value string
		dst         *int64
	}{{"boot_timeout", a.BootTimeout, &sa.BootTimeout}, {"idle_timeout", a.IdleTimeout, &sa.IdleTimeout}, {"lame_timeout", a.LameTimeout, &sa.LameTimeout},
		{"backoff", a.Backoff, &sa.Backoff}, {"max_backoff", a.MaxBackoff, &sa.MaxBackoff}, {"window", a.Window, &sa.Window}} {
		if d.value == "" {
			continue
		}
		v, err := time.ParseDuration(d.value)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("autoscaler: %s %.40q: write a duration such as 90s or 10m", d.name, d.value)
		}
		*d.dst = int64(v)
	}
	if err := state.ValidateAutoscaler(sa); err != nil {
		return nil, err
	}
	return sa, nil
}
