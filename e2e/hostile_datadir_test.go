package e2e

// The hostile-tenant suite, item 5 of issue 41 ("the worker's own
// directory is its own"): a worker started without -data-dir used
// <temp dir>/drover-worker-NAME, which a job could make first, in /tmp,
// with a symlink in it where the worker wrote its instance token; the
// token then received other tenants' assignments from sync.

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestHostileWorkerDataDir: a real job on a real dev agent prepares the
// directory a worker started later without -data-dir took by default,
// /tmp/drover-worker-NAME, open to all with a symlink at
// instance-token.tmp to a file of the job's, and tries to make the new
// default, /var/lib/drover-worker-NAME. While it runs, the test starts
// `drover worker -name NAME` (the real binary, no -data-dir): it
// activates with a data dir of its own in /var/lib, and the job's file
// receives nothing (on the old binary it received the worker's instance
// token). A worker told to use a directory the job prepared (in /tmp
// while jobs share the host's, and in the job's own directory) refuses to
// start, naming it and the job's user; a second job can neither enter nor
// change the worker's data dir.
func TestHostileWorkerDataDir(t *testing.T) {
	a := startAgent(t, "", "")
	name := "dd-" + randomMark(t)
	oldDefault := "/tmp/drover-worker-" + name // os.TempDir() + "/drover-worker-" + name, with TMPDIR=/tmp
	newDefault := "/var/lib/drover-worker-" + name
	loot := "/tmp/drover-loot-" + name
	t.Cleanup(func() {
		for _, p := range []string{oldDefault, loot, newDefault} {
			os.RemoveAll(p)
		}
	})
	// prepare makes dir open to all, with the symlink in it.
	prepare := func(dir string) string {
		return `mkdir ` + dir + ` && chmod 777 ` + dir + ` && ln -s ` + loot + ` ` + dir + `/instance-token.tmp`
	}
	job := submit(t, a, "prepare", api.JobSpec{Name: "prepare", Command: []string{"sh", "-c", `
		echo uid $(id -u)
		: > ` + loot + ` && chmod 666 ` + loot + ` && ` + prepare(oldDefault) + ` && echo PREPARED-TMP
		` + prepare(`"$PWD/drover-worker-`+name+`"`) + ` && echo PREPARED-OWN "$PWD"
		if mkdir -p ` + newDefault + ` 2>/dev/null; then echo NEW-DEFAULT-MADE; else echo NEW-DEFAULT-REFUSED; fi
		echo READY; sleep 300`}})
	log := waitLog(t, a, job, 1, "READY")
	t.Logf("the preparing job's log:\n%s", log)
	defer a.client().CancelBatch(context.Background(), job)
	jobUID, own := "", ""
	for _, l := range strings.Split(log, "\n") {
		if v, ok := strings.CutPrefix(l, "uid "); ok {
			jobUID = v
		}
		if v, ok := strings.CutPrefix(l, "PREPARED-OWN "); ok {
			own = filepath.Join(v, "drover-worker-"+name)
		}
	}
	if jobUID == "" || jobUID == "0" || own == "" {
		t.Fatalf("the job did not run as a user of its own (%q) or did not prepare its own directory", jobUID)
	}
	if fi, err := os.Lstat(own); err != nil || fi.Sys().(*syscall.Stat_t).Uid == 0 {
		t.Fatalf("the job's directory %s is not the job's on the host: %v", own, err)
	}
	if strings.Contains(log, "NEW-DEFAULT-MADE") || !strings.Contains(log, "NEW-DEFAULT-REFUSED") {
		t.Fatalf("a job could make the default data dir %s", newDefault)
	}
	// Where jobs share the host's /tmp, the job prepared the old default
	// there; where each has a /tmp of its own, that attack is moot, and
	// the worker must still not write there.
	_, err := os.Lstat(oldDefault)
	inHostTmp := err == nil
	t.Logf("the job's directory in /tmp is in the host's: %v", inHostTmp)

	// The operator starts a worker named NAME without -data-dir.
	t.Setenv("TMPDIR", "/tmp")
	w := spawnWorker(t, name, "", []string{"worker", "-servers", a.addr, "-name", name, "-cores", "1", "-memory", "1GiB",
		"-worker-secret-file", filepath.Join(a.dataDir, "worker.secret"), "-sync-wait", "2s", "-log-level", "info"})
	waitFor(t, "worker "+name+" to activate (or exit)", 30*time.Second, func() bool {
		select {
		case <-w.done:
			out, _ := os.ReadFile(w.log)
			t.Fatalf("the worker without -data-dir exited:\n%s", out)
		default:
		}
		insts, err := a.client().ListInstances(context.Background())
		if err != nil {
			return false
		}
		for _, in := range insts {
			if in.Name == name && in.Active {
				return true
			}
		}
		return false
	})
	// Active on the servers' side comes before the worker has written its
	// token: wait for the file (renamed into place whole).
	token := filepath.Join(newDefault, "instance-token")
	waitFor(t, "the worker's instance token", 30*time.Second, func() bool {
		_, err := os.Lstat(token)
		return err == nil
	})
	if b, err := os.ReadFile(loot); err == nil && len(b) > 0 {
		t.Fatalf("the worker wrote its instance token (%d bytes) into the job's file %s, through the job's symlink in %s", len(b), loot, oldDefault)
	}
	if _, err := os.Lstat(filepath.Join(oldDefault, "node-id")); err == nil {
		t.Fatalf("the worker took the job's directory %s as its data dir", oldDefault)
	}
	fi, err := os.Lstat(newDefault)
	if err != nil {
		t.Fatalf("the worker's data dir: %v", err)
	}
	if st := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || st.Uid != 0 || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the worker's data dir %s: %v, uid %d: want a directory of root's, 0700", newDefault, fi.Mode(), st.Uid)
	}
	if fi, err := os.Lstat(token); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the worker's instance token: %v %v", fi, err)
	}

	// A worker told to use a directory the job prepared refuses it.
	told := []string{own}
	if inHostTmp {
		told = append(told, oldDefault)
	}
	for i, dir := range told {
		n := name + "-told-" + strconv.Itoa(i)
		refused := spawnWorker(t, n, dir, []string{"worker", "-servers", a.addr, "-name", n, "-cores", "1", "-memory", "1GiB",
			"-data-dir", dir, "-worker-secret-file", filepath.Join(a.dataDir, "worker.secret"), "-sync-wait", "2s", "-log-level", "info"})
		select {
		case <-refused.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("a worker given the job's directory %s as -data-dir is running", dir)
		}
		out, _ := os.ReadFile(refused.log)
		t.Logf("a worker given %s: %s", dir, strings.TrimSpace(string(out)))
		for _, want := range []string{"worker data dir " + dir + ":", "owned by uid " + jobUID, "-data-dir"} {
			if !strings.Contains(string(out), want) {
				t.Fatalf("the refusal of %s does not say %q:\n%s", dir, want, out)
			}
		}
		if b, _ := os.ReadFile(loot); len(b) > 0 {
			t.Fatalf("the worker given %s wrote %d bytes into the job's file", dir, len(b))
		}
	}

	// Another job can neither read nor change the worker's data dir.
	probe := submit(t, a, "probe", api.JobSpec{Name: "probe", Command: []string{"sh", "-c", `
		ls ` + newDefault + ` >/dev/null 2>&1 && echo LISTED
		cat ` + newDefault + `/instance-token 2>/dev/null && echo READ
		touch ` + newDefault + `/x 2>/dev/null && echo WROTE
		ln -s /tmp ` + newDefault + `/instance-token.tmp 2>/dev/null && echo LINKED
		mv ` + newDefault + ` ` + newDefault + `.old 2>/dev/null && echo MOVED
		echo probed`}})
	log = jobLog(t, a, probe, 1)
	t.Logf("the probing job's log:\n%s", log)
	if !strings.Contains(log, "probed") {
		t.Fatal("the probe did not run")
	}
	for _, bad := range []string{"LISTED", "READ", "WROTE", "LINKED", "MOVED"} {
		if strings.Contains(log, bad) {
			t.Errorf("a job %s the worker's data dir %s", strings.ToLower(bad), newDefault)
		}
	}
}
