package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestStoragePrefixesOverTheAPI: only an admin sets a billing project's
// storage prefixes, with bounded, checked requests (4xx naming the limit,
// nothing in the log); its members list them without credentials; jobs
// are refused (403 naming the URL and the project) outside their
// project's prefixes and (400 naming the parameter) with URLs that would
// steer the driver; a worker gets the credentials of the prefixes its
// attempt needs, and of no other; the log, the snapshot, the data dir and
// every answer hold no credential in the clear.
func TestStoragePrefixesOverTheAPI(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	admin := tc.admin
	users := map[string]*api.Client{}
	for _, name := range []string{"alice", "bob", "vera"} {
		u, err := admin.CreateUser(ctx, &api.CreateUserRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		users[name] = api.NewClient(tc.url, u.Token)
	}
	for p, m := range map[string]string{"projA": "alice", "projB": "bob"} {
		if _, err := admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: p, Members: []string{m}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.SetRole(ctx, "projA", "vera", "viewer"); err != nil {
		t.Fatal(err)
	}
	secretA := fmt.Sprintf("s3cr3t-of-projA-%d", time.Now().UnixNano())
	secretB := fmt.Sprintf("s3cr3t-of-projB-%d", time.Now().UnixNano())
	if _, err := admin.AddStoragePrefix(ctx, "projA", &api.AddStoragePrefixRequest{Prefix: "s3://data/projA/",
		Credentials: &api.StorageCredentials{S3AccessKeyID: "AKIDPROJA", S3SecretAccessKey: secretA},
		S3:          &api.S3Settings{Endpoint: "http://127.0.0.1:9", Region: "us-east-1", PathStyle: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AddStoragePrefix(ctx, "projB", &api.AddStoragePrefixRequest{Prefix: "s3://data/projB",
		Credentials: &api.StorageCredentials{S3AccessKeyID: "AKIDPROJB", S3SecretAccessKey: secretB}}); err != nil {
		t.Fatal(err)
	}
	list, err := admin.AddStoragePrefix(ctx, "projA", &api.AddStoragePrefixRequest{Prefix: "file:///bucket/projA"})
	if err != nil || len(list) != 2 || list[0].Prefix != "file:///bucket/projA" || list[1].Credentials != api.CredentialsS3Keys || list[1].AddedBy != "root" {
		t.Fatalf("prefixes: %+v %v", list, err)
	}

	// Refusals, each naming what is wrong, none reaching the log.
	commands0 := requestCommands(t, tc.srv)
	tok := admin.Token()
	path := "/api/v1/billing-projects/projA/storage"
	for _, c := range []struct {
		name, method, path, token, body string
		code                            int
		want                            string
	}{
		{"a member adds", "POST", path, users["alice"].Token(), `{"prefix": "gs://b/x"}`, 403, "not an admin"},
		{"a query", "POST", path, tok, `{"prefix": "s3://data/x?endpoint=http://169.254.169.254"}`, 400, `parameter "endpoint"`},
		{"dots", "POST", path, tok, `{"prefix": "gs://b/x/../y"}`, 400, `".." path segment`},
		{"a key on file://", "POST", path, tok, `{"prefix": "file:///d/x", "credentials": {"s3_access_key_id": "a", "s3_secret_access_key": "b"}}`, 400, "for s3:// prefixes"},
		{"a long secret", "POST", path, tok, `{"prefix": "s3://d/x", "credentials": {"s3_access_key_id": "a", "s3_secret_access_key": "` + strings.Repeat("x", 300) + `"}}`, 400, "s3_secret_access_key is 300 bytes; the limit is 256"},
		{"a huge key", "POST", path, tok, `{"prefix": "gs://d/x", "credentials": {"gcs_service_account_key": "` + strings.Repeat("x", api.MaxCredentialBytes+1) + `"}}`, 400, "the limit is 16384"},
		{"a huge body", "POST", path, tok, `{"prefix": "gs://d/x", "credentials": {"gcs_service_account_key": "` + strings.Repeat("x", 200<<10) + `"}}`, 413, "larger than 128 KiB"},
		{"a bad endpoint", "POST", path, tok, `{"prefix": "s3://d/x", "s3": {"endpoint": "file:///etc"}}`, 400, "not an http:// or https:// URL"},
		{"no such project", "POST", "/api/v1/billing-projects/nope/storage", tok, `{"prefix": "gs://d/x"}`, 404, `"nope" does not exist`},
		{"remove unknown", "DELETE", path + "?prefix=gs://d/none", tok, "", 404, "has no storage prefix"},
		{"remove a member", "DELETE", path + "?prefix=file:///bucket/projA", users["alice"].Token(), "", 403, "not an admin"},
		{"settings by a member", "PUT", "/api/v1/billing-projects/projA/settings", users["alice"].Token(), `{"allow_host_network": true}`, 403, "not an admin"},
		{"another project's list", "GET", path, users["bob"].Token(), "", 403, `not in billing project "projA"`},
	} {
		code, msg := tc.raw(c.method, c.path, c.token, c.body)
		if code != c.code || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %d %.300q, want %d naming %q", c.name, code, msg, c.code, c.want)
		}
	}
	if n := requestCommands(t, tc.srv) - commands0; n != 0 {
		t.Errorf("refused requests reached the Raft log: %d commands", n)
	}
	// The bound on prefixes, at apply.
	for i := 2; i < api.MaxStoragePrefixes; i++ {
		if _, err := admin.AddStoragePrefix(ctx, "projA", &api.AddStoragePrefixRequest{Prefix: fmt.Sprintf("gs://many/p%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if code, msg := tc.raw("POST", path, tok, `{"prefix": "gs://one/too-many"}`); code != 409 || !strings.Contains(msg, "32 storage prefixes, the most one may have") {
		t.Errorf("a 33rd prefix: %d %q", code, msg)
	}
	for i := 2; i < api.MaxStoragePrefixes; i++ {
		if _, err := admin.RemoveStoragePrefix(ctx, "projA", fmt.Sprintf("gs://many/p%d/", i)); err != nil {
			t.Fatal(err)
		}
	}

	// Members and viewers list their project's prefixes: the kind of
	// credentials, never the credentials.
	for _, who := range []string{"alice", "vera"} {
		got, err := users[who].ListStoragePrefixes(ctx, "projA")
		if err != nil || len(got) != 2 || got[1].Credentials != api.CredentialsS3Keys || got[1].S3 == nil || got[1].S3.Endpoint != "http://127.0.0.1:9" {
			t.Fatalf("%s lists %+v %v", who, got, err)
		}
	}
	for _, c := range []*api.Client{admin, users["alice"], users["bob"]} {
		for _, p := range []string{"/api/v1/billing-projects", "/api/v1/billing-projects/projA/storage", "/api/v1/billing-projects/projB/storage"} {
			var raw json.RawMessage
			_ = c.Do(ctx, http.MethodGet, p, nil, &raw)
			if bytes.Contains(raw, []byte(secretA)) || bytes.Contains(raw, []byte(secretB)) || bytes.Contains(raw, []byte("AKIDPROJ")) {
				t.Fatalf("GET %s answers with credentials: %s", p, raw)
			}
		}
	}

	// Jobs: only under their project's prefixes, and no URL that steers
	// the driver.
	job := func(in, out string) []api.JobSpec {
		return []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 0.1, Memory: 1 << 20,
			Inputs: []api.InputFile{{Name: "in", Source: in, Path: "in"}}, Outputs: []api.OutputFile{{Name: "out", Path: "out", Destination: out}}}}
	}
	submit := func(c *api.Client, project string, jobs []api.JobSpec) error {
		_, err := c.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: project, Jobs: jobs})
		return err
	}
	for _, c := range []struct {
		name, who, project, in, out string
		code                        int
		want                        string
	}{
		{"read A's as B", "bob", "projB", "s3://data/projA/in.txt", "s3://data/projB/out.txt", 403, `"s3://data/projA/in.txt" is under none of billing project projB's 1 storage prefixes`},
		{"write A's as B", "bob", "projB", "s3://data/projB/in.txt", "s3://data/projA/out.txt", 403, `output "out": "s3://data/projA/out.txt" is under none of billing project projB's`},
		{"a neighbour's name", "alice", "projA", "s3://data/projAB/in.txt", "s3://data/projA/o", 403, "projAB"},
		{"the issue's SSRF", "alice", "projA", "s3://latest/meta-data/iam/security-credentials/role?endpoint=http://127.0.0.1:18080&region=us-east-1&use_path_style=true&anonymous=true", "s3://data/projA/o", 400, `parameters "anonymous", "endpoint", "region", "use_path_style"`},
		{"an output's SSRF", "alice", "projA", "s3://data/projA/in.txt", "s3://v1/jobs?endpoint=http://127.0.0.1:18080", 400, `parameter "endpoint"`},
		{"gs private_key_path", "alice", "projA", "gs://b/k?private_key_path=/etc/shadow", "s3://data/projA/o", 400, `parameter "private_key_path"`},
		{"a viewer", "vera", "projA", "s3://data/projA/in.txt", "s3://data/projA/o", 403, "viewer"},
	} {
		err := submit(users[c.who], c.project, job(c.in, c.out))
		if !api.IsStatus(err, c.code) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %d naming %q", c.name, err, c.code, c.want)
		}
	}
	if err := submit(users["alice"], "projA", job("s3://data/projA/in-$DROVER_INDEX.txt", "file:///bucket/projA/out.txt")); err != nil {
		t.Fatal(err)
	}

	// The worker running it gets the prefixes its files are under, A's
	// keys opened, and nothing of B's.
	w := newSimWorker(t, tc, "w1", 4)
	var assign api.Assignment
	for deadline := time.Now().Add(10 * time.Second); assign.BatchID == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no assignment")
		}
		if res := w.sync(time.Second); len(res.Assign) > 0 {
			assign = res.Assign[0]
		}
	}
	if len(assign.Storage) != 2 {
		t.Fatalf("grants %+v", assign.Storage)
	}
	g := assign.Storage[1]
	if assign.Storage[0].Prefix != "file:///bucket/projA" || assign.Storage[0].Credentials != nil ||
		g.Prefix != "s3://data/projA" || g.Credentials == nil || g.Credentials.S3SecretAccessKey != secretA || g.Credentials.S3AccessKeyID != "AKIDPROJA" ||
		g.S3 == nil || !g.S3.PathStyle || g.Error != "" {
		t.Fatalf("grants %+v (credentials %+v)", assign.Storage, g.Credentials)
	}
	if strings.Contains(fmt.Sprint(assign), secretB) {
		t.Fatal("the assignment holds another project's secret")
	}

	// At rest: the log, a snapshot and everything in the data dir hold
	// ciphertext only; the audit log does not hold the credentials either.
	if err := tc.srv.raft.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	found := 0
	err = filepath.Walk(tc.dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		found++
		for _, s := range []string{secretA, secretB} {
			if bytes.Contains(data, []byte(s)) {
				t.Errorf("%s holds a secret in the clear", p)
			}
		}
		return nil
	})
	if err != nil || found < 3 {
		t.Fatalf("walked %d files: %v", found, err)
	}
	for _, e := range tc.srv.state.AuditLog(time.Now().Add(-time.Hour), "", 10000) {
		if strings.Contains(fmt.Sprint(e), secretA) {
			t.Fatalf("audit entry %+v holds the secret", e)
		}
	}
}

