package e2e

// The hostile-tenant suite, storage (issue 25, item 3): real dev agent,
// real workers, real jobs as the attacker. A job's files are blob URLs
// the worker opens for it; the worker must open nothing a job's URL
// steers, nothing outside the job's billing project's storage prefixes,
// and must act with the project's credentials, which no job may read.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/s3fake"
)

// listener is an HTTP server the attacker would like the worker to talk
// to (the cloud's metadata service, an internal API): it records every
// request it gets.
type listener struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newListener(t *testing.T) *listener {
	l := &listener{}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<10))
		l.mu.Lock()
		l.seen = append(l.seen, fmt.Sprintf("%s %s %q", r.Method, r.URL.RequestURI(), body))
		l.mu.Unlock()
		io.WriteString(w, `{"AccessKeyId": "ASIA-THE-WORKERS-ROLE", "SecretAccessKey": "stolen"}`)
	}))
	t.Cleanup(l.Close)
	return l
}

func (l *listener) requests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

// rawPost posts a JSON body as token and returns the status and the
// error's message (or the body).
func rawPost(t *testing.T, a *agent, token, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", a.addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var e api.ErrorResponse
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return resp.StatusCode, e.Error
	}
	return resp.StatusCode, string(data)
}

// finished waits for a job to reach a final state and returns it.
func finished(t *testing.T, c *api.Client, batch, job int64) *api.Job {
	t.Helper()
	var j *api.Job
	waitFor(t, fmt.Sprintf("job %d/%d to end", batch, job), 90*time.Second, func() bool {
		var err error
		j, err = c.GetJob(context.Background(), batch, job)
		return err == nil && (j.State == api.JobSuccess || j.State == api.JobFailed || j.State == api.JobError || j.State == api.JobCancelled)
	})
	return j
}

