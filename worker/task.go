package worker

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/drover-sched/drover/api"
)

// task runs one attempt: it prepares the attempt's sandbox (directory,
// user, cgroup), gets its image and copies its inputs, runs the command
// through an executor, then copies its outputs, and reports what it used.
type task struct {
	w *Worker
	a api.Assignment

	// ctx is cancelled when the job is killed: it aborts a start, an
	// image pull or a copy in progress, and run stops a running command
	// when it is done.
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	killWhy   string        // set when the control plane, a timeout or a preemption ends the job
	preempted bool          // the worker is going away, or the control plane preempts it: the attempt ends preempted
	grace     time.Duration // between SIGTERM and SIGKILL when the control plane preempts it (0: the worker's KillGrace)
	abandoned bool          // the worker is leaving for good: report nothing
	done      bool
	box       *box      // the sandbox while the attempt holds it
	usage     api.Usage // transfers so far, and the last sample
	reported  time.Time // when usage was last sampled for a report
	started   time.Time // when the command started (zero until then)
}

func newTask(w *Worker, a api.Assignment) *task {
	ctx, cancel := context.WithCancel(context.Background())
	return &task{w: w, a: a, ctx: ctx, cancel: cancel, reported: time.Now()}
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

// preempt ends the job because the worker is going away; it will be
// reported as preempted, which runs it again elsewhere without counting a
// failure or a retry.
func (t *task) preempt(reason string) {
	t.mu.Lock()
	t.preempted = true
	t.mu.Unlock()
	t.kill(reason)
}

// preemptFor ends the job for another queue's work: SIGTERM, grace to
// checkpoint, then SIGKILL; it is reported preempted (unless it ended
// first).
func (t *task) preemptFor(reason string, grace time.Duration) {
	t.mu.Lock()
	if t.killWhy == "" && !t.done {
		t.preempted, t.grace = true, grace
	}
	t.mu.Unlock()
	t.kill(reason)
}

// stopping reports whether the job is being stopped.
func (t *task) stopping() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.killWhy != "" && !t.done
}

// stopGrace is the time the job gets between SIGTERM and SIGKILL.
func (t *task) stopGrace() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.grace > 0 {
		return t.grace
	}
	return t.w.cfg.KillGrace
}

// abandon kills the job without reporting it.
func (t *task) abandon(reason string) {
	t.mu.Lock()
	t.abandoned = true
	t.mu.Unlock()
	t.kill(reason)
}

// reason is why the job was killed ("" if it was not), and whether by a
// preemption.
func (t *task) reason() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.killWhy, t.preempted
}

// sample returns the attempt's usage so far: its transfers, and what its
// cgroup measured (nil while it holds no cgroup).
func (t *task) sample() *api.Usage {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.box == nil || t.box.slot == nil || t.done {
		return nil
	}
	if cu, err := t.box.slot.Usage(); err == nil {
		t.usage.CPUSeconds = cu.CPU.Seconds()
		t.usage.PeakMemory = max(t.usage.PeakMemory, cu.PeakMemory)
		t.usage.Memory = cu.Memory
	}
	u := t.usage
	return &u
}

// addUsage adds to the attempt's transfers.
func (t *task) addUsage(f func(u *api.Usage)) {
	t.mu.Lock()
	f(&t.usage)
	t.mu.Unlock()
}

