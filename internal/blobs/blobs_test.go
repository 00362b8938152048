package blobs

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/api/option"

	"github.com/drover-sched/drover/testkit/s3fake"
)

func TestSplit(t *testing.T) {
	for _, c := range []struct{ in, scheme, bucket, key, err string }{
		{"gs://bkt/ref/hg38.fa", "gs", "bkt", "ref/hg38.fa", ""},
		{"s3://bkt/a.txt", "s3", "bkt", "a.txt", ""},
		{"file:///data/in/a.txt", "file", "/data/in", "a.txt", ""},
		{"mem://b/k", "mem", "b", "k", ""},
		// Nothing but the bucket and the key may reach a driver.
		{"s3://bkt/a.txt?region=eu-west-1", "", "", "", "no query"},
		{"s3://latest/meta-data?endpoint=http://127.0.0.1:1&anonymous=true", "", "", "", "no query"},
		{"gs://bkt/k?", "", "", "", "no query"},
		{"gs://bkt/k#x", "", "", "", "no query"},
		{"gs://u:p@bkt/k", "", "", "", "u:xxxxx@bkt"},
		{"s3://bkt:9000/k", "", "", "", "no query"},
		{"gs://bkt", "", "", "", "names no object"},
		{"file://host/a/b", "", "", "", "names no file"},
		{"ftp://x/y", "", "", "", "unknown scheme"},
	} {
		s, b, k, err := Split(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || s != c.scheme || b != c.bucket || k != c.key {
			t.Errorf("%s: %q %q %q %v", c.in, s, b, k, err)
		}
	}
}

// TestDriversAreLinked: the log store's URLs (an operator's, whose query
// configures the driver) open with every driver.
func TestDriversAreLinked(t *testing.T) {
	ctx := context.Background()
	b, err := Open(ctx, "s3://drover-test-bucket?region=us-east-1")
	if err != nil {
		t.Fatalf("s3: %v", err)
	}
	b.Close()
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/credentials.json")
	if _, err := Open(ctx, "gs://drover-test-bucket"); err != nil && strings.Contains(err.Error(), "no driver registered") {
		t.Fatalf("gs: %v", err)
	}
	m, err := Open(ctx, "mem://x")
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}

// TestS3WithProjectKeys drives gocloud's s3blob and aws-sdk-go-v2 against
// a store that checks every signature: a bucket opened with a project's
// keys reads and writes under the project's prefix with those keys, even
// with other keys in the worker's environment; another project's keys
// are refused there, and so is the worker's own identity.
func TestS3WithProjectKeys(t *testing.T) {
	store, err := s3fake.Start([]s3fake.Key{
		{ID: "AKIDPROJA", Secret: "secret-of-a", Prefixes: []string{"data/projA"}},
		{ID: "AKIDPROJB", Secret: "secret-of-b", Prefixes: []string{"data/projB"}},
		{ID: "AKIDWORKER", Secret: "secret-of-worker", Prefixes: []string{"data/worker"}},
	}, "data")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Put("data", "projA/in.txt", []byte("reads of A")); err != nil {
		t.Fatal(err)
	}
	// The worker's own AWS identity, which a project's bucket must not use.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDWORKER")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret-of-worker")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	ctx := context.Background()
	access := func(id, secret string) Access {
		return Access{S3AccessKeyID: id, S3SecretAccessKey: secret, S3Endpoint: store.URL, S3Region: "us-east-1", S3PathStyle: true}
	}

	a, err := OpenBucket(ctx, "s3", "data", access("AKIDPROJA", "secret-of-a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	got, err := a.ReadAll(ctx, "projA/in.txt")
	if err != nil || string(got) != "reads of A" {
		t.Fatalf("read with A's keys: %q %v", got, err)
	}
	out := strings.Repeat("result of A\n", 50_000)
	if err := a.WriteAll(ctx, "projA/out/result.txt", []byte(out), nil); err != nil {
		t.Fatalf("write with A's keys: %v", err)
	}
	if stored, err := store.Get("data", "projA/out/result.txt"); err != nil || string(stored) != out {
		t.Fatalf("stored: %d bytes %v", len(stored), err)
	}
	if _, err := a.ReadAll(ctx, "projB/secret.txt"); err == nil {
		t.Fatal("A's keys read under projB")
	}

	b, err := OpenBucket(ctx, "s3", "data", access("AKIDPROJB", "secret-of-b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.ReadAll(ctx, "projA/in.txt"); err == nil {
		t.Fatal("B's keys read A's object")
	}
	forged, _ := OpenBucket(ctx, "s3", "data", access("AKIDPROJA", "not-the-secret"))
	defer forged.Close()
	if _, err := forged.ReadAll(ctx, "projA/in.txt"); err == nil {
		t.Fatal("a wrong secret was accepted")
	}

	worker, err := OpenBucket(ctx, "s3", "data", Access{S3Endpoint: store.URL, S3PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	if _, err := worker.ReadAll(ctx, "projA/in.txt"); err == nil {
		t.Fatal("the worker's own identity read A's object")
	}

	seen := map[string]int{}
	for _, r := range store.Requests() {
		if r.Refusal == "" {
			seen[r.KeyID]++
		}
	}
	if seen["AKIDPROJA"] < 2 || seen["AKIDWORKER"] != 0 || seen["AKIDPROJB"] != 0 {
		t.Fatalf("requests let through by key: %v (all: %+v)", seen, store.Requests())
	}
}

// gcsFake is a token endpoint (a service account's token_uri) and the GCS
// JSON and XML APIs for one object, recording who asked.
type gcsFake struct {
	srv        *httptest.Server
	mu         sync.Mutex
	assertedBy []string // service accounts that asked for a token
	bearers    []string // tokens storage requests carried
}

func newGCSFake(t *testing.T, object string) *gcsFake {
	f := &gcsFake{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/token":
			// The JWT-bearer grant: the assertion's claims name the
			// service account; the token says whose it is.
			_ = r.ParseForm()
			parts := strings.Split(r.PostForm.Get("assertion"), ".")
			var claims struct{ Iss string }
			if len(parts) == 3 {
				raw, _ := decodeSegment(parts[1])
				_ = json.Unmarshal(raw, &claims)
			}
			f.mu.Lock()
			f.assertedBy = append(f.assertedBy, claims.Iss)
			f.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"access_token":"token-of-%s","token_type":"Bearer","expires_in":3600}`, claims.Iss)
		default:
			f.mu.Lock()
			f.bearers = append(f.bearers, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			f.mu.Unlock()
			if r.Header.Get("Authorization") != "Bearer token-of-projA@p.iam.gserviceaccount.com" {
				http.Error(w, `{"error":{"code":403,"message":"denied"}}`, http.StatusForbidden)
				return
			}
			// An XML read (GET /BUCKET/KEY) or a JSON media download.
			if strings.HasSuffix(r.URL.Path, "/"+object) || r.URL.Query().Get("alt") == "media" {
				w.Header().Set("Content-Type", "text/plain")
				io.WriteString(w, "reads of A")
				return
			}
			http.Error(w, `{"error":{"code":404,"message":"not found"}}`, http.StatusNotFound)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func decodeSegment(s string) ([]byte, error) {
	for len(s)%4 != 0 {
		s += "="
	}
	return base64URL.DecodeString(s)
}

// serviceAccountKey writes a service account's JSON key whose token_uri is
// the fake's.
func serviceAccountKey(t *testing.T, email, tokenURI string) []byte {
	t.Helper()
	pk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(pk)
	key, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "p", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": email, "client_id": "1", "token_uri": tokenURI,
	})
	return key
}

// TestGCSWithServiceAccountKey: a bucket opened with a project's
// service-account key gets its tokens for that account (the key's own
// token endpoint) and every storage request carries that token; the
// worker's application default credentials, though set, are never used.
// (GCS itself cannot run here: its token and storage endpoints are fakes
// speaking the documented wire format.)
func TestGCSWithServiceAccountKey(t *testing.T) {
	f := newGCSFake(t, "projA/in.txt")
	workerKey := filepath.Join(t.TempDir(), "worker.json")
	if err := os.WriteFile(workerKey, serviceAccountKey(t, "worker@p.iam.gserviceaccount.com", f.srv.URL+"/token"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", workerKey)
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	gcsClientOptions = []option.ClientOption{option.WithEndpoint(f.srv.URL + "/storage/v1/")}
	defer func() { gcsClientOptions = nil }()
	ctx := context.Background()

	b, err := OpenBucket(ctx, "gs", "data", Access{GCSServiceAccountKey: serviceAccountKey(t, "projA@p.iam.gserviceaccount.com", f.srv.URL+"/token")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, err := b.ReadAll(ctx, "projA/in.txt")
	if err != nil || string(got) != "reads of A" {
		t.Fatalf("read with the project's key: %q %v", got, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.assertedBy) == 0 || len(f.bearers) == 0 {
		t.Fatalf("no token asked (%v) or no storage request (%v)", f.assertedBy, f.bearers)
	}
	for _, who := range f.assertedBy {
		if who != "projA@p.iam.gserviceaccount.com" {
			t.Fatalf("a token was asked for %q (all: %v): the worker's own credentials were used", who, f.assertedBy)
		}
	}
	for _, tok := range f.bearers {
		if tok != "token-of-projA@p.iam.gserviceaccount.com" {
			t.Fatalf("a storage request carried %q", tok)
		}
	}
	if _, err := OpenBucket(ctx, "gs", "data", Access{GCSServiceAccountKey: []byte(`{"type":"external_account","credential_source":{"file":"/etc/shadow"}}`)}); err == nil {
		t.Fatal("an external-account credential was taken")
	}
}

// TestFileBucketOptions: a job's file:// bucket makes no metadata sidecar
// and makes its directory only when asked.
func TestFileBucketOptions(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "out")
	if _, err := OpenBucket(ctx, "file", dir, Access{}); err == nil {
		t.Fatal("opened a missing directory without CreateDir")
	}
	b, err := OpenBucket(ctx, "file", dir, Access{CreateDir: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.WriteAll(ctx, "a.txt", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "a.txt" {
		t.Fatalf("directory holds %v", ents)
	}
	if _, err := OpenBucket(ctx, "mem", "x", Access{}); err == nil {
		t.Fatal("a job's mem:// bucket opened")
	}
}

var base64URL = base64.URLEncoding