// TestHostileStorageURLsCannotSteerTheWorker: the SSRF. A URL
// with a query (endpoint=, anonymous=, profile=, private_key_path=) is
// refused by the CLI at file:line:col and by the API with 400 naming the
// parameter; a job that smuggles the query in through one of its
// variables gets past submit and ends in error at the worker, which
// expands and checks the URL again. Through it all, the address the job
// chose (a server this test runs) is never contacted: before, the worker
// fetched `s3://latest/meta-data/...?endpoint=` from it and handed the
// answer to the job, from a network = "none" container too.
func TestHostileStorageURLsCannotSteerTheWorker(t *testing.T) {
	meta := newListener(t)
	bucket := t.TempDir()
	a := startAgent(t, "", "", "-workers", "1", "-file-url-roots", bucket)
	c := a.client()
	ctx := context.Background()
	ssrf := "s3://latest/meta-data/iam/security-credentials/role?endpoint=" + meta.URL + "&region=us-east-1&use_path_style=true&anonymous=true"

	// The CLI refuses the jobspec before it sends anything.
	spec := writeSpec(t, fmt.Sprintf(`
batch "ssrf" {
  job "steal" {
    command = ["cat", "creds"]
    input "creds" {
      source = %q
      path   = "creds"
    }
  }
}`, ssrf))
	out := a.drover(a.token, "run", spec)
	if out.code == 0 || !strings.Contains(out.stderr, "spec.hcl:6:16") || !strings.Contains(out.stderr, `parameters "anonymous", "endpoint", "region", "use_path_style"`) {
		t.Errorf("drover run of the SSRF jobspec: exit %d\n%s%s", out.code, out.stdout, out.stderr)
	}

	// The API refuses each form with 400 naming the parameter.
	job := func(in, out string) string {
		return fmt.Sprintf(`{"jobs": [{"job_id": 1, "command": ["cat", "creds"], "cpu": 0.1, "memory": 16777216,
			"inputs": [{"name": "creds", "source": %q, "path": "creds"}], "outputs": [{"name": "o", "path": "o", "destination": %q}]}]}`, in, out)
	}
	for _, c := range []struct{ name, body, want string }{
		{"the metadata service", job(ssrf, "file://"+bucket+"/o"), `parameters "anonymous", "endpoint", "region", "use_path_style"`},
		{"an output to an internal API", job("file://"+bucket+"/in", "s3://v1/jobs?endpoint="+meta.URL), `parameter "endpoint"`},
		{"a profile", job("s3://b/k?profile=prod", "file://"+bucket+"/o"), `parameter "profile"`},
		{"a gs key path", job("gs://b/k?private_key_path=/etc/shadow", "file://"+bucket+"/o"), `parameter "private_key_path"`},
		{"user information", job("gs://root:pw@b/k", "file://"+bucket+"/o"), "user information"},
	} {
		code, body := rawPost(t, a, a.token, "/api/v1/batches", c.body)
		if code != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want 400 naming %s", c.name, code, body, c.want)
		}
	}

	// A query smuggled in through job variables passes submit (the URL as
	// written holds none) and is refused by the worker, after expanding.
	for _, p := range []string{"s3://latest", "s3://v1"} {
		a.drover(a.token, "billing-project", "storage", "add", "default", p).must(t, 0)
	}
	os.WriteFile(filepath.Join(bucket, "result"), []byte("x"), 0o644)
	res, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Name: "smuggle", Jobs: []api.JobSpec{
		{JobID: 1, Name: "in", Command: []string{"cat", "creds"}, CPU: 0.1, Memory: 16 << 20,
			Env:    map[string]string{"X": strings.TrimPrefix(ssrf, "s3://latest/")},
			Inputs: []api.InputFile{{Name: "creds", Source: "s3://latest/$X", Path: "creds"}}},
		{JobID: 2, Name: "out", Command: []string{"sh", "-c", "echo the bytes of the job > o"}, CPU: 0.1, Memory: 16 << 20,
			Env:     map[string]string{"Y": "jobs?endpoint=" + meta.URL},
			Outputs: []api.OutputFile{{Name: "o", Path: "o", Destination: "s3://v1/${Y}"}}},
	}})
	if err != nil {
		t.Fatalf("submit with variables: %v", err)
	}
	for id := int64(1); id <= 2; id++ {
		j := finished(t, c, res.ID, id)
		if j.State != api.JobError || !strings.Contains(j.Message, `parameter "endpoint"`) && !strings.Contains(j.Message, `parameters "anonymous", "endpoint"`) {
			t.Errorf("job %s: %s %q, want an error naming the endpoint parameter", j.Name, j.State, j.Message)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if seen := meta.requests(); len(seen) > 0 {
		t.Fatalf("the worker talked to the address a job chose: %v", seen)
	}
}

// TestHostileStorageIsScopedPerProject: the shared files. Project
// B writes under its prefix; project A can neither read nor overwrite it
// (403 naming the URL and the project), nor reach it by a neighbour's name
// (projAB), by "..", or through a symlink in its own prefix (the worker
// resolves links and ends the job in error). A prefix removed while a
// batch waits stops its jobs that start afterwards: they end in error
// naming the URL, as the docs say.
func TestHostileStorageIsScopedPerProject(t *testing.T) {
	bucket := t.TempDir()
	for _, d := range []string{"projA", "projB"} {
		os.MkdirAll(filepath.Join(bucket, d), 0o755)
	}
	a := startAgent(t, "", "", "-workers", "1", "-file-url-roots", bucket)
	admin := a.client()
	ctx := context.Background()
	tokens := map[string]string{}
	for u, p := range map[string]string{"alice": "projA", "bob": "projB"} {
		usr, err := admin.CreateUser(ctx, &api.CreateUserRequest{Name: u})
		if err != nil {
			t.Fatal(err)
		}
		tokens[u] = usr.Token
		if _, err := admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: p, Members: []string{u}}); err != nil {
			t.Fatal(err)
		}
		a.drover(a.token, "billing-project", "storage", "add", p, "file://"+filepath.Join(bucket, p)).must(t, 0)
	}
	alice, bob := api.NewClient(a.addr, tokens["alice"]), api.NewClient(a.addr, tokens["bob"])
	// Members list their own project's prefixes, not the other's.
	if out := a.drover(tokens["alice"], "billing-project", "storage", "list", "projA").must(t, 0); !strings.Contains(out.stdout, filepath.Join(bucket, "projA")) {
		t.Fatalf("alice lists:\n%s", out.stdout)
	}
	if out := a.drover(tokens["alice"], "billing-project", "storage", "list", "projB"); out.code == 0 || !strings.Contains(out.stderr, "not in billing project") {
		t.Fatalf("alice lists B's: %d %s", out.code, out.stderr)
	}

	// B writes its result.
	result := "file://" + filepath.Join(bucket, "projB", "result.txt")
	bres, err := bob.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "projB", Jobs: []api.JobSpec{
		{JobID: 1, Name: "write", Command: []string{"sh", "-c", "echo result of B > r"}, CPU: 0.1, Memory: 16 << 20,
			Outputs: []api.OutputFile{{Name: "r", Path: "r", Destination: result}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if j := finished(t, bob, bres.ID, 1); j.State != api.JobSuccess {
		t.Fatalf("B's job: %s %q", j.State, j.Message)
	}

	// A may neither read nor overwrite it, by any spelling.
	jobIO := func(in, out string) []api.JobSpec {
		js := api.JobSpec{JobID: 1, Name: "attack", Command: []string{"sh", "-c", "cat in; echo A was here > out"}, CPU: 0.1, Memory: 16 << 20}
		if in != "" {
			js.Inputs = []api.InputFile{{Name: "in", Source: in, Path: "in"}}
		}
		if out != "" {
			js.Outputs = []api.OutputFile{{Name: "out", Path: "out", Destination: out}}
		}
		return []api.JobSpec{js}
	}
	for _, c := range []struct {
		name, in, out string
		code          int
		want          string
	}{
		{"read B's result", result, "", 403, fmt.Sprintf("%q is under none of billing project projA's 1 storage prefixes", result)},
		{"overwrite B's result", "", result, 403, fmt.Sprintf("output \"out\": %q is under none of billing project projA's", result)},
		{"a neighbour's name", "file://" + filepath.Join(bucket, "projAB", "x"), "", 403, "projAB"},
		{"dots", "file://" + filepath.Join(bucket, "projA") + "/../projB/result.txt", "", 400, `".." path segment`},
	} {
		_, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "projA", Jobs: jobIO(c.in, c.out)})
		if !api.IsStatus(err, c.code) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %d naming %q", c.name, err, c.code, c.want)
		}
	}
	// Nor through a link in its own prefix (made by anyone who can write
	// there): the worker resolves it and refuses.
	if err := os.Symlink(filepath.Join(bucket, "projB"), filepath.Join(bucket, "projA", "b")); err != nil {
		t.Fatal(err)
	}
	linked := "file://" + filepath.Join(bucket, "projA", "b", "result.txt")
	ares, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "projA", Jobs: jobIO(linked, "")})
	if err != nil {
		t.Fatalf("a URL in A's prefix by its spelling: %v", err)
	}
	if j := finished(t, alice, ares.ID, 1); j.State != api.JobError || !strings.Contains(j.Message, "leads out of its storage prefix") {
		t.Errorf("through a link into B's prefix: %s %q", j.State, j.Message)
	}
	lres, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "projA", Jobs: jobIO("", linked)})
	if err != nil {
		t.Fatal(err)
	}
	if j := finished(t, alice, lres.ID, 1); j.State != api.JobError || !strings.Contains(j.Message, "leads out of its storage prefix") {
		t.Errorf("writing through a link into B's prefix: %s %q", j.State, j.Message)
	}
	if got, _ := os.ReadFile(filepath.Join(bucket, "projB", "result.txt")); string(got) != "result of B\n" {
		t.Fatalf("B's result now reads %q", got)
	}

	// A prefix removed while a batch waits: the job that starts after it
	// ends in error naming its URL; nothing is read.
	os.WriteFile(filepath.Join(bucket, "projA", "in.txt"), []byte("A's input"), 0o644)
	wres, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "projA", Jobs: []api.JobSpec{
		{JobID: 1, Name: "first", Command: []string{"sleep", "2"}, CPU: 0.1, Memory: 16 << 20},
		{JobID: 2, Name: "after", Command: []string{"cat", "in"}, CPU: 0.1, Memory: 16 << 20, ParentIDs: []int64{1},
			Inputs: []api.InputFile{{Name: "in", Source: "file://" + filepath.Join(bucket, "projA", "in.txt"), Path: "in"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	a.drover(a.token, "billing-project", "storage", "remove", "projA", "file://"+filepath.Join(bucket, "projA")).must(t, 0)
	if j := finished(t, alice, wres.ID, 2); j.State != api.JobError || !strings.Contains(j.Message, "in.txt") || !strings.Contains(j.Message, "under none of the storage prefixes") {
		t.Errorf("a job whose prefix was removed while it waited: %s %q", j.State, j.Message)
	}
}

// TestHostileStorageCredentials: a project's S3 keys, given by an admin
// from files (never on a command line), are used by the worker for that
// project's attempts, against a store that checks every signature (the
// worker's own keys, in its environment, would be refused there); they
// are never in an API answer, nor in the clear in the data dir (raft.db,
// snapshots, a saved snapshot), and a real job of the project cannot
// find them in its environment, its directory or any process it can see.
func TestHostileStorageCredentials(t *testing.T) {
	raw := make([]byte, 12)
	rand.Read(raw)
	suffix := hex.EncodeToString(raw)
	secret := "drover-e2e-" + suffix // written nowhere in this test's requests but the admin's key file
	store, err := s3fake.Start([]s3fake.Key{
		{ID: "AKIDPROJA", Secret: secret, Prefixes: []string{"data/projA"}},
		{ID: "AKIDWORKER", Secret: "the-workers-own", Prefixes: []string{"data"}},
	}, "data")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	store.Put("data", "projA/in.txt", []byte("A's input\n"))
	// The workers' own identity: a fallback to it would be seen (and let
	// through) by the store.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDWORKER")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "the-workers-own")
	t.Setenv("AWS_REGION", "us-east-1")
	a := startAgent(t, "", "", "-workers", "1")
	admin := a.client()
	ctx := context.Background()
	usr, err := admin.CreateUser(ctx, &api.CreateUserRequest{Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: "projA", Members: []string{"alice"}}); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(keyFile, []byte(secret+"\n"), 0o600)
	add := a.drover(a.token, "billing-project", "storage", "add", "projA", "s3://data/projA",
		"-s3-access-key-id", "AKIDPROJA", "-s3-secret-access-key-file", keyFile, "-s3-endpoint", store.URL, "-s3-region", "us-east-1", "-s3-path-style").must(t, 0)
	if !strings.Contains(add.stdout, "s3-keys") {
		t.Fatalf("storage add:\n%s", add.stdout)
	}
	// A member may not add or change prefixes.
	if out := a.drover(usr.Token, "billing-project", "storage", "add", "projA", "s3://data/projB"); out.code == 0 || !strings.Contains(out.stderr, "not an admin") {
		t.Fatalf("a member adds a prefix: %d %s", out.code, out.stderr)
	}

	// The job looks for the secret everywhere it can: its environment, its
	// directory (the input is there) and every process's command line and
	// environment it can read. The pattern is put together in a file so
	// that no command line, and nothing the servers keep, holds it whole.
	alice := api.NewClient(a.addr, usr.Token)
	script := `mkdir p && printf '%s' "drover-e2e-""$PART1""$PART2" > p/.pat || exit 9
test -s in || exit 2
if env | grep -qF -f p/.pat; then echo "in my environment"; exit 3; fi
if grep -rqF -f p/.pat --exclude-dir=p . ; then echo "in my directory"; exit 4; fi
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do
  if grep -aqF -f p/.pat "$f" 2>/dev/null; then echo "in $f"; exit 5; fi
done
rm -rf p
echo nothing found; cat in > out`
	res, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "projA", Jobs: []api.JobSpec{
		{JobID: 1, Name: "look", Command: []string{"sh", "-c", script}, CPU: 0.1, Memory: 32 << 20,
			Env:     map[string]string{"PART1": suffix[:10], "PART2": suffix[10:]},
			Inputs:  []api.InputFile{{Name: "in", Source: "s3://data/projA/in.txt", Path: "in"}},
			Outputs: []api.OutputFile{{Name: "out", Path: "out", Destination: "s3://data/projA/out/$DROVER_BATCH_ID.txt"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	j := finished(t, alice, res.ID, 1)
	log, _ := alice.JobLog(ctx, res.ID, 1, 0)
	if j.State != api.JobSuccess || !strings.Contains(string(log), "nothing found") {
		t.Fatalf("the job: %s %q, log:\n%s", j.State, j.Message, log)
	}
	if got, err := store.Get("data", fmt.Sprintf("projA/out/%d.txt", res.ID)); err != nil || string(got) != "A's input\n" {
		t.Fatalf("the output in the store: %q %v", got, err)
	}
	byKey := map[string]int{}
	for _, r := range store.Requests() {
		byKey[r.KeyID]++
		if r.Refusal != "" {
			t.Errorf("the store refused %+v", r)
		}
	}
	if byKey["AKIDPROJA"] < 2 || byKey["AKIDWORKER"] != 0 {
		t.Fatalf("requests by key: %v: the worker did not act as the project", byKey)
	}

	// No API answer holds the credentials.
	for _, path := range []string{"/api/v1/billing-projects", "/api/v1/billing-projects/projA/storage", "/api/v1/audit",
		fmt.Sprintf("/api/v1/batches/%d/jobs/1", res.ID)} {
		var body []byte
		if err := admin.Do(ctx, http.MethodGet, path, nil, (*rawJSON)(&body)); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if bytes.Contains(body, []byte(secret)) {
			t.Fatalf("GET %s answers with the secret", path)
		}
	}
	for _, args := range [][]string{{"billing-project", "show", "projA", "-json"}, {"billing-project", "storage", "list", "projA", "-json"}} {
		if out := a.drover(a.token, args...).must(t, 0); strings.Contains(out.stdout, secret) || !strings.Contains(out.stdout, "s3-keys") {
			t.Fatalf("drover %v:\n%s", args, out.stdout)
		}
	}

	// At rest: a saved snapshot and everything in the data dir (raft.db,
	// Raft's snapshots, the job logs) hold the prefix but not the secret.
	snap := filepath.Join(t.TempDir(), "snap")
	a.drover(a.token, "operator", "snapshot", "save", snap).must(t, 0)
	files, prefixSeen := map[string]bool{}, false
	check := func(p string) {
		data, err := os.ReadFile(p)
		if err != nil {
			return
		}
		files[filepath.Base(p)] = true
		if bytes.Contains(data, []byte(secret)) || bytes.Contains(data, []byte(suffix)) {
			t.Errorf("%s holds the secret in the clear", p)
		}
		prefixSeen = prefixSeen || bytes.Contains(data, []byte("s3://data/projA"))
	}
	check(snap)
	filepath.Walk(a.dataDir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			check(p)
		}
		return nil
	})
	if !prefixSeen || !files["raft.db"] {
		t.Fatalf("read %v, the prefix in none: the check looked in the wrong place", files)
	}
}

// rawJSON keeps an answer's bytes as they came.
type rawJSON []byte

// UnmarshalJSON implements json.Unmarshaler.
func (r *rawJSON) UnmarshalJSON(b []byte) error {
	*r = append((*r)[:0], b...)
	return nil
}

// TestHostileHostNetworkIsAProjectSetting: a member's job on network
// "host" (from which it reaches whatever listens on its machine) is
// refused with 403 naming the project and the setting until an admin
// allows it for the project; an admin's own is not; a member cannot
// change the setting.
func TestHostileHostNetworkIsAProjectSetting(t *testing.T) {
	a := startAgent(t, "", "", "-workers", "0")
	admin := a.client()
	ctx := context.Background()
	usr, err := admin.CreateUser(ctx, &api.CreateUserRequest{Name: "mallory"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: "lab", Members: []string{"mallory", "root"}}); err != nil {
		t.Fatal(err)
	}
	spec := writeSpec(t, `
batch "host" {
  billing_project = "lab"
  job "raft" {
    image   = "registry.example.com/attack:1"
    network = "host"
    command = ["attack", "127.0.0.1"]
  }
}`)
	out := a.drover(usr.Token, "run", spec)
	if out.code == 0 || !strings.Contains(out.stderr, "billing project lab") || !strings.Contains(out.stderr, "allow_host_network") {
		t.Fatalf("a member's host-network job: %d\n%s%s", out.code, out.stdout, out.stderr)
	}
	if out := a.drover(usr.Token, "billing-project", "set", "lab", "-allow-host-network=true"); out.code == 0 || !strings.Contains(out.stderr, "not an admin") {
		t.Fatalf("a member allows itself: %d %s", out.code, out.stderr)
	}
	a.drover(a.token, "run", spec).must(t, 0) // an admin's
	a.drover(a.token, "billing-project", "set", "lab", "-allow-host-network=true").must(t, 0)
	if show := a.drover(a.token, "billing-project", "show", "lab").must(t, 0); !strings.Contains(show.stdout, "allowed to its members") {
		t.Fatalf("show:\n%s", show.stdout)
	}
	a.drover(usr.Token, "run", spec).must(t, 0)
	a.drover(a.token, "billing-project", "set", "lab", "-allow-host-network=false").must(t, 0)
	if out := a.drover(usr.Token, "run", spec); out.code == 0 || !strings.Contains(out.stderr, "allow_host_network") {
		t.Fatalf("after the admin took it back: %d %s", out.code, out.stderr)
	}
}
