package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/testlog"
)

// TestTwoWorkersOnOneHostShareAName: two workers with one name (as two
// `drover worker` processes on one host without -name) and their own data
// dirs are two nodes. Before node IDs, each activation retired the other,
// every job was lost again and again, and the batch never completed.
func TestTwoWorkersOnOneHostShareAName(t *testing.T) {
	e := start(t, nil)
	e.second(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if insts := e.waitActive(ctx, t, 2); insts[0].NodeID == insts[1].NodeID || insts[0].Name != insts[1].Name {
		t.Fatalf("instances %+v: want one name and two node IDs", insts)
	}
	arr := api.JobSpec{JobID: 1, Count: 300, Command: []string{"true"}, CPU: 0.1, Memory: 16 << 20}
	b := e.run(arr)
	if b.NSucceeded != 300 {
		t.Fatalf("batch: %+v", b)
	}
	jobs, err := e.client.ListJobs(ctx, b.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Jobs {
		if len(j.Attempts) != 1 {
			t.Fatalf("job %d took %d attempts: %+v", j.JobID, len(j.Attempts), j.Attempts)
		}
	}
	insts, err := e.client.ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 2 {
		t.Fatalf("%d instances after the batch (each activation retiring the other?): %+v", len(insts), insts)
	}
}

// waitActive waits until the server knows exactly n instances, all active,
// and returns them; any other count past the deadline (or more than n at
// any time: instances retiring each other) fails the test.
func (e *env) waitActive(ctx context.Context, t *testing.T, n int) []api.Instance {
	t.Helper()
	for {
		insts, err := e.client.ListInstances(ctx)
		if err != nil {
			t.Fatal(err)
		}
		active := 0
		for _, in := range insts {
			if in.Active {
				active++
			}
		}
		if len(insts) == n && active == n {
			return insts
		}
		if len(insts) > n || ctx.Err() != nil {
			t.Fatalf("want %d active instances: %+v", n, insts)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// second starts another worker like e's, with its own data dir, changed
// by the options.
func (e *env) second(t *testing.T, dir string, options ...func(*Config)) (*Worker, <-chan error) {
	t.Helper()
	cfg := *e.worker.cfg
	cfg.DataDir = dir
	for _, o := range options {
		o(&cfg)
	}
	w, err := New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, stopped := make(chan error, 1), make(chan struct{})
	go func() {
		done <- w.Run(ctx)
		close(stopped)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Error("second worker did not stop")
		}
	})
	return w, done
}

// TestOneDataDirOneWorker: a second worker on a data dir in use is refused
// at once, with an error that says what to do.
func TestOneDataDirOneWorker(t *testing.T) {
	e := start(t, nil)
	cfg := *e.worker.cfg
	_, err := New(&cfg)
	if err == nil || !strings.Contains(err.Error(), "is in use by another drover worker") || !strings.Contains(err.Error(), "own -data-dir") {
		t.Fatalf("second worker on %s: %v", cfg.DataDir, err)
	}
}

// TestLiveNodeIDIsNotTakenOver: a worker whose node ID is live elsewhere (a
// copied data dir) is refused by the server with 409 and stops, instead of
// retiring the live worker.
func TestLiveNodeIDIsNotTakenOver(t *testing.T) {
	e := start(t, nil)
	dir := t.TempDir()
	id, err := os.ReadFile(filepath.Join(e.dir, nodeIDFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, nodeIDFile), id, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.waitActive(ctx, t, 1)
	// The copy runs on another host in real life. Here it runs without
	// jails: on one host, its job bridge would be refused at once, the
	// live worker's node holding it (TestBridgeLeftoversAreRemoved).
	_, done := e.second(t, dir, func(c *Config) { c.Isolation = IsolationNone })
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "is in use by instance") {
			t.Fatalf("second worker: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the second worker was not refused")
	}
	insts, err := e.client.ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 1 || !insts[0].Active {
		t.Fatalf("instances: %+v", insts)
	}
}

// newOn returns the error of a worker started on dataDir (nil: it
// started, and is closed again).
func newOn(t *testing.T, dataDir string) error {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Servers, cfg.Name, cfg.CPU, cfg.Memory, cfg.Secret = []string{"http://127.0.0.1:1"}, "w", 1, 1<<30, "s"
	cfg.DataDir, cfg.Isolation, cfg.JobsDir, cfg.Logger = dataDir, IsolationNone, t.TempDir(), testlog.New(t)
	w, err := New(cfg)
	if err == nil {
		w.closeRuntime()
		w.id.release()
	}
	return err
}

// TestDataDirMustBeTheWorkersOwn: a worker refuses a data dir another
// user made or could change, or could replace (issue 41: a job made the
// default data dir in /tmp, with a symlink in it, and received the
// worker's instance token), naming the directory, what it found and what
// to do; it takes a directory of its own, through symlinks of root's, and
// makes it 0700. On the old worker, every refused case started.
func TestDataDirMustBeTheWorkersOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes directories of other users")
	}
	const other = 65534 // nobody; a job user is another user like it
	base := t.TempDir()
	dir := func(path string, mode os.FileMode, uid int) string {
		t.Helper()
		if err := os.MkdirAll(path, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(path, uid, uid); err != nil {
			t.Fatal(err)
		}
		return path
	}
	link := func(target, path string, uid int) string {
		t.Helper()
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(path, uid, uid); err != nil {
			t.Fatal(err)
		}
		return path
	}
	sticky := dir(filepath.Join(base, "tmp"), 0o777|os.ModeSticky, 0) // as /tmp is
	mine := dir(filepath.Join(base, "mine"), 0o700, 0)
	for _, c := range []struct {
		name, dataDir string
		want          []string // in the error; none: it starts
	}{
		{"another user's", dir(filepath.Join(sticky, "drover-worker-a"), 0o700, other), []string{"owned by uid 65534", "drwx------", "not by this worker's user (uid 0)", "remove it"}},
		{"another user's, empty and open to all", dir(filepath.Join(sticky, "drover-worker-b"), 0o777, other), []string{"owned by uid 65534", "drwxrwxrwx"}},
		{"ours, writable by all", dir(filepath.Join(mine, "open"), 0o777, 0), []string{"its mode is drwxrwxrwx", "chmod 700"}},
		{"ours, writable by its group", dir(filepath.Join(mine, "group"), 0o770, 0), []string{"its mode is drwxrwx---"}},
		{"a symlink to a directory of ours", link(mine, filepath.Join(sticky, "drover-worker-c"), 0), []string{"is a symlink (to " + mine + ")", "the directory itself"}},
		{"another user's symlink to a directory of ours", link(mine, filepath.Join(sticky, "drover-worker-d"), other), []string{"is a symlink"}},
		{"under a directory all may write to, without the sticky bit", filepath.Join(dir(filepath.Join(base, "open"), 0o777, 0), "w"), []string{"under " + filepath.Join(base, "open"), "drwxrwxrwx", "without the sticky bit"}},
		{"under another user's directory", filepath.Join(dir(filepath.Join(sticky, "theirs"), 0o755, other), "w"), []string{"under " + filepath.Join(sticky, "theirs"), "owned by uid 65534"}},
		{"through another user's symlink", filepath.Join(link(mine, filepath.Join(sticky, "their-link"), other), "w"), []string{"reached through " + filepath.Join(sticky, "their-link"), "owned by uid 65534"}},
		{"ours, in a sticky directory (as /tmp/x made by the worker)", filepath.Join(sticky, "drover-worker-e"), nil},
		{"ours, 0755", dir(filepath.Join(mine, "readable"), 0o755, 0), nil},
		{"through a symlink of ours", filepath.Join(link(mine, filepath.Join(sticky, "our-link"), 0), "w"), nil},
		{"missing, with missing parents", filepath.Join(mine, "a", "b", "w"), nil},
	} {
		err := newOn(t, c.dataDir)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
				continue
			}
			fi, err := os.Stat(c.dataDir)
			if err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("%s: the data dir is %v (%v), not 0700", c.name, fi.Mode(), err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: the worker started on %s", c.name, c.dataDir)
			continue
		}
		if abs, _ := filepath.Abs(c.dataDir); !strings.Contains(err.Error(), "worker data dir "+abs+":") {
			t.Errorf("%s: the error does not name the data dir: %v", c.name, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the error does not say %q: %v", c.name, w, err)
			}
		}
		if _, err := os.Lstat(filepath.Join(c.dataDir, nodeIDFile)); err == nil {
			t.Errorf("%s: the refused worker wrote its node ID in %s", c.name, c.dataDir)
		}
	}
}

// TestCredentialsAreNotWrittenThroughLinks: in a data dir that holds
// symlinks at the names of the worker's files and at those of their old
// temporary files (the attack of issue 41), the worker writes no byte
// through them: a link at its node ID or lock refuses the start, links at
// the temporary names are left alone, and a link at the instance token is
// neither read as the token nor written through, but replaced.
func TestCredentialsAreNotWrittenThroughLinks(t *testing.T) {
	loot := filepath.Join(t.TempDir(), "loot")
	planted := func(t *testing.T, names ...string) string {
		t.Helper()
		if err := os.WriteFile(loot, []byte("job's\n"), 0o666); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "data")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := os.Symlink(loot, filepath.Join(dir, n)); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	untouched := func(t *testing.T) {
		t.Helper()
		if b, _ := os.ReadFile(loot); string(b) != "job's\n" {
			t.Fatalf("the worker wrote through a link: the linked file holds %q", b)
		}
	}
	for _, name := range []string{nodeIDFile, lockFile} {
		t.Run(name, func(t *testing.T) {
			_, err := claimIdentity(planted(t, name))
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("a symlink at %s: %v", name, err)
			}
			untouched(t)
		})
	}
	t.Run("temporary and token names", func(t *testing.T) {
		dir := planted(t, nodeIDFile+".tmp", tokenFile+".tmp", tokenFile)
		id, err := claimIdentity(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer id.release()
		if tok := id.previousToken(); tok != "" {
			t.Fatalf("the token read through a link: %q", tok)
		}
		if err := id.keepToken("the-token"); err != nil {
			t.Fatal(err)
		}
		untouched(t)
		for _, n := range []string{nodeIDFile, tokenFile} {
			fi, err := os.Lstat(filepath.Join(dir, n))
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
				t.Fatalf("%s: %v %v: want a regular file, 0600", n, fi.Mode(), err)
			}
		}
		if tok := id.previousToken(); tok != "the-token" {
			t.Fatalf("the token kept: %q", tok)
		}
		// No temporary file is left behind.
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("left in the data dir: %s", e.Name())
			}
		}
	})
}

// TestDefaultDataDir: never under a directory all users may write to.
func TestDefaultDataDir(t *testing.T) {
	if d, err := defaultDataDir("w1", true); err != nil || d != "/var/lib/drover-worker-w1" {
		t.Errorf("root's: %q %v", d, err)
	}
	t.Setenv("HOME", "/home/someone")
	t.Setenv("XDG_STATE_HOME", "")
	if d, err := defaultDataDir("w1", false); err != nil || d != "/home/someone/.local/state/drover/worker-w1" {
		t.Errorf("a user's: %q %v", d, err)
	}
	t.Setenv("XDG_STATE_HOME", "/state")
	if d, err := defaultDataDir("w1", false); err != nil || d != "/state/drover/worker-w1" {
		t.Errorf("a user's with XDG_STATE_HOME: %q %v", d, err)
	}
	for _, name := range []string{"", ".", "..", "a/b", "../../tmp/x"} {
		if d, err := defaultDataDir(name, true); err == nil || !strings.Contains(err.Error(), "-data-dir") {
			t.Errorf("name %q: %q %v", name, d, err)
		}
	}
}
