package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
)

// One live model. A page that shows what changes is built by one data
// function (batchData, jobData, ...), which the page's handler renders
// whole and its live stream renders again, region by region, each time
// the change stream (GET /api/v1/changes) says something the page shows
// changed. Every region of a page (data-region="name" in its template,
// whose content is the template "region-name") comes from the same data,
// read once, and the browser swaps them all at once: no part of a page
// shows another moment than the rest. Each event carries the change
// stream's index as its id, so a browser that reconnects (EventSource
// sends Last-Event-ID) resumes where it was: the stream sends the page
// as it is now, then follows the changes after that index.

// livePage is a page that follows the change stream.
type livePage struct {
	template string
	regions  []string
	// topics are the change topics the page follows.
	topics func(r *http.Request) []string
	data   func(u *UI, r *http.Request, s *session) (map[string]any, error)
	// tick: what the page shows also grows with time (the cost of
	// running attempts), so it is read again this often while live.
	tick time.Duration
	// gap is the least time between two reads of the page (0: minGap).
	gap time.Duration
}

// livePages are the pages with live streams, by their route pattern.
var livePages = map[string]*livePage{
	"GET /ui/batches": {template: "batches", regions: []string{"batches"}, tick: 10 * time.Second,
		topics: func(*http.Request) []string { return []string{api.ChangeBatch} },
		data:   (*UI).batchesData},
	"GET /ui/{$}": {template: "batches", regions: []string{"batches"}, tick: 10 * time.Second,
		topics: func(*http.Request) []string { return []string{api.ChangeBatch} },
		data:   (*UI).batchesData},
	"GET /ui/batches/{id}": {template: "batch", regions: []string{"summary", "jobs"}, tick: 5 * time.Second,
		topics: func(r *http.Request) []string { return []string{api.ChangeBatch + ":" + r.PathValue("id")} },
		data:   (*UI).batchData},
	"GET /ui/batches/{id}/jobs/{job}": {template: "job", regions: []string{"job", "attempts"}, tick: 5 * time.Second,
		topics: func(r *http.Request) []string {
			return []string{api.ChangeJob + ":" + r.PathValue("id") + "/" + r.PathValue("job")}
		},
		data: (*UI).jobData},
	"GET /ui/clusters": {template: "clusters", regions: []string{"clusters"}, tick: 10 * time.Second,
		topics: func(*http.Request) []string { return []string{api.ChangeCluster, api.ChangeWorker} },
		data:   (*UI).clustersData},
	"GET /ui/billing": {template: "billing", regions: []string{"billing"}, tick: 30 * time.Second, gap: 10 * time.Second,
		topics: func(*http.Request) []string { return []string{api.ChangeBatch} },
		data:   (*UI).billingData},
	"GET /ui/queues": {template: "queues", regions: []string{"queues"}, tick: 10 * time.Second,
		topics: func(*http.Request) []string { return []string{api.ChangeQueue} },
		data:   (*UI).queuesData},
	"GET /ui/workers": {template: "workers", regions: []string{"workers"}, tick: 10 * time.Second,
		topics: func(*http.Request) []string { return []string{api.ChangeWorker} },
		data:   (*UI).workersData},
	"GET /ui/machines": {template: "machines", regions: []string{"machines"}, tick: 10 * time.Second,
		topics: func(*http.Request) []string { return []string{api.ChangeMachine} },
		data:   (*UI).machinesData},
	"GET /ui/autoscaler": {template: "autoscaler", regions: []string{"autoscaler"}, tick: 10 * time.Second,
		topics: func(*http.Request) []string { return []string{api.ChangeMachine} },
		data:   (*UI).autoscalerData},
}

// liveURL is the live stream of the page r asked for.
func liveURL(r *http.Request) string {
	return "/ui/live?" + url.Values{"page": {r.URL.RequestURI()}}.Encode()
}

// liveMux finds a live page's route (and its path values) for a URL.
var liveMux = func() *http.ServeMux {
	m := http.NewServeMux()
	for pattern := range livePages {
		m.HandleFunc(pattern, func(http.ResponseWriter, *http.Request) {})
	}
	return m
}()

