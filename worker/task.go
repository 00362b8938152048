package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/drover-sched/drover/api"
)

// task runs one attempt as a process in a process group of its own.
type task struct {
	w   *Worker
	a   api.Assignment
	dir string

	mu        sync.Mutex
	cmd       *exec.Cmd
	killWhy   string // set when the control plane or a timeout ends the job
	abandoned bool   // the worker is leaving: report nothing
	done      bool
	killed    chan struct{}
}

func newTask(w *Worker, a api.Assignment) *task {
	dir := filepath.Join(w.cfg.DataDir, "jobs", fmt.Sprintf("%d-%d-%d", a.BatchID, a.JobID, a.Attempt))
	return &task{w: w, a: a, dir: dir, killed: make(chan struct{})}
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
	close(t.killed)
}

// abandon kills the job without reporting it.
func (t *task) abandon(reason string) {
	t.mu.Lock()
	t.abandoned = true
	t.mu.Unlock()
	t.kill(reason)
}

func (t *task) env() []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"USER=" + os.Getenv("USER"),
		"LOGNAME=" + os.Getenv("LOGNAME"),
		"HOME=" + t.dir,
		"TMPDIR=" + t.dir,
		"LANG=C.UTF-8",
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
	return env
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
	path, err := t.w.lookPath(t.a.Command[0])
	if err != nil {
		fail(fmt.Sprintf("cannot run %q: %v", t.a.Command[0], unwrapExec(err)))
		return
	}
	cmd := exec.Command(path, t.a.Command[1:]...)
	cmd.Args[0] = t.a.Command[0]
	cmd.Dir = t.dir
	cmd.Env = t.env()
	cmd.Stdout = ship
	cmd.Stderr = ship
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// A background child that keeps stdout open must not hold the job
	// open after its main process exits.
	cmd.WaitDelay = 500 * time.Millisecond
	t.mu.Lock()
	if t.killWhy != "" {
		t.mu.Unlock()
		ev.Outcome, ev.Message = api.OutcomeCancelled, t.killWhy
		return
	}
	err = cmd.Start()
	t.cmd = cmd
	t.mu.Unlock()
	if err != nil {
		fail(fmt.Sprintf("cannot start %q: %v", t.a.Command[0], unwrapExec(err)))
		return
	}
	start = time.Now()
	ev.StartTime = start
	t.w.emit(api.AttemptEvent{AttemptRef: t.a.AttemptRef, Kind: api.EventStarted, StartTime: start})

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var timeout <-chan time.Time
	if t.a.TimeoutSeconds > 0 {
		timer := time.NewTimer(time.Duration(t.a.TimeoutSeconds * float64(time.Second)))
		defer timer.Stop()
		timeout = timer.C
	}
	timedOut := false
	select {
	case err = <-waited:
	case <-t.killed:
		t.terminate(waited, &err)
	case <-timeout:
		timedOut = true
		t.terminate(waited, &err)
	}
	ev.EndTime = time.Now()
	// What the job left running in its process group ends with it, as in a
	// container: it would use resources nobody accounts for.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	code := exitCode(cmd.ProcessState)
	ev.ExitCode = code
	t.mu.Lock()
	why := t.killWhy
	t.mu.Unlock()
	switch {
	case timedOut:
		ev.Outcome = api.OutcomeFailed
		ev.Message = fmt.Sprintf("timed out after %s and was killed", time.Duration(t.a.TimeoutSeconds*float64(time.Second)))
		fmt.Fprintf(ship, "drover: %s\n", ev.Message)
	case why != "":
		ev.Outcome, ev.Message = api.OutcomeCancelled, why
	case (err == nil || errors.Is(err, exec.ErrWaitDelay)) && code == 0:
		ev.Outcome = api.OutcomeSuccess
	default:
		ev.Outcome = api.OutcomeFailed
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ev.Message = fmt.Sprintf("killed by signal %s", ws.Signal())
		} else {
			ev.Message = fmt.Sprintf("exited with code %d", code)
		}
	}
}

// terminate sends SIGTERM to the job's process group, then SIGKILL after the
// grace period, and waits for the process.
func (t *task) terminate(waited <-chan error, err *error) {
	pgid := t.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case *err = <-waited:
	case <-time.After(t.w.cfg.KillGrace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		*err = <-waited
	}
	// Children that ignored SIGTERM and outlived the leader go too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// exitCode follows the shell's convention: 128+N for a process killed by
// signal N.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
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

// flush uploads what is buffered as the next chunk, trying up to tries
// times. A chunk that cannot be uploaded is kept for the next flush.
func (s *shipper) flush(tries int) {
	s.mu.Lock()
	if s.buf.Len() == 0 {
		// Nothing to ship: a job that prints nothing costs no upload, and
		// its log reads as empty.
		s.mu.Unlock()
		return
	}
	data := append([]byte(nil), s.buf.Bytes()...)
	seq := s.seq
	s.mu.Unlock()
	var err error
	for i := 0; i < tries; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = s.w.client.UploadLogChunk(ctx, s.ref, seq, data)
		cancel()
		if err == nil {
			s.mu.Lock()
			s.buf.Next(len(data))
			s.seq++
			s.mu.Unlock()
			return
		}
		time.Sleep(time.Duration(i+1) * 200 * time.Millisecond)
	}
	s.w.log.Warn("log upload failed", "attempt", s.ref.String(), "err", err)
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
