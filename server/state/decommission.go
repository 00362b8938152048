package state

// Decommissioning: a server an operator removes for good stays out of the
// Raft configuration though it restarts with its data dir and gossips
// again (autopilot would otherwise make it a voter again). The list is
// replicated so that every leader honours it, and bounded.

// MaxDecommissioned bounds the list.
const MaxDecommissioned = 1000

// MaxServerIDBytes bounds a server ID in the list.
const MaxServerIDBytes = 128

// Decommissioned is a server removed for good: when and by whom.
type Decommissioned struct {
	ID string
	At int64
	By string
}

// Decommission puts a server on the list, or with Undo takes it off (it
// may then join again).
type Decommission struct {
	Now  int64
	ID   string
	By   string
	Undo bool
}

// Type implements Command.
func (*Decommission) Type() CommandType { return CmdDecommission }

func (s *memberBook) applyDecommission(c *Decommission) any {
	if c.ID == "" || len(c.ID) > MaxServerIDBytes || len(c.By) > MaxServerIDBytes {
		return errorf(ErrInvalid, "a server ID is 1 to %d bytes", MaxServerIDBytes)
	}
	if c.Undo {
		if _, ok := s.decommissioned[c.ID]; !ok {
			return errorf(ErrNotFound, "server %q is not decommissioned", c.ID)
		}
		delete(s.decommissioned, c.ID)
		return nil
	}
	if _, ok := s.decommissioned[c.ID]; !ok && len(s.decommissioned) >= MaxDecommissioned {
		return errorf(ErrConflict, "%d servers are decommissioned already, the most kept; readmit some first", MaxDecommissioned)
	}
	s.decommissioned[c.ID] = Decommissioned{ID: c.ID, At: c.Now, By: c.By}
	return nil
}

// DecommissionedServers lists the servers removed for good, by ID.
func (r Reader) DecommissionedServers() []Decommissioned {
	out := make([]Decommissioned, 0, len(r.s.decommissioned))
	for _, id := range sortedKeys(r.s.decommissioned) {
		out = append(out, r.s.decommissioned[id])
	}
	return out
}

// IsDecommissioned reports whether a server was removed for good.
func (s *memberBook) IsDecommissioned(id string) (d Decommissioned, ok bool) {
	s.Read(func(r Reader) { d, ok = r.s.decommissioned[id] })
	return d, ok
}
