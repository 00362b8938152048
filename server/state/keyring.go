package state

import (
	"encoding/base64"
	"slices"
)

// MaxGossipKeys bounds the gossip keyring: a rotation needs two keys, and
// each server names its keys in its gossip metadata, which memberlist
// limits to 512 bytes.
const MaxGossipKeys = 8

// GossipKeyring sets the keys every server gossips with: Keys are base64,
// the first the one gossip is encrypted with (the primary). Op and Key
// record what the operator asked for (install, use or remove a key).
type GossipKeyring struct {
	Now  int64
	Op   string
	Key  string
	Keys []string
}

// Type implements Command.
func (*GossipKeyring) Type() CommandType { return CmdGossipKeyring }

// CheckGossipKeyring reports what is wrong with a keyring, or nil.
func CheckGossipKeyring(keys []string) *ApplyError {
	if len(keys) == 0 || len(keys) > MaxGossipKeys {
		return errorf(ErrInvalid, "a gossip keyring holds 1 to %d keys, not %d", MaxGossipKeys, len(keys))
	}
	for i, k := range keys {
		raw, err := base64.StdEncoding.DecodeString(k)
		if err != nil || (len(raw) != 16 && len(raw) != 24 && len(raw) != 32) {
			return errorf(ErrInvalid, "gossip key %d is not a base64 key of 16, 24 or 32 bytes", i+1)
		}
		if slices.Contains(keys[:i], k) {
			return errorf(ErrInvalid, "gossip key %d is in the keyring twice", i+1)
		}
	}
	return nil
}

func (s *memberBook) applyGossipKeyring(c *GossipKeyring) any {
	if err := CheckGossipKeyring(c.Keys); err != nil {
		return err
	}
	s.gossipKeys = slices.Clone(c.Keys)
	if s.hooks.Keyring != nil {
		s.hooks.Keyring()
	}
	return nil
}

// GossipKeyring returns the keys the servers were last told to use,
// primary first (nil: never rotated, each server uses the keys it started
// with).
func (s *memberBook) GossipKeyring() [][]byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out [][]byte
	for _, k := range s.gossipKeys {
		raw, _ := base64.StdEncoding.DecodeString(k) // checked before the log
		out = append(out, raw)
	}
	return out
}
