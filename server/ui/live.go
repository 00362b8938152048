package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
)

// Live updates are server-sent events. A stream waits for the server's
// next applied log entries (Deps.Changes), reads again what it shows
// through the API, and sends it when it changed: at most one read per
// minGap, nothing while nothing changes. A job's log is not in the Raft
// log (workers upload it to the servers' log store), so its stream also
// looks every logPoll while the job runs.
const (
	minGap    = 500 * time.Millisecond
	logPoll   = time.Second
	heartbeat = 15 * time.Second
	// maxStreamLife ends a stream after a while (Deps.StreamLife); the
	// browser reconnects (EventSource does), with a fresh check of its
	// session, resuming from the last event's id.
	maxStreamLife = 10 * time.Minute
)

func (u *UI) streamLife() time.Duration {
	if u.d.StreamLife > 0 {
		return u.d.StreamLife
	}
	return maxStreamLife
}

// stream is one open server-sent events response.
type stream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (u *UI) openStream(w http.ResponseWriter, r *http.Request, s *session) (*stream, func(), error) {
	user := s.me.Name
	u.mu.Lock()
	switch {
	case u.streams >= maxStreams:
		u.mu.Unlock()
		return nil, nil, &api.Error{StatusCode: http.StatusServiceUnavailable, Message: fmt.Sprintf("this server holds %d live streams, the most it may; the page still works without live updates", maxStreams)}
	case u.byUser[user] >= maxStreamsPerUser:
		u.mu.Unlock()
		return nil, nil, &api.Error{StatusCode: http.StatusTooManyRequests, Message: fmt.Sprintf("user %s has %d live pages open on this server, the most one may; close some (the pages still read without live updates)", user, maxStreamsPerUser)}
	}
	u.streams++
	u.byUser[user]++
	u.mu.Unlock()
	done := func() {
		u.mu.Lock()
		u.streams--
		if u.byUser[user]--; u.byUser[user] <= 0 {
			delete(u.byUser, user)
		}
		u.mu.Unlock()
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &stream{w: w, rc: rc}, done, nil
}

// send writes one event; data may hold newlines (each line its own data
// field, as the format wants).
func (s *stream) send(event, data string) error { return s.sendID(event, "", data) }

// sendID writes one event with an id (none when empty): the browser
// sends the last one back as Last-Event-ID when it reconnects.
func (s *stream) sendID(event, id, data string) error {
	var b strings.Builder
	b.WriteString("event: " + event + "\n")
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	for _, line := range strings.Split(data, "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	if _, err := io.WriteString(s.w, b.String()); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *stream) ping() error {
	if _, err := io.WriteString(s.w, ": ping\n\n"); err != nil {
		return err
	}
	return s.rc.Flush()
}

// wait waits for the next change (or the poll, when not zero), then at
// least until minGap after last; false when the stream should end.
func (u *UI) wait(ctx context.Context, s *stream, changed <-chan struct{}, poll time.Duration, last time.Time, end time.Time) bool {
	beat := time.NewTimer(heartbeat)
	defer beat.Stop()
	var tick <-chan time.Time
	if poll > 0 {
		t := time.NewTimer(poll)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return false
		case <-u.closed:
			return false
		case <-changed:
		case <-tick:
		case <-beat.C:
			if s.ping() != nil {
				return false
			}
			beat.Reset(heartbeat)
			continue
		}
		break
	}
	if gap := minGap - time.Since(last); gap > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-u.closed:
			return false
		case <-time.After(gap):
		}
	}
	return time.Now().Before(end)
}

// maxLogEvent bounds the new log text one event carries; a stream that
// falls further behind skips ahead (the page says so).
const maxLogEvent = 256 << 10

// jobLogLive streams what a job's log gains from ?offset= on, as JSON
// strings (the page appends them as text), until the job is done and its
// log read to the end.
func (u *UI) jobLogLive(w http.ResponseWriter, r *http.Request, s *session) {
	id, jid, err := jobPath(r)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	offset, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
	attempt, _ := strconv.Atoi(r.URL.Query().Get("attempt"))
	if at, off, ok := strings.Cut(r.Header.Get("Last-Event-ID"), ":"); ok {
		// A reconnection: from the last byte the browser got, not the
		// offset of the page it opened.
		a, aerr := strconv.Atoi(at)
		o, oerr := strconv.ParseInt(off, 10, 64)
		if aerr == nil && oerr == nil {
			attempt, offset = a, o
		}
	}
	offset, attempt = max(offset, 0), max(attempt, 0)
	ctx := withRemote(r.Context(), r)
	st, done, err := u.openStream(w, r, s)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	defer done()
	end := time.Now().Add(u.streamLife())
	for {
		changed := u.d.Changes()
		j, err := s.client.GetJob(ctx, id, jid)
		if err != nil {
			_ = st.send("failed", errMessage(err))
			return
		}
		final := jobFinal(j.State)
		latest := 0
		if n := len(j.Attempts); n > 0 && j.Attempts[n-1].StartTime != nil {
			latest = j.Attempts[n-1].Attempt
		}
		if latest != 0 && latest != attempt {
			// A new attempt: its log starts over.
			if attempt != 0 {
				if st.sendID("attempt", fmt.Sprintf("%d:0", latest), strconv.Itoa(latest)) != nil {
					return
				}
			}
			attempt, offset = latest, 0
		}
		if attempt != 0 {
			text, next, err := u.readFrom(ctx, s.client, id, jid, attempt, offset)
			switch {
			case err == nil && text != "":
				data, _ := json.Marshal(inert(text))
				offset = next
				if st.sendID("append", fmt.Sprintf("%d:%d", attempt, offset), string(data)) != nil {
					return
				}
			case err != nil && !api.IsStatus(err, http.StatusNotFound):
				_ = st.send("failed", errMessage(err))
				return
			}
		}
		if final {
			_ = st.send("end", j.State)
			return
		}
		if !u.wait(ctx, st, changed, logPoll, time.Now(), end) {
			return
		}
	}
}

// readFrom reads an attempt's log from offset, at most maxLogEvent bytes
// (from further on when more has come); next is where the next read
// starts.
func (u *UI) readFrom(ctx context.Context, c *api.Client, batch, job int64, attempt int, offset int64) (string, int64, error) {
	ls, err := c.OpenJobLogAt(ctx, batch, job, attempt, offset)
	if err != nil {
		return "", offset, err
	}
	defer ls.Close()
	skipped := ""
	if ls.Size-offset > maxLogEvent {
		ls.Close()
		skipped = fmt.Sprintf("\n[drover: %d bytes of this log skipped; download it for all of it]\n", ls.Size-maxLogEvent-offset)
		offset = ls.Size - maxLogEvent
		if ls, err = c.OpenJobLogAt(ctx, batch, job, attempt, offset); err != nil {
			return "", offset, err
		}
		defer ls.Close()
	}
	data, err := io.ReadAll(io.LimitReader(ls, maxLogEvent))
	if err != nil {
		return "", offset, err
	}
	return skipped + string(data), offset + int64(len(data)), nil
}
