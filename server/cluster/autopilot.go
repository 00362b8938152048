package cluster

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// runAutopilot keeps the Raft configuration in line with gossip, on the
// leader: servers that are alive but not voters are added; servers gone for
// longer than DeadServerGrace (or that left) are removed, one at a time and
// only while the servers still alive would make a quorum of what is left.
//
// It runs until ctx ends; the server runs it while it leads.
func (c *Cluster) RunAutopilot(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	downSince := map[string]time.Time{}
	refused := map[string]string{} // id -> the address last refused (logged once)
	kept := map[string]bool{}      // decommissioned servers seen alive (logged once)
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.changed:
		case <-tick.C:
		}
		f := c.raft.GetConfiguration()
		if err := f.Error(); err != nil {
			continue
		}
		conf := f.Configuration()
		inConf := map[string]raft.Server{}
		for _, srv := range conf.Servers {
			inConf[string(srv.ID)] = srv
		}
		members := map[string]Member{}
		for _, m := range c.Members() {
			members[m.ID] = m
		}
		// Add alive servers that are not voters (new or restarted after
		// removal), or whose Raft address changed.
		for id, m := range members {
			if !m.Alive || m.Raft == "" {
				continue
			}
			srv, voting := inConf[id]
			if voting && string(srv.Address) == m.Raft {
				continue
			}
			if !voting && c.cfg.Decommissioned != nil && c.cfg.Decommissioned(id) {
				if !kept[id] {
					c.log.Warn("a decommissioned server is running again; not making it a voter (drover operator raft readmit ID lets it back)", "server", id, "raft", m.Raft)
					kept[id] = true
				}
				continue
			}
			delete(kept, id)
			if c.cfg.VerifyRaft != nil {
				if err := c.cfg.VerifyRaft(id, m.Raft, voting); err != nil {
					if refused[id] != m.Raft {
						c.log.Warn("not making a member a voter: its raft endpoint did not prove it is that server", "server", id, "raft", m.Raft, "err", err)
						refused[id] = m.Raft
					}
					continue
				}
				delete(refused, id)
			}
			if err := c.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(m.Raft), 0, 10*time.Second).Error(); err != nil {
				c.log.Warn("add server to raft", "server", id, "err", err)
			} else {
				c.log.Info("added server to the raft configuration", "server", id, "raft", m.Raft)
			}
		}
		// Remove dead ones.
		now := time.Now()
		alive := 0
		for id := range inConf {
			m, ok := members[id]
			if id == c.cfg.ID || (ok && m.Alive) {
				alive++
				delete(downSince, id)
			} else if _, seen := downSince[id]; !seen {
				downSince[id] = now
				if ok {
					downSince[id] = m.Since
				}
			}
		}
		for id, since := range downSince {
			if _, ok := inConf[id]; !ok {
				delete(downSince, id)
				continue
			}
			m := members[id]
			if !m.Left && now.Sub(since) < c.cfg.DeadServerGrace {
				continue
			}
			remaining := len(inConf) - 1
			if alive < remaining/2+1 {
				c.log.Warn("not removing a dead server: the rest would not make a quorum", "server", id, "alive", alive, "voters", len(inConf))
				continue
			}
			if err := c.raft.RemoveServer(raft.ServerID(id), 0, 10*time.Second).Error(); err != nil {
				c.log.Warn("remove dead server", "server", id, "err", err)
				continue
			}
			c.log.Warn("removed dead server from the raft configuration", "server", id, "down_for", now.Sub(since).Round(time.Second))
			delete(downSince, id)
			break // one at a time; the next round re-reads the configuration
		}
	}
}
