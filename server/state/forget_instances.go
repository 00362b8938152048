package state

import (
	"maps"
	"slices"
)

// Retired instances: a worker's incarnation stays in the state once
// retired (its attempts name it, `drover node status` lists it), but not
// for ever: a cluster whose autoscaler launches and deletes machines, or
// whose workers restart, would otherwise grow by one record per
// incarnation it ever ran, in memory and in every snapshot. The leader
// lists the retired instances whose retention window has passed and that
// nothing held refers to (RetiredDue), and ForgetInstances removes them.

// MaxForgetInstances bounds one ForgetInstances command.
const MaxForgetInstances = 1000

// ForgetInstances removes retired instances from the state: those retired
// at or before Before that no held batch's attempt and no machine refers
// to (the others are left, so a stale or repeated command is harmless).
// The leader sends those RetiredDue listed with Before = now - retention.
type ForgetInstances struct {
	Now       int64
	Before    int64
	Instances []uint32
}

// Type implements Command.
func (*ForgetInstances) Type() CommandType { return CmdForgetInstances }

// ForgetInstancesResult lists the instances removed, by ID.
type ForgetInstancesResult struct{ Forgotten []uint32 }

func (s *instanceBook) applyForgetInstances(c *ForgetInstances) any {
	if len(c.Instances) > MaxForgetInstances {
		return errorf(ErrInvalid, "%d instances to forget in one command; at most %d", len(c.Instances), MaxForgetInstances)
	}
	cands := map[uint32]bool{}
	for _, id := range c.Instances {
		if inst := s.instances[id]; inst != nil && s.retiredBefore(inst, c.Before) {
			cands[id] = true
		}
	}
	s.dropReferenced(cands)
	res := &ForgetInstancesResult{}
	for _, id := range slices.Sorted(maps.Keys(cands)) {
		inst := s.instances[id]
		if s.instTokens[inst.TokenHash] == id {
			delete(s.instTokens, inst.TokenHash)
		}
		delete(s.instances, id)
		res.Forgotten = append(res.Forgotten, id)
	}
	return res
}

// retiredBefore: the instance is retired, at or before cutoff (unix ns).
func (s *instanceBook) retiredBefore(inst *Instance, cutoff int64) bool {
	return !inst.Active && inst.Retired <= cutoff
}

// dropReferenced removes from cands every instance that a machine, or an
// attempt of a held batch (the current one of a job, or one in its
// history), refers to: a read of the attempt shows the instance's name,
// region and cluster, and prices it by the instance's pool and launch
// config. It walks every held job, so it runs only with candidates.
func (s *instanceBook) dropReferenced(cands map[uint32]bool) {
	if len(cands) == 0 {
		return
	}
	for _, m := range s.machines {
		delete(cands, m.Instance)
	}
	for _, id := range s.batchIDs {
		if len(cands) == 0 {
			return
		}
		b := s.batches[id]
		for i := range b.jobs {
			if b.jobs[i].attempt > 0 {
				delete(cands, b.jobs[i].instance)
			}
		}
		for _, recs := range b.history {
			for _, rec := range recs {
				delete(cands, rec.Instance)
			}
		}
	}
}

// RetiredDue lists retired instances whose retention window has passed
// (retired at or before cutoff, unix ns) and that nothing held refers
// to, by ID, at most max: what ForgetInstances would remove.
func (s *instanceBook) RetiredDue(cutoff int64, max int) []uint32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	cands := map[uint32]bool{}
	for id, inst := range s.instances {
		if s.retiredBefore(inst, cutoff) {
			cands[id] = true
		}
	}
	s.dropReferenced(cands)
	out := slices.Sorted(maps.Keys(cands))
	if len(out) > max {
		out = out[:max]
	}
	return out
}