// resolveLive is the live page a stream asks for, and the request that
// page would have been read with.
func resolveLive(r *http.Request) (*livePage, *http.Request, error) {
	target, err := url.Parse(r.URL.Query().Get("page"))
	if err != nil || target.IsAbs() || target.Host != "" || !strings.HasPrefix(target.Path, Prefix) || len(r.URL.Query().Get("page")) > 2048 {
		return nil, nil, &api.Error{StatusCode: http.StatusBadRequest, Message: "page= names no page of this UI"}
	}
	pr := r.Clone(r.Context())
	pr.Method, pr.URL, pr.RequestURI = http.MethodGet, target, target.RequestURI()
	_, pattern := liveMux.Handler(pr)
	p := livePages[pattern]
	if p == nil {
		return nil, nil, &api.Error{StatusCode: http.StatusNotFound, Message: "the page " + target.Path + " has no live updates"}
	}
	// Route it for real, so the page's path values are set.
	var routed *http.Request
	m := http.NewServeMux()
	m.HandleFunc(pattern, func(_ http.ResponseWriter, rr *http.Request) { routed = rr })
	m.ServeHTTP(discard{}, pr)
	if routed == nil {
		return nil, nil, &api.Error{StatusCode: http.StatusNotFound, Message: "the page " + target.Path + " has no live updates"}
	}
	return p, routed, nil
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) WriteHeader(int)             {}

// pageEvent is what a live page's event carries.
type pageEvent struct {
	// Regions are the page's regions, rendered.
	Regions map[string]string `json:"regions"`
	// Done: the page will not change again (the stream ends).
	Done bool `json:"done,omitempty"`
}

// livePageStream streams a page's regions: at once, then each time the
// change stream has a change the page follows (at most once per minGap),
// or its tick passes, until the page no longer changes, the stream's
// life ends (the browser reconnects, resuming from the last event's
// index) or the browser goes.
func (u *UI) livePageStream(w http.ResponseWriter, r *http.Request, s *session) {
	p, pr, err := resolveLive(r)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	var index uint64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		index, _ = strconv.ParseUint(v, 10, 64)
	}
	ctx, cancel := context.WithCancel(withRemote(r.Context(), r))
	defer cancel()
	st, done, err := u.openStream(w, r, s)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	defer done()
	frames := make(chan *api.ChangeFrame, 16)
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- s.client.WatchChanges(ctx, index, p.topics(pr), func(f *api.ChangeFrame) error {
			select {
			case frames <- f:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	t := u.pages[p.template]
	end := time.Now().Add(u.streamLife())
	var sent []byte
	var tick <-chan time.Time
	if p.tick > 0 {
		tk := time.NewTicker(p.tick)
		defer tk.Stop()
		tick = tk.C
	}
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	life := time.NewTimer(time.Until(end))
	defer life.Stop()
	last := time.Time{}
	for {
		// Wait for the first frame (the stream is open: what is read
		// next is at least at its index), then for a change.
		select {
		case f := <-frames:
			index = max(index, f.Index)
			if index != 0 && len(f.Changes) == 0 && !f.Reload && sent != nil {
				continue // a heartbeat
			}
		case <-tick:
			if sent == nil {
				continue
			}
		case err := <-watchErr:
			if err == nil || errors.Is(err, context.Canceled) {
				return // the server ends the stream: the browser reconnects
			}
			_ = st.send("failed", errMessage(err))
			return
		case <-beat.C:
			if st.ping() != nil {
				return
			}
			continue
		case <-life.C:
			return
		case <-ctx.Done():
			return
		case <-u.closed:
			return
		}
		// Changes come in bursts: take what else came within minGap.
		least := minGap
		if p.gap > 0 {
			least = p.gap
		}
		if gap := least - time.Since(last); gap > 0 && sent != nil {
			timer := time.NewTimer(gap)
		drain:
			for {
				select {
				case f := <-frames:
					index = max(index, f.Index)
				case <-timer.C:
					break drain
				case <-ctx.Done():
					timer.Stop()
					return
				}
			}
		}
		last = time.Now()
		data, err := p.data(u, pr, s)
		switch {
		case err != nil && (api.IsStatus(err, http.StatusServiceUnavailable) || errors.Is(err, context.DeadlineExceeded)):
			// An election, a slow answer: the next change or tick
			// reads again.
			continue
		case err != nil:
			_ = st.send("failed", errMessage(err))
			return
		}
		u.pageData(data, s, p.template)
		ev := pageEvent{Regions: map[string]string{}, Done: data["Live"] == nil}
		for _, name := range p.regions {
			var buf bytes.Buffer
			if err := t.ExecuteTemplate(&buf, "region-"+name, data); err != nil {
				u.d.Log.Error("ui: render a live region", "page", p.template, "region", name, "err", err)
				return
			}
			ev.Regions[name] = buf.String()
		}
		body, _ := json.Marshal(ev)
		if !bytes.Equal(body, sent) || ev.Done {
			if st.sendID("page", strconv.FormatUint(index, 10), string(body)) != nil {
				return
			}
			sent = body
		}
		if ev.Done {
			return
		}
	}
}
