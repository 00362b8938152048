package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/server/changes"
	"github.com/drover-sched/drover/server/state"
)

// The change stream's pace and bounds.
const (
	changeHeartbeat = 15 * time.Second
	// changeFrame bounds the changes one frame carries; a reader that
	// falls further behind gets the rest in the next frames.
	changeFrame = 4096
	// changeAccessTTL is how long a stream trusts what it found of its
	// reader's access to a batch (a role taken away ends what it sees
	// within it).
	changeAccessTTL = 5 * time.Second
	// changeWriteTimeout ends a stream whose reader takes no frame for
	// this long (a client that stopped reading holds no slot for ever).
	changeWriteTimeout = 30 * time.Second
	// maxChangeStreams are the change streams one user holds open on a
	// server (the web UI's live pages each hold one), and
	// maxChangeStreamsTotal those of every user together.
	maxChangeStreams      = 32
	maxChangeStreamsTotal = 2000
)

// stillValid reads the request's token again: a stream outlives the
// check made when it opened, and ends when its token is revoked or
// expires or its user is deleted. It returns the user as the state has
// it now (an admin may have become none).
func (s *Server) stillValid(r *http.Request) (state.User, bool) {
	u, _, st := s.state.Authenticate(token.Hash(bearer(r)), time.Now())
	return u, st == state.TokenValid
}

// handleChanges streams the change feed (server/changes) as
// newline-delimited JSON frames (api.ChangeFrame), from after ?index= (0
// or none: from now), filtered by ?topic= terms, and only the changes of
// batches the caller may read (the other topics are of pages every user
// reads; Worker is an admin's). The first frame is written at once, then
// one per applied group with changes the reader wants, and a heartbeat
// frame every 15 s.
func (s *Server) handleChanges(w http.ResponseWriter, r *http.Request) {
	if s.changes == nil {
		s.writeErr(w, codedf(http.StatusServiceUnavailable, "this server keeps no change feed"))
		return
	}
	q := r.URL.Query()
	terms := q["topic"]
	if len(terms) > api.MaxChangeTopics {
		s.writeErr(w, codedf(http.StatusBadRequest, "%d topic terms; at most %d", len(terms), api.MaxChangeTopics))
		return
	}
	for _, t := range terms {
		if len(t) > api.MaxChangeKey {
			s.writeErr(w, codedf(http.StatusBadRequest, "topic term of %d bytes; at most %d", len(t), api.MaxChangeKey))
			return
		}
	}
	filter, err := changes.ParseFilter(terms)
	if err != nil {
		s.writeErr(w, badRequest(err))
		return
	}
	var index uint64
	if v := q.Get("index"); v != "" {
		if index, err = strconv.ParseUint(v, 10, 64); err != nil {
			s.writeErr(w, codedf(http.StatusBadRequest, "index %q is not a number", v))
			return
		}
	}
	user := userOf(r)
	release, err := s.changeStreams.take(user.Name)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	defer release()
	viewer := state.Viewer{Name: user.Name, Admin: user.Admin}
	type seen struct {
		ok bool
		at time.Time
	}
	access := map[uint64]seen{}
	keep := func(c changes.Change) bool {
		if !filter.Wants(c) {
			return false
		}
		switch c.Topic {
		case changes.Batch, changes.Job:
			a, ok := access[c.Batch]
			if !ok || time.Since(a.at) > changeAccessTTL {
				if len(access) > 10_000 {
					clear(access)
				}
				a = seen{ok: s.state.Access(c.Batch, viewer) >= state.Visible, at: time.Now()}
				access[c.Batch] = a
			}
			return a.ok
		case changes.Worker:
			return user.Admin
		}
		return true
	}
	noWriteDeadline(w)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	send := func(f api.ChangeFrame) bool {
		// The token first: a revoked or expired one, or a deleted user,
		// ends the stream; a user no longer admin sees what a user does.
		u, ok := s.stillValid(r)
		if !ok {
			return false
		}
		if u.Admin != user.Admin {
			user, viewer = u, state.Viewer{Name: u.Name, Admin: u.Admin}
			clear(access)
		}
		_ = rc.SetWriteDeadline(time.Now().Add(changeWriteTimeout))
		if err := enc.Encode(f); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	wake := s.changes.Wait()
	if index == 0 {
		index = s.changes.Index()
		if !send(api.ChangeFrame{Index: index}) {
			return
		}
	} else {
		p := s.changes.Since(index, keep, changeFrame)
		if !send(frameOf(p)) {
			return
		}
		index = p.Index
	}
	beat := time.NewTicker(changeHeartbeat)
	defer beat.Stop()
	var hold <-chan time.Time // while a frame of shared topics only waits for its pace
	var lastShared time.Time
	for {
		select {
		case <-r.Context().Done():
			return
		case <-beat.C:
			if !send(api.ChangeFrame{Index: index}) {
				return
			}
			continue
		case <-wake:
			wake = s.changes.Wait()
		case <-hold:
			hold = nil
		}
		for {
			p := s.changes.Since(index, keep, changeFrame)
			if !user.Admin && !p.Reload && len(p.Changes) > 0 && sharedOnly(p.Changes) {
				// What every user sees (queues' use, machines,
				// clusters) is told a user at most every sharedPace,
				// so it does not time another tenant's jobs one by one.
				if wait := sharedPace - time.Since(lastShared); wait > 0 {
					if hold == nil {
						hold = time.After(wait)
					}
					break
				}
				lastShared = time.Now()
			}
			index = p.Index
			if (len(p.Changes) > 0 || p.Reload) && !send(frameOf(p)) {
				return
			}
			if len(p.Changes) < changeFrame || p.Reload {
				break
			}
		}
	}
}

// sharedPace is how often a user who is not an admin is told of changes
// of the shared topics alone (queues, machines, clusters).
const sharedPace = 2 * time.Second

// sharedOnly: no change of a batch or a job among cs.
func sharedOnly(cs []changes.Change) bool {
	for _, c := range cs {
		if c.Topic == changes.Batch || c.Topic == changes.Job {
			return false
		}
	}
	return true
}

func frameOf(p changes.Page) api.ChangeFrame {
	f := api.ChangeFrame{Index: p.Index, Reload: p.Reload}
	for _, c := range p.Changes {
		f.Changes = append(f.Changes, api.Change{Index: c.Index, Topic: string(c.Topic), Key: c.Key()})
	}
	return f
}