// run executes the attempt and queues its started and completed events. The
// log is fully shipped before the completed event is queued, so a job that
// is final always has its whole log.
func (t *task) run() {
	start := time.Now()
	ship := newShipper(t.w, t.a.AttemptRef)
	ev := api.AttemptEvent{AttemptRef: t.a.AttemptRef, Kind: api.EventCompleted, StartTime: start}
	var bx *box
	defer func() {
		// Read the last of the cgroup before it goes back.
		ev.Usage = t.sample()
		t.mu.Lock()
		t.done = true
		t.box = nil
		abandoned := t.abandoned
		if ev.Usage == nil {
			u := t.usage
			ev.Usage = &u
		}
		t.mu.Unlock()
		if bx != nil {
			bx.release(t.w.cfg.KeepWorkDirs)
		}
		if abandoned {
			ship.abort()
			return
		}
		ship.close()
		if ev.EndTime.IsZero() {
			ev.EndTime = time.Now()
		}
		clampUsage(ev.Usage, t.w.cfg.CPU, t.w.cfg.Memory, ev.EndTime.Sub(ev.StartTime))
		if t.w.log.Enabled(t.ctx, slog.LevelDebug) {
			t.w.log.Debug("attempt ended", "attempt", t.a.AttemptRef.String(), "outcome", ev.Outcome, "exit", ev.ExitCode, "took", ev.EndTime.Sub(start))
		}
		t.w.emit(ev)
	}()
	fail := func(msg string) {
		ev.Outcome, ev.Message = api.OutcomeError, msg
		fmt.Fprintf(ship, "drover: %s\n", msg)
	}
	// interrupted ends the attempt when a kill cut a step short.
	interrupted := func() bool {
		why, preempted := t.reason()
		if t.ctx.Err() == nil || why == "" {
			return false
		}
		ev.Outcome, ev.Message = api.OutcomeCancelled, why
		if preempted {
			ev.Outcome = api.OutcomePreempted
		}
		return true
	}
	var err error
	if bx, err = t.w.sandbox.prepare(t.a); err != nil {
		fail(err.Error())
		return
	}
	t.mu.Lock()
	t.box = bx
	t.mu.Unlock()
	env := t.a.JobEnv()
	files := t.w.files.forAttempt(t.a.Storage)
	defer files.close()
	spec := Spec{Ref: t.a.AttemptRef, Command: t.a.Command, Env: env, Dir: bx.dir, UID: bx.uid(), GID: bx.uid(), Cgroup: bx.slot, Memory: t.a.Memory, Network: t.a.Network}
	if bx.jail != nil {
		spec.Start, spec.NetNS = bx.start, bx.jail.netnsPath()
	}
	if t.a.Nomad {
		if err := t.nomadRuntime(&spec, bx); err != nil {
			fail(err.Error())
			return
		}
	}
	ex := t.w.exec
	if t.a.Image != "" {
		if t.w.containers == nil {
			fail(fmt.Sprintf("this worker cannot run container jobs: %s", t.w.noContainers))
			return
		}
		// The servers refused any other reference at submit; a worker
		// pulls nothing else, whatever reaches it.
		if err := api.ValidateImage(t.a.Image); err != nil {
			fail(fmt.Sprintf("pull image %q: %v", t.a.Image, err))
			return
		}
		began := time.Now()
		img, err := t.w.images.Get(t.ctx, t.a.Image)
		t.addUsage(func(u *api.Usage) { u.ImageSeconds = time.Since(began).Seconds() })
		if err != nil {
			if !interrupted() {
				fail(err.Error())
			}
			return
		}
		defer img.Release()
		spec.Image, ex = img, t.w.containers
	}
	if !t.copyInputs(files, bx, env, fail) {
		interrupted()
		return
	}
	// The attempt runs from here: its start time covers what the
	// executor does to start it (a container's bundle and namespaces).
	started := time.Now()
	h, err := ex.Start(t.ctx, spec, ship)
	if err != nil {
		if errors.Is(err, context.Canceled) && interrupted() {
			// Killed before the command started.
			return
		}
		// A *StartError (the program is missing or not executable) reads
		// "cannot run ..." or "cannot start ...": it is the message.
		fail(err.Error())
		return
	}
	start = started
	ev.StartTime = start
	t.mu.Lock()
	t.started = start
	t.mu.Unlock()
	t.w.emit(api.AttemptEvent{AttemptRef: t.a.AttemptRef, Kind: api.EventStarted, StartTime: start})

	var timeout <-chan time.Time
	if t.a.TimeoutSeconds > 0 {
		timer := time.NewTimer(time.Duration(t.a.TimeoutSeconds * float64(time.Second)))
		defer timer.Stop()
		timeout = timer.C
	}
	timedOut := false
	select {
	case <-h.Done():
	case <-t.ctx.Done():
		h.Stop(t.stopGrace())
	case <-timeout:
		timedOut = true
		h.Stop(t.w.cfg.KillGrace)
	}
	var end struct {
		res Result
		err error
	}
	end.res, end.err = h.Wait()
	ev.EndTime = time.Now()
	if end.err != nil {
		t.w.log.Warn("lost track of the job", "attempt", t.a.AttemptRef.String(), "err", end.err)
	}
	if bx.slot == nil && end.res.Usage != nil {
		// No cgroup measured the job: the kernel's count for the process
		// and the children it waited for will do.
		ru := end.res.Usage
		t.addUsage(func(u *api.Usage) {
			u.CPUSeconds = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
			u.PeakMemory = ru.Maxrss << 10
		})
	}
	ev.ExitCode = end.res.ExitCode
	why, preempted := t.reason()
	oom := false
	if bx.slot != nil {
		oom, _ = bx.slot.OOMKilled()
	}
	switch {
	case timedOut:
		ev.Outcome = api.OutcomeFailed
		ev.Message = fmt.Sprintf("timed out after %s and was killed", time.Duration(t.a.TimeoutSeconds*float64(time.Second)))
		fmt.Fprintf(ship, "drover: %s\n", ev.Message)
	case why != "" && preempted:
		ev.Outcome, ev.Message = api.OutcomePreempted, why
		ev.WorkerLeaving = t.w.leaving.Load()
	case why != "":
		ev.Outcome, ev.Message = api.OutcomeCancelled, why
	case end.err == nil && end.res.ExitCode == 0:
		ev.Outcome = api.OutcomeSuccess
		if oom {
			fmt.Fprintf(ship, "drover: the out-of-memory killer killed a process of this job (limit %s); the job still succeeded\n", formatMiB(t.a.Memory))
		}
		if !t.copyOutputs(files, bx, env, fail) {
			interrupted()
		}
	case oom:
		fail(fmt.Sprintf("out of memory (limit %s)", formatMiB(t.a.Memory)))
		ev.OOM = true
	default:
		ev.Outcome = api.OutcomeFailed
		if end.res.Signal != 0 {
			ev.Message = fmt.Sprintf("killed by signal %s", end.res.Signal)
		} else {
			ev.Message = fmt.Sprintf("exited with code %d", end.res.ExitCode)
		}
	}
}

