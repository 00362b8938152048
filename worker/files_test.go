package worker

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/s3fake"
)

// TestFilesCopyInAndOut: an input is copied from a file:// bucket under an
// allowed root and a granted prefix, with the job's variables expanded;
// an output goes back to the bucket, making its directory; URLs outside
// the roots, missing objects, and outputs that are not regular files of
// the job's directory (a symlink the job made to a secret) are refused,
// and nothing leaks.
func TestFilesCopyInAndOut(t *testing.T) {
	bucket := t.TempDir()
	if err := os.WriteFile(filepath.Join(bucket, "in-3.txt"), []byte("three"), 0o600); err != nil {
		t.Fatal(err)
	}
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "secret")
	if err := os.WriteFile(secret, []byte("do not copy"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := newFiles([]string{bucket})
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	af := f.forAttempt([]api.StorageGrant{{Prefix: "file://" + bucket}, {Prefix: "file://" + secretDir}})
	defer af.close()
	ctx := context.Background()
	job := t.TempDir()
	vars := []string{"DROVER_INDEX=1", "DROVER_INDEX=3"}
	src, rel, err := expandFile("file://"+bucket+"/in-$DROVER_INDEX.txt", "/io/data/in.txt", vars)
	if err != nil || rel != "data/in.txt" {
		t.Fatalf("expand: %q %q %v", src, rel, err)
	}
	if n, err := af.fetch(ctx, src, job, rel, 0, 0); err != nil || n != 5 {
		t.Fatalf("fetch: %d %v", n, err)
	}
	if got, _ := os.ReadFile(filepath.Join(job, "data", "in.txt")); string(got) != "three" {
		t.Fatalf("fetched %q", got)
	}
	if _, err := af.fetch(ctx, "file://"+bucket+"/missing.txt", job, "m", 0, 0); err == nil || !strings.Contains(err.Error(), "no such object") {
		t.Fatalf("missing input: %v", err)
	}
	if _, err := af.fetch(ctx, "file://"+secret, job, "s", 0, 0); err == nil || !strings.Contains(err.Error(), "not under a directory this worker allows") {
		t.Fatalf("input outside the roots: %v", err)
	}
	// A symlink inside the bucket that leads out of it is outside too.
	if err := os.Symlink(secret, filepath.Join(bucket, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := af.fetch(ctx, "file://"+bucket+"/link", job, "l", 0, 0); err == nil || !strings.Contains(err.Error(), "not under") {
		t.Fatalf("input through a symlink out of the bucket: %v", err)
	}

	if err := os.WriteFile(filepath.Join(job, "out.txt"), []byte("result"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := "file://" + bucket + "/results/3/out.txt"
	if n, err := af.store(ctx, job, "out.txt", dst); err != nil || n != 6 {
		t.Fatalf("store: %d %v", n, err)
	}
	if got, _ := os.ReadFile(filepath.Join(bucket, "results", "3", "out.txt")); string(got) != "result" {
		t.Fatalf("stored %q", got)
	}
	if entries, _ := os.ReadDir(filepath.Join(bucket, "results", "3")); len(entries) != 1 {
		t.Fatalf("the bucket holds more than the output: %v", entries)
	}
	// The job made its output a symlink to a secret of the worker's.
	if err := os.Symlink(secret, filepath.Join(job, "evil.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := af.store(ctx, job, "evil.txt", "file://"+bucket+"/evil.txt"); err == nil {
		t.Fatal("an output symlinked out of the job's directory was copied")
	}
	if data, err := os.ReadFile(filepath.Join(bucket, "evil.txt")); err == nil && strings.Contains(string(data), "do not copy") {
		t.Fatal("the secret reached the bucket")
	}
	if _, err := af.store(ctx, job, "never-written", dst); err == nil || !strings.Contains(err.Error(), "did not write") {
		t.Fatalf("missing output: %v", err)
	}
	if _, err := af.store(ctx, job, "data", "file://"+bucket+"/d"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a directory as output: %v", err)
	}
	// A variable that leaves the job's directory is caught after expansion.
	if _, _, err := expandFile("gs://b/x", "$P/x", []string{"P=../.."}); err == nil {
		t.Fatal("a path that expands out of the job's directory was accepted")
	}
	none, _ := newFiles(nil)
	if _, err := none.forAttempt(af.grants).fetch(ctx, "file://"+bucket+"/in-3.txt", job, "x", 0, 0); err == nil || !strings.Contains(err.Error(), "-file-url-roots") {
		t.Fatalf("file:// on a worker that allows none: %v", err)
	}
}

// TestFilesOnlyUnderGrantedPrefixes: the worker touches no URL that is
// under none of the prefixes the attempt was granted (a prefix removed
// after the job was submitted, another project's directory), follows no
// symlink out of a prefix into another project's, takes no query a job
// variable expanded into its URL, and ends a file whose prefix's
// credentials the server could not give with the server's reason.
func TestFilesOnlyUnderGrantedPrefixes(t *testing.T) {
	bucket := t.TempDir()
	for _, d := range []string{"projA", "projB"} {
		if err := os.MkdirAll(filepath.Join(bucket, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(bucket, "projB", "secret.txt"), []byte("B's"), 0o600)
	os.WriteFile(filepath.Join(bucket, "projA", "mine.txt"), []byte("A's"), 0o600)
	f, err := newFiles([]string{bucket})
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	af := f.forAttempt([]api.StorageGrant{{Prefix: "file://" + bucket + "/projA"}, {Prefix: "gs://locked/x", Error: "sealed with a key this server does not have"}})
	defer af.close()
	ctx := context.Background()
	job := t.TempDir()
	if _, err := af.fetch(ctx, "file://"+bucket+"/projA/mine.txt", job, "m", 0, 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ url, want string }{
		{"file://" + bucket + "/projB/secret.txt", "under none of the storage prefixes"},
		{"file://" + bucket + "/projAB/x.txt", "under none of the storage prefixes"},
		{"gs://locked/x/y", "sealed with a key this server does not have"},
	} {
		if _, err := af.fetch(ctx, c.url, job, "x", 0, 0); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.url, err, c.want)
		}
	}
	// A link in A's prefix into B's: refused, for inputs and outputs.
	if err := os.Symlink(filepath.Join(bucket, "projB"), filepath.Join(bucket, "projA", "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := af.fetch(ctx, "file://"+bucket+"/projA/b/secret.txt", job, "s", 0, 0); err == nil || !strings.Contains(err.Error(), "leads out of its storage prefix") {
		t.Fatalf("through a link into B's prefix: %v", err)
	}
	os.WriteFile(filepath.Join(job, "out"), []byte("overwrite"), 0o644)
	if _, err := af.store(ctx, job, "out", "file://"+bucket+"/projA/b/secret.txt"); err == nil || !strings.Contains(err.Error(), "leads out of its storage prefix") {
		t.Fatalf("output through a link into B's prefix: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(bucket, "projB", "secret.txt")); string(got) != "B's" {
		t.Fatalf("B's file now holds %q", got)
	}
	// A job variable that smuggles a query into the URL.
	env := []string{"X=k?endpoint=http://127.0.0.1:1&anonymous=true"}
	if _, _, err := expandFile("s3://b/projA/$X", "in", env); err == nil || !strings.Contains(err.Error(), `"endpoint"`) {
		t.Fatalf("a query from a variable: %v", err)
	}
}

// TestFilesWithProjectKeys: a grant's S3 keys and settings reach the
// store (which checks each signature): the attempt reads and writes
// under its prefix as its project, not as the worker.
func TestFilesWithProjectKeys(t *testing.T) {
	store, err := s3fake.Start([]s3fake.Key{{ID: "AKIDA", Secret: "secret-a", Prefixes: []string{"data/projA"}}}, "data")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	store.Put("data", "projA/in.txt", []byte("input of A"))
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDWORKER")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "worker")
	f, _ := newFiles(nil)
	defer f.close()
	grant := api.StorageGrant{Prefix: "s3://data/projA", Credentials: &api.StorageCredentials{S3AccessKeyID: "AKIDA", S3SecretAccessKey: "secret-a"},
		S3: &api.S3Settings{Endpoint: store.URL, Region: "us-east-1", PathStyle: true}}
	af := f.forAttempt([]api.StorageGrant{grant})
	ctx := context.Background()
	job := t.TempDir()
	if n, err := af.fetch(ctx, "s3://data/projA/in.txt", job, "in.txt", 0, 0); err != nil || n != 10 {
		t.Fatalf("fetch: %d %v", n, err)
	}
	os.WriteFile(filepath.Join(job, "out.txt"), []byte("output of A"), 0o644)
	if _, err := af.store(ctx, job, "out.txt", "s3://data/projA/out/1.txt"); err != nil {
		t.Fatal(err)
	}
	if got, err := store.Get("data", "projA/out/1.txt"); err != nil || string(got) != "output of A" {
		t.Fatalf("stored %q %v", got, err)
	}
	if len(af.owned) != 1 {
		t.Fatalf("%d buckets opened with the project's keys", len(af.owned))
	}
	af.close()
	if len(af.owned) != 0 || len(f.buckets) != 0 {
		t.Fatal("buckets opened with the project's keys outlived the attempt, or went to the worker's cache")
	}
	for _, r := range store.Requests() {
		if r.KeyID != "AKIDA" || r.Refusal != "" {
			t.Fatalf("request %+v", r)
		}
	}
}

// TestUIDLeasesAreHostWide: two pools on one lease directory (two workers
// of one host) never hand out the same user ID at once, an ID comes back
// once released, and a range holding an account of the host is refused.
func TestUIDLeasesAreHostWide(t *testing.T) {
	dir := t.TempDir()
	a, err := newUIDPool(dir, 500_000, 4)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newUIDPool(dir, 500_000, 4)
	if err != nil {
		t.Fatal(err)
	}
	held := map[int]bool{}
	var leases []*uidLease
	for i := 0; i < 4; i++ {
		p := a
		if i%2 == 1 {
			p = b
		}
		l, err := p.lease()
		if err != nil {
			t.Fatal(err)
		}
		if held[l.uid] {
			t.Fatalf("user ID %d leased twice", l.uid)
		}
		held[l.uid] = true
		leases = append(leases, l)
	}
	if _, err := b.lease(); err == nil || !strings.Contains(err.Error(), "every job user ID") {
		t.Fatalf("a fifth lease of four IDs: %v", err)
	}
	leases[2].release()
	l, err := a.lease()
	if err != nil || l.uid != leases[2].uid {
		t.Fatalf("after a release: %+v %v, want %d", l, err, leases[2].uid)
	}
	if _, err := newUIDPool(dir, 0, 10); err == nil {
		t.Fatal("a range with root in it was accepted")
	}
	passwd := filepath.Join(t.TempDir(), "passwd")
	os.WriteFile(passwd, []byte("root:x:0:0::/root:/bin/sh\nalice:x:500001:500001::/home/alice:/bin/sh\n"), 0o644)
	if name, id, ok := accountInRange(passwd, 500_000, 4); !ok || name != "alice" || id != 500001 {
		t.Fatalf("account in range: %q %d %v", name, id, ok)
	}
}

// TestSpotNotice: the worker waits on the metadata server's
// wait_for_change answers and sees the notice when the value turns TRUE;
// a server that answers at once is not asked in a hot loop.
func TestSpotNotice(t *testing.T) {
	var asks atomic.Int32
	var preempted atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asks.Add(1)
		if r.Header.Get("Metadata-Flavor") != "Google" || r.URL.Query().Get("wait_for_change") != "true" {
			http.Error(w, "missing Metadata-Flavor or wait_for_change", http.StatusForbidden)
			return
		}
		if preempted.Load() {
			w.Write([]byte("TRUE"))
			return
		}
		w.Write([]byte("FALSE")) // at once, as a server that ignores wait_for_change
	}))
	defer srv.Close()
	got := make(chan bool, 1)
	go func() {
		got <- watchSpotNotice(context.Background(), srv.URL+"/computeMetadata/v1/instance/preempted", slog.Default())
	}()
	time.Sleep(1500 * time.Millisecond)
	if n := asks.Load(); n > 3 {
		t.Fatalf("asked %d times in 1.5 s", n)
	}
	preempted.Store(true)
	select {
	case ok := <-got:
		if !ok {
			t.Fatal("no notice")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the notice was not seen")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if watchSpotNotice(ctx, srv.URL, slog.Default()) {
		t.Fatal("a cancelled watch reported a notice")
	}
}
