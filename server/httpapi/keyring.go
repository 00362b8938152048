package httpapi

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"slices"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/cluster"
	"github.com/drover-sched/drover/server/state"
)

// Gossip is this server's gossip encryption.
type Gossip interface {
	Encrypted() bool
	// Keyring returns the keys, the one gossip is encrypted with first.
	Keyring() [][]byte
}

// keyring is the cluster's gossip keyring, primary first: the one last
// committed, or, before any rotation, the keys this server started with.
func (s *operatorHandlers) keyring() [][]byte {
	if committed := s.state.GossipKeyring(); len(committed) > 0 {
		return committed
	}
	return s.gossip.Keyring()
}

// keyringView is the cluster's keyring and what each live server tells of
// its own; pending lists the live servers whose keyring differs, and
// unreachable those the leader's Raft heartbeats fail to reach (a server
// that died a moment ago is there within a heartbeat, while gossip takes
// 4 to 24 s to declare it dead): they count for nothing, so a rotation
// right after a death neither waits for the dead server nor is refused
// for it. Raft brings them the keyring when they are back.
func (s *operatorHandlers) keyringView() api.GossipKeyring {
	keys := s.keyring()
	fps := make([]string, len(keys))
	for i, k := range keys {
		fps[i] = cluster.KeyFingerprint(k)
	}
	out := api.GossipKeyring{Keys: []api.GossipKey{}, Servers: []api.GossipServerState{}}
	if s.members != nil {
		down := s.node.Unreachable()
		for _, m := range s.members.Members() {
			if !m.Alive {
				continue
			}
			if slices.Contains(down, m.ID) {
				out.Unreachable = append(out.Unreachable, m.ID)
				continue
			}
			out.Servers = append(out.Servers, api.GossipServerState{ID: m.ID, Keys: m.Keys})
			same := len(m.Keys) == len(fps) && len(fps) > 0 && m.Keys[0] == fps[0]
			for _, fp := range fps {
				same = same && slices.Contains(m.Keys, fp)
			}
			if !same {
				out.Pending = append(out.Pending, m.ID)
			}
		}
	}
	for i, k := range keys {
		gk := api.GossipKey{Key: base64.StdEncoding.EncodeToString(k), Fingerprint: fps[i], Primary: i == 0, Servers: len(out.Servers)}
		for _, srv := range out.Servers {
			if slices.Contains(srv.Keys, fps[i]) {
				gk.Installed++
			}
		}
		out.Keys = append(out.Keys, gk)
	}
	return out
}

func (s *operatorHandlers) requireEncryptedGossip() error {
	if s.gossip == nil || !s.gossip.Encrypted() {
		return coded(http.StatusBadRequest, "gossip on the leader is not encrypted: start every server with -gossip-key-file before rotating keys")
	}
	return nil
}

func (s *operatorHandlers) handleGossipKeyring(w http.ResponseWriter, r *http.Request) (any, error) {
	if err := s.requireEncryptedGossip(); err != nil {
		return nil, err
	}
	return s.keyringView(), nil
}

// handleChangeGossipKeyring commits the keyring an install, use or remove
// makes of the leader's, then waits (up to the apply timeout) until every
// live server tells over gossip that it holds it. A use needs the key on
// every live server (or they could not read the leader's gossip), and a
// remove needs no live server to still encrypt with it.
func (s *operatorHandlers) handleChangeGossipKeyring(w http.ResponseWriter, r *http.Request) (any, error) {
	if err := s.requireEncryptedGossip(); err != nil {
		return nil, err
	}
	var req api.GossipKeyringRequest
	if err := decodeLimit(w, r, &req, maxUnauthenticatedBody, "a keyring request is one key"); err != nil {
		return nil, err
	}
	key, err := cluster.ParseGossipKey(req.Key)
	if err != nil {
		return nil, badRequest(err)
	}
	fp := cluster.KeyFingerprint(key)
	cur := s.keyring()
	has := slices.ContainsFunc(cur, func(k []byte) bool { return bytes.Equal(k, key) })
	view := s.keyringView()
	var next [][]byte
	switch req.Op {
	case "install":
		if has {
			break
		}
		if len(cur) >= state.MaxGossipKeys {
			return nil, codedf(http.StatusBadRequest, "the gossip keyring already holds %d keys (the limit): remove one first", state.MaxGossipKeys)
		}
		next = append(slices.Clone(cur), key)
	case "use":
		if !has {
			return nil, codedf(http.StatusBadRequest, "key %s is not installed: install it first with `drover operator gossip keyring install`", fp)
		}
		for _, srv := range view.Servers {
			if !slices.Contains(srv.Keys, fp) {
				return nil, codedf(http.StatusConflict, "server %s does not hold key %s yet, so it could not read gossip encrypted with it; retry once `drover operator gossip keyring list` shows it installed everywhere", srv.ID, fp)
			}
		}
		if bytes.Equal(cur[0], key) {
			break
		}
		next = [][]byte{key}
		for _, k := range cur {
			if !bytes.Equal(k, key) {
				next = append(next, k)
			}
		}
	case "remove":
		if !has {
			break
		}
		if bytes.Equal(cur[0], key) {
			return nil, codedf(http.StatusBadRequest, "key %s is the primary key: use another key first", fp)
		}
		for _, srv := range view.Servers {
			if len(srv.Keys) > 0 && srv.Keys[0] == fp {
				return nil, codedf(http.StatusConflict, "server %s still encrypts with key %s; retry once `drover operator gossip keyring list` shows it using the new key", srv.ID, fp)
			}
		}
		next = slices.DeleteFunc(slices.Clone(cur), func(k []byte) bool { return bytes.Equal(k, key) })
	default:
		return nil, codedf(http.StatusBadRequest, "op %q is not install, use or remove", req.Op)
	}
	if next != nil {
		enc := make([]string, len(next))
		for i, k := range next {
			enc[i] = base64.StdEncoding.EncodeToString(k)
		}
		if _, err := s.apply(&state.GossipKeyring{Now: time.Now().UnixNano(), Op: req.Op, Key: fp, Keys: enc}); err != nil {
			return nil, err
		}
	}
	deadline := time.Now().Add(s.cfg.ApplyTimeout)
	for {
		view = s.keyringView()
		if len(view.Pending) == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-r.Context().Done():
			return nil, r.Context().Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return view, nil
}