// copyInputs copies the attempt's inputs into its directory, recording
// the time and bytes; on failure it ends the attempt with the reason.
func (t *task) copyInputs(files *attemptFiles, bx *box, env []string, fail func(string)) bool {
	if len(t.a.Inputs) == 0 {
		return true
	}
	began := time.Now()
	defer func() { t.addUsage(func(u *api.Usage) { u.InputSeconds = time.Since(began).Seconds() }) }()
	for _, in := range t.a.Inputs {
		src, rel, err := expandFile(in.Source, in.Path, env)
		if src == "" {
			src = in.Source // as written: it did not expand to a URL the worker takes
		}
		if err == nil {
			var n int64
			n, err = files.fetch(t.ctx, src, bx.dir, rel, bx.uid(), bx.uid())
			t.addUsage(func(u *api.Usage) { u.BytesIn += n })
		}
		if err != nil {
			if t.ctx.Err() == nil {
				fail((&fileError{kind: "input", name: in.Name, url: src, err: err}).Error())
			}
			return false
		}
	}
	return true
}

// copyOutputs copies the attempt's outputs out of its directory once the
// command succeeded; on failure it ends the attempt with the reason.
func (t *task) copyOutputs(files *attemptFiles, bx *box, env []string, fail func(string)) bool {
	if len(t.a.Outputs) == 0 {
		return true
	}
	began := time.Now()
	defer func() { t.addUsage(func(u *api.Usage) { u.OutputSeconds = time.Since(began).Seconds() }) }()
	for _, out := range t.a.Outputs {
		dst, rel, err := expandFile(out.Destination, out.Path, env)
		if dst == "" {
			dst = out.Destination
		}
		if err == nil {
			var n int64
			n, err = files.store(t.ctx, bx.dir, rel, dst)
			t.addUsage(func(u *api.Usage) { u.BytesOut += n })
		}
		if err != nil {
			if t.ctx.Err() == nil {
				fail((&fileError{kind: "output", name: out.Name, url: dst, err: err}).Error())
			}
			return false
		}
	}
	return true
}

// clampUsage keeps reported usage inside what servers accept (the
// numbers are the kernel's, but a clock step or a counter of an earlier
// job must not make a sync be refused).
func clampUsage(u *api.Usage, cores float64, memory int64, wall time.Duration) {
	u.CPUSeconds = min(max(u.CPUSeconds, 0), cores*max(wall.Seconds(), 0)+30)
	u.PeakMemory = min(max(u.PeakMemory, 0), memory)
	u.Memory = min(max(u.Memory, 0), memory)
	u.BytesIn = min(max(u.BytesIn, 0), api.MaxUsageBytes)
	u.BytesOut = min(max(u.BytesOut, 0), api.MaxUsageBytes)
	for _, f := range []*float64{&u.ImageSeconds, &u.InputSeconds, &u.OutputSeconds} {
		*f = min(max(*f, 0), api.MaxTimeoutSeconds)
	}
}

// formatMiB writes a memory size for a person: "256 MiB", "1.5 GiB".
func formatMiB(n int64) string {
	if n >= 1<<30 {
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', -1, 64) + " GiB"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', -1, 64) + " MiB"
}

// shipper buffers a job's output and uploads it in numbered chunks: every
// LogFlushInterval while the job runs and once more at the end. Its
// uploading goroutine starts with the first output: most small jobs
// print nothing, and cost no goroutine and no ticker.
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
	running bool // loop was started
	closed  bool // close was called
}

var _ io.Writer = (*shipper)(nil)

func newShipper(w *Worker, ref api.AttemptRef) *shipper {
	return &shipper{w: w, ref: ref, stop: make(chan struct{}), done: make(chan struct{})}
}

func (s *shipper) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running && !s.closed {
		s.running = true
		go s.loop()
	}
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

