package state

import (
	"crypto/subtle"
	"time"
)

// One-time join tokens. A machine the autoscaler launches is given a token
// of its own instead of the worker secret: whatever the provider puts on
// the machine (GCE metadata, a Nomad task's environment, a file) every job
// on that machine can read, and the secret would let a job activate
// workers of its own and receive other tenants' work. The state keeps
// only the token's hash, bound to its machine, with its expiry (the
// launch plus the boot timeout); the first worker that joins the machine
// spends it. The leader stamps the times; nothing here reads a clock.

// JoinTokens records the join tokens the leader minted for requested
// machines, before it asks a provider for them. A machine keeps the first
// token recorded for it: a second JoinTokens for the same machine (a
// leader repeating a launch) changes nothing, so a machine never has two
// valid tokens.
type JoinTokens struct {
	Now    int64
	Tokens []JoinToken
}

// JoinToken is one machine's join token: its hash, and when it expires.
type JoinToken struct {
	Machine string
	Hash    string
	Expires int64
}

// Type implements Command.
func (*JoinTokens) Type() CommandType { return CmdJoinTokens }

// admitJoin is the one rule for a worker that joins an autoscaled machine
// without the worker secret; the API checks it before the activation
// reaches the log (CheckJoin) and apply checks it again, so two
// activations racing with one token cannot both get in. The worker proves
// itself with the machine's join token (matching the machine's hash, not
// yet spent, not expired at now), or with the instance token of the
// machine's last worker (previousHash): a worker restarted with its data
// dir rejoins after its token was spent; one that lost its data dir
// cannot, and the autoscaler replaces its machine.
func (s *instanceBook) admitJoin(machine, joinHash, previousHash string, now int64) *ApplyError {
	m := s.machines[machine]
	if m == nil || !machineLive(m.State) || m.State == MachineDraining {
		return errorf(ErrUnauthorized, "machine %.80q is not one the autoscaler has live: no worker joins it", machine)
	}
	if previousHash != "" && m.Instance != 0 {
		if inst := s.instances[m.Instance]; inst != nil && hashEqual(inst.TokenHash, previousHash) {
			return nil
		}
	}
	switch {
	case joinHash == "" && previousHash == "":
		return errorf(ErrUnauthorized, "machine %s: a worker joins it with its join token (or the worker secret)", machine)
	case joinHash == "":
		return errorf(ErrUnauthorized, "machine %s: the previous instance token is not that of the machine's last worker, and no join token was given", machine)
	case m.JoinHash == "":
		return errorf(ErrUnauthorized, "machine %s has no join token yet: it joins with the token its launch gives it", machine)
	case !hashEqual(m.JoinHash, joinHash):
		return errorf(ErrUnauthorized, "the join token is not machine %s's: a token joins only the machine it was made for", machine)
	case m.JoinUsed != 0:
		return errorf(ErrUnauthorized, "machine %s's join token was spent at %s: a token joins once (a restarted worker rejoins with the instance token in its data dir; a machine whose worker lost it is replaced by the autoscaler)",
			machine, stamp(m.JoinUsed))
	case now >= m.JoinExpires:
		return errorf(ErrUnauthorized, "machine %s's join token expired at %s (its launch plus the autoscaler's boot timeout)", machine, stamp(m.JoinExpires))
	}
	return nil
}

// CheckJoin tells whether a worker may join a machine with a join token
// (its hash) or the previous instance token (its hash) at now: nil, or an
// *ApplyError of kind ErrUnauthorized saying why not.
func (s *instanceBook) CheckJoin(machine, joinHash, previousHash string, now int64) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.admitJoin(machine, joinHash, previousHash, now); err != nil {
		return err
	}
	return nil
}

// repeatedJoin returns the instance an activation made when the same
// activation (the same instance token, on the same machine) is applied
// again: a worker's retry racing its first try.
func (s *instanceBook) repeatedJoin(c *Activate) (uint32, bool) {
	id, ok := s.instTokens[c.TokenHash]
	if !ok {
		return 0, false
	}
	inst := s.instances[id]
	return id, inst != nil && inst.Active && inst.Machine == c.Machine
}

func hashEqual(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// stamp formats a time of the log for a message (UTC: the same on every
// server).
func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339) }
