package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/drover-sched/drover/api"
)

// task runs one attempt through the worker's executor.
type task struct {
	w   *Worker
	a   api.Assignment
	dir string

	// ctx is cancelled when the job is killed: it aborts a start in
	// progress, and run stops a running command when it is done.
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	killWhy   string // set when the control plane or a timeout ends the job
	abandoned bool   // the worker is leaving: report nothing
	done      bool
}

func newTask(w *Worker, a api.Assignment) *task {
	dir := filepath.Join(w.cfg.DataDir, "jobs", fmt.Sprintf("%d-%d-%d", a.BatchID, a.JobID, a.Attempt))
	ctx, cancel := context.WithCancel(context.Background())
	return &task{w: w, a: a, dir: dir, ctx: ctx, cancel: cancel}
}

func (t *task) finished() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done
}

// kill ends the job (SIGTERM, then SIGKILL after the grace period); it will
// be reported as cancelled.
func (t *task) kill(reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.killWhy != "" || t.done {
		return
	}
	t.killWhy = reason
	t.cancel()
}

// abandon kills the job without reporting it.
func (t *task) abandon(reason string) {
	t.mu.Lock()
	t.abandoned = true
	t.mu.Unlock()
	t.kill(reason)
}

// reason is why the job was killed, or "".
func (t *task) reason() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.killWhy
}

// spec is what the executor needs to run the attempt.
func (t *task) spec() Spec {
	env := []string{
		"DROVER_BATCH_ID=" + strconv.FormatInt(t.a.BatchID, 10),
		"DROVER_JOB_ID=" + strconv.FormatInt(t.a.JobID, 10),
		"DROVER_ATTEMPT=" + strconv.Itoa(t.a.Attempt),
		"DROVER_INDEX=" + strconv.FormatInt(t.a.ArrayIndex, 10),
		"DROVER_JOB_NAME=" + t.a.Name,
		"DROVER_CPU=" + strconv.FormatFloat(t.a.CPU, 'f', -1, 64),
		"DROVER_MEMORY=" + strconv.FormatInt(t.a.Memory, 10),
	}
	for k, v := range t.a.Env {
		env = append(env, k+"="+v)
	}
	return Spec{Ref: t.a.AttemptRef, Command: t.a.Command, Env: env, Dir: t.dir}
}

// run executes the attempt and queues its started and completed events. The
// log is fully shipped before the completed event is queued, so a job that
// is final always has its whole log.
func (t *task) run() {
	log := t.w.log.With("attempt", t.a.AttemptRef.String())
	start := time.Now()
	ship := newShipper(t.w, t.a.AttemptRef)
	ev := api.AttemptEvent{AttemptRef: t.a.AttemptRef, Kind: api.EventCompleted, StartTime: start}
	defer func() {
		t.mu.Lock()
		t.done = true
		abandoned := t.abandoned
		t.mu.Unlock()
		if !t.w.cfg.KeepWorkDirs {
			os.RemoveAll(t.dir)
		}
		if abandoned {
			ship.abort()
			return
		}
		ship.close()
		if ev.EndTime.IsZero() {
			ev.EndTime = time.Now()
		}
		log.Debug("attempt ended", "outcome", ev.Outcome, "exit", ev.ExitCode, "took", ev.EndTime.Sub(start))
		t.w.emit(ev)
	}()
	fail := func(msg string) {
		ev.Outcome, ev.Message = api.OutcomeError, msg
		fmt.Fprintf(ship, "drover: %s\n", msg)
	}
	if err := os.Mkdir(t.dir, 0o755); err != nil {
		fail(fmt.Sprintf("create working directory: %v", err))
		return
	}
	h, err := t.w.exec.Start(t.ctx, t.spec(), ship)
	if err != nil {
		if errors.Is(err, context.Canceled) && t.ctx.Err() != nil {
			// Killed before the command started.
			ev.Outcome, ev.Message = api.OutcomeCancelled, t.reason()
			return
		}
		// A *StartError (the program is missing or not executable) reads
		// "cannot run ..." or "cannot start ...": it is the message.
		fail(err.Error())
		return
	}
	start = time.Now()
	ev.StartTime = start
	t.w.emit(api.AttemptEvent{AttemptRef: t.a.AttemptRef, Kind: api.EventStarted, StartTime: start})

	type ended struct {
		res Result
		err error
	}
	waited := make(chan ended, 1)
	go func() {
		res, err := h.Wait()
		waited <- ended{res, err}
	}()
	var timeout <-chan time.Time
	if t.a.TimeoutSeconds > 0 {
		timer := time.NewTimer(time.Duration(t.a.TimeoutSeconds * float64(time.Second)))
		defer timer.Stop()
		timeout = timer.C
	}
	timedOut := false
	var end ended
	select {
	case end = <-waited:
	case <-t.ctx.Done():
		h.Stop(t.w.cfg.KillGrace)
		end = <-waited
	case <-timeout:
		timedOut = true
		h.Stop(t.w.cfg.KillGrace)
		end = <-waited
	}
	ev.EndTime = time.Now()
	if end.err != nil {
		log.Warn("lost track of the job", "err", end.err)
	}
	ev.ExitCode = end.res.ExitCode
	why := t.reason()
	switch {
	case timedOut:
		ev.Outcome = api.OutcomeFailed
		ev.Message = fmt.Sprintf("timed out after %s and was killed", time.Duration(t.a.TimeoutSeconds*float64(time.Second)))
		fmt.Fprintf(ship, "drover: %s\n", ev.Message)
	case why != "":
		ev.Outcome, ev.Message = api.OutcomeCancelled, why
	case end.err == nil && end.res.ExitCode == 0:
		ev.Outcome = api.OutcomeSuccess
	default:
		ev.Outcome = api.OutcomeFailed
		if end.res.Signal != 0 {
			ev.Message = fmt.Sprintf("killed by signal %s", end.res.Signal)
		} else {
			ev.Message = fmt.Sprintf("exited with code %d", end.res.ExitCode)
		}
	}
}