// copyBufs are the buffers a job's output is read into.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ReadFrom reads a job's output into the log until r ends. A process's
// output is copied through it (io.Copy prefers it), with a buffer from a
// pool instead of a new 32 KiB one for every job to clear and collect.
func (s *shipper) ReadFrom(r io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	var n int64
	for {
		k, err := r.Read(*bp)
		if k > 0 {
			s.Write((*bp)[:k])
			n += int64(k)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

var _ io.ReaderFrom = (*shipper)(nil)

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
			err = s.w.client.Workers().UploadLogChunk(ctx, s.ref, seq, data)
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
	s.mu.Lock()
	s.closed = true
	running := s.running
	s.mu.Unlock()
	if !running {
		return // nothing was written: nothing to ship
	}
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

// nomadRuntime gives an attempt of a Nomad job what a Nomad client gives
// a task: its directories (alloc, local, secrets, owned by the job's
// user), the runtime variables, and ${name} interpolated in its command
// and env.
func (t *task) nomadRuntime(spec *Spec, bx *box) error {
	for _, d := range api.NomadDirs {
		p := filepath.Join(bx.dir, d)
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("make the job's %s directory: %w", d, err)
		}
		if err := os.Lchown(p, bx.uid(), bx.uid()); err != nil {
			return fmt.Errorf("give the job its %s directory: %w", d, err)
		}
	}
	if file := t.a.Env[api.NomadPayloadFileEnv]; file != "" {
		if err := writePayload(filepath.Join(bx.dir, "local"), file, t.a.Env[api.NomadPayloadEnv], bx.uid()); err != nil {
			return err
		}
	}
	dir := bx.dir
	if t.a.Image != "" {
		dir = api.JobDirMount
	}
	c := t.w.cfg
	vars := t.a.NomadVars(dir, api.NomadNode{Name: c.Name, Region: c.Region, Cluster: c.Cluster, Pool: c.Pool, Labels: c.Labels})
	spec.Env, spec.Command = t.a.NomadEnv(vars)
	if raw := t.a.Env[api.NomadTemplatesEnv]; raw != "" {
		env, err := renderTemplates(bx.dir, raw, spec.Env, bx.uid())
		if err != nil {
			return err
		}
		spec.Env = env
	}
	return nil
}

// renderTemplates renders a Nomad task's templates with its environment,
// each into its file under the job's directory (made a moment ago; the
// job has not run in it yet), as the job's user, or into the environment
// it returns.
func renderTemplates(dir, raw string, env []string, uid int) ([]string, error) {
	var tmpls []api.NomadTemplate
	if err := json.Unmarshal([]byte(raw), &tmpls); err != nil {
		return nil, fmt.Errorf("the job's templates: %w", err)
	}
	vars := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	for i := range tmpls {
		tm := &tmpls[i]
		out, err := api.RenderNomadTemplate(tm, vars)
		if err != nil {
			return nil, err
		}
		if tm.Env {
			kvs, err := api.ParseEnvFile(out)
			if err != nil {
				return nil, fmt.Errorf("template for %s: %w", tm.Dest, err)
			}
			for k, v := range kvs {
				env = append(env, k+"="+v)
			}
		}
		perms := os.FileMode(0o644)
		if tm.Perms != 0 {
			perms = os.FileMode(tm.Perms)
		}
		if err := writeJobFile(dir, tm.Dest, out, perms, uid); err != nil {
			return nil, fmt.Errorf("template for %s: %w", tm.Dest, err)
		}
	}
	return env, nil
}

// writePayload writes a dispatched Nomad job's payload to file under
// local (the task's directory).
func writePayload(local, file, b64 string, uid int) error {
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return fmt.Errorf("dispatch payload: %w", err)
	}
	if err := writeJobFile(local, file, data, 0o644, uid); err != nil {
		return fmt.Errorf("dispatch payload: %w", err)
	}
	return nil
}

// writeJobFile writes a file the worker makes for a job (a Nomad task's
// payload or template) at rel under dir, which the worker made a moment
// ago and the job has not run in yet, as the job's user: rel must stay
// under dir, and every step of the way is resolved within dir (os.Root:
// no "..", no link that leads out), and no file there is replaced.
func writeJobFile(dir, rel string, data []byte, perm os.FileMode, uid int) error {
	if !filepath.IsLocal(rel) {
		return fmt.Errorf("%q is not under the job's directory", rel)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	var made []string
	for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
		if _, err := root.Lstat(d); errors.Is(err, fs.ErrNotExist) {
			made = append(made, d)
		}
	}
	if err := root.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
		return err
	}
	for _, d := range made {
		if err := root.Lchown(d, uid, uid); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm&0o777)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Chown(uid, uid)
	return errors.Join(werr, cerr, f.Close())
}