// TestStorageCredentialsNeedASecretsKey: servers of a cluster given no
// -secrets-key-file keep no credentials (each would make a key of its
// own that the others could not open): a prefix with credentials is
// refused, one without is taken.
func TestStorageCredentialsNeedASecretsKey(t *testing.T) {
	tc := startServer(t, "", func(cfg *Config) {
		cfg.Bootstrap = false
		cfg.BootstrapExpect = 1
		cfg.Join = []string{"127.0.0.1:1"} // one of several
		cfg.GossipAddr = "127.0.0.1:0"
		cfg.Insecure = true
	})
	ctx := context.Background()
	_, err := tc.admin.AddStoragePrefix(ctx, "default", &api.AddStoragePrefixRequest{Prefix: "s3://d/x",
		Credentials: &api.StorageCredentials{S3AccessKeyID: "a", S3SecretAccessKey: "b"}})
	if !api.IsStatus(err, 400) || !strings.Contains(err.Error(), "-secrets-key-file") {
		t.Fatalf("credentials without a key: %v", err)
	}
	if _, err := tc.admin.AddStoragePrefix(ctx, "default", &api.AddStoragePrefixRequest{Prefix: "s3://d/x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tc.dir, "secrets.key")); err == nil {
		t.Fatal("a server of several made a key of its own")
	}
}