// shipper buffers a job's output and uploads it in numbered chunks: every
// LogFlushInterval while the job runs and once more at the end.
type shipper struct {
	w   *Worker
	ref api.AttemptRef

	mu        sync.Mutex
	buf       bytes.Buffer
	total     int64
	truncated bool
	refused   bool // a server refused a chunk for good
	seq       int

	stop    chan struct{}
	done    chan struct{}
	discard bool
}

var _ io.Writer = (*shipper)(nil)

func newShipper(w *Worker, ref api.AttemptRef) *shipper {
	s := &shipper{w: w, ref: ref, stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *shipper) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.truncated {
		return len(p), nil
	}
	room := s.w.cfg.MaxLogBytes - s.total
	if int64(len(p)) > room {
		s.buf.Write(p[:room])
		s.total += room
		fmt.Fprintf(&s.buf, "\ndrover: log truncated after %d bytes\n", s.w.cfg.MaxLogBytes)
		s.truncated = true
		return len(p), nil
	}
	s.buf.Write(p)
	s.total += int64(len(p))
	return len(p), nil
}

func (s *shipper) loop() {
	defer close(s.done)
	tick := time.NewTicker(s.w.cfg.LogFlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			s.mu.Lock()
			discard := s.discard
			s.mu.Unlock()
			if !discard {
				s.flush(10)
			}
			return
		case <-tick.C:
			s.flush(1)
		}
	}
}

// maxChunk bounds one uploaded chunk, well below what servers accept.
const maxChunk = 4 << 20

// flush uploads what is buffered as the next chunks, each try of each
// chunk up to tries times. A chunk that cannot be uploaded is kept for the
// next flush, unless the server refused it for good (a 4xx: the attempt is
// no longer this worker's, or its log is over the server's limit): then
// the rest of the log is dropped, not retried forever.
func (s *shipper) flush(tries int) {
	for {
		s.mu.Lock()
		if s.buf.Len() == 0 || s.refused {
			// Nothing to ship: a job that prints nothing costs no upload,
			// and its log reads as empty.
			s.mu.Unlock()
			return
		}
		data := append([]byte(nil), s.buf.Bytes()[:min(s.buf.Len(), maxChunk)]...)
		seq := s.seq
		s.mu.Unlock()
		var err error
		for i := 0; i < tries; i++ {
			if i > 0 {
				time.Sleep(time.Duration(i) * 200 * time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err = s.w.client.UploadLogChunk(ctx, s.ref, seq, data)
			cancel()
			if err == nil || refusedForGood(err) {
				break
			}
		}
		s.mu.Lock()
		switch {
		case err == nil:
			s.buf.Next(len(data))
			s.seq++
			s.mu.Unlock()
			continue
		case refusedForGood(err):
			s.refused = true
			s.buf.Reset()
			s.mu.Unlock()
			s.w.log.Warn("log upload refused; dropping the rest of this attempt's log", "attempt", s.ref.String(), "err", err)
			return
		}
		s.mu.Unlock()
		s.w.log.Warn("log upload failed", "attempt", s.ref.String(), "err", err)
		return
	}
}

// refusedForGood reports whether a server answered with a 4xx that a retry
// cannot change (429 asks to come back later).
func refusedForGood(err error) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.StatusCode >= 400 && ae.StatusCode < 500 && ae.StatusCode != 429
}

// close ships the rest of the log and stops the shipper.
func (s *shipper) close() {
	close(s.stop)
	<-s.done
}

// abort stops the shipper without shipping what is left.
func (s *shipper) abort() {
	s.mu.Lock()
	s.discard = true
	s.mu.Unlock()
	s.close()
}
