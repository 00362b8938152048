package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/drover-sched/drover/api"
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
	changeAccessTTL = 30 * time.Second
	// maxChangeStreams are the change streams one user holds open on a
	// server (the web UI's live pages each hold one).
	maxChangeStreams = 32
)

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
	viewer := viewerOf(r)
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
		}
		wake = s.changes.Wait()
		for {
			p := s.changes.Since(index, keep, changeFrame)
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

func frameOf(p changes.Page) api.ChangeFrame {
	f := api.ChangeFrame{Index: p.Index, Reload: p.Reload}
	for _, c := range p.Changes {
		f.Changes = append(f.Changes, api.Change{Index: c.Index, Topic: string(c.Topic), Key: c.Key})
	}
	return f
}
