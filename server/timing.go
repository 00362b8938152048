package server

import (
	"fmt"
	"time"
)

// Timing for a network: -raft-multiplier, as Nomad and Consul have it,
// scales every timeout that must outlast the network's delays from one
// value, so a WAN deployment changes one number. 1 suits servers on one
// LAN (well under 1 ms apart); 5 suits servers in regions 30 to 150 ms
// apart (heartbeats every 2.5 s, a failover in a few seconds more);
// values up to 10 allow for worse.
const (
	MinRaftMultiplier = 1
	MaxRaftMultiplier = 10
	// baseRaftTimeout is the heartbeat and election timeout at 1.
	baseRaftTimeout = 500 * time.Millisecond
	// baseGossipProbe is gossip's probe interval at 1 (memberlist's LAN
	// default).
	baseGossipProbe = time.Second
)

// Timings are what a multiplier sets.
type Timings struct {
	// HeartbeatTimeout and ElectionTimeout: how long a leader may be
	// silent before the others elect a new one; LeaderLeaseTimeout is
	// half of it.
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout time.Duration
	// GossipInterval: gossip's probe interval (failure detection).
	GossipInterval time.Duration
	// LostTimeout: how long a worker may be silent before its attempts
	// run elsewhere; it outlasts twenty election timeouts, so that a
	// change of leader (whose liveness clocks start afresh) never loses
	// a worker, and never goes below the LAN default of 60 s.
	LostTimeout time.Duration
}

// TimingsFor returns the timings of multiplier m.
func TimingsFor(m int) (Timings, error) {
	if m < MinRaftMultiplier || m > MaxRaftMultiplier {
		return Timings{}, fmt.Errorf("-raft-multiplier %d: give %d (one LAN) to %d; 5 suits regions 30-150 ms apart", m, MinRaftMultiplier, MaxRaftMultiplier)
	}
	raft := baseRaftTimeout * time.Duration(m)
	return Timings{HeartbeatTimeout: raft, ElectionTimeout: raft, LeaderLeaseTimeout: raft / 2,
		GossipInterval: min(baseGossipProbe*time.Duration(m), 5*time.Second),
		LostTimeout:    max(DefaultConfig().LostTimeout, 20*raft)}, nil
}
