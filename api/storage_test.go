package api

import (
	"strings"
	"testing"
)

// TestFileURLsCannotSteerTheDriver: the SSRF URLs and every other
// way a URL could carry driver settings or leave its prefix by spelling
// are refused, naming what is wrong.
func TestFileURLsCannotSteerTheDriver(t *testing.T) {
	for _, c := range []struct{ in, err string }{
		{"gs://bucket/ref/hg38.fa", ""},
		{"s3://my-bucket.example/a/b_c-1.txt", ""},
		{"file:///data/in/a.txt", ""},
		{"gs://bucket/sample-$DROVER_INDEX.fq", ""},
		{"gs://bucket/dir/${DROVER_INDEX}/x", ""},
		{"s3://latest/meta-data/iam/security-credentials/role?endpoint=http://127.0.0.1:18080&region=us-east-1&use_path_style=true&anonymous=true",
			`query parameters (parameters "anonymous", "endpoint", "region", "use_path_style")`},
		{"s3://v1/jobs?endpoint=http://127.0.0.1:1", `parameter "endpoint"`},
		{"s3://b/k?profile=prod", `parameter "profile"`},
		{"gs://b/k?private_key_path=/etc/shadow", `parameter "private_key_path"`},
		{"gs://b/k?", "an empty query"},
		{"gs://b/k#frag", "fragment"},
		{"gs://b/k#", "fragment"},
		{"gs://user:pw@b/k", "user information"},
		{"gs://user:pw@b/k", "gs://user:xxxxx@b/k"}, // the password is not echoed
		{"gs://b:8080/k", "not a bucket name"},
		{"gs://B/k", "not a bucket name"},
		{"gs://$BUCKET/k", "not a bucket name"},
		{"gs:b/k", "write gs://BUCKET/KEY"},
		{"gs://b/a/../k", `".." path segment`},
		{"gs://b/a/./k", `"." path segment`},
		{"gs://b/a//k", "empty path segment"},
		{"gs://b/a%2F..%2Fk", `".." path segment`},
		{"file:///data/../etc/passwd", `".." path segment`},
		{"file://host/a/b", "names no file"},
		{"file:///a", "names no file in a directory"},
		{"gs://bucket", "names no object"},
		{"gs://bucket/", "names no object"},
		{"gs://bucket/dir/", "names no object"},
		{"mem://x/y", "not one of gs, s3 or file"},
	} {
		err := ValidateFileURL(c.in)
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%q: %v, want %q", c.in, err, c.err)
		}
	}
}

func TestCleanStoragePrefix(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"gs://b", "gs://b", ""},
		{"gs://b/", "gs://b", ""},
		{"gs://b/projA/", "gs://b/projA", ""},
		{"s3://b/x/y", "s3://b/x/y", ""},
		{"file:///bucket/projA/", "file:///bucket/projA", ""},
		{"file:///", "", "whole file system"},
		{"gs://b/$X", "", "holds '$'"},
		{"gs://b/x?region=y", "", "query parameters"},
		{"gs://b/../x", "", `".." path segment`},
		{"http://x/y", "", "not one of gs, s3 or file"},
	} {
		got, err := CleanStoragePrefix(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %q %v, want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q %v, want %q", c.in, got, err, c.want)
		}
	}
}

// TestMatchStoragePrefix: a prefix covers by whole path segments, the
// longest wins, and neither a neighbour's name nor another bucket or
// scheme matches.
func TestMatchStoragePrefix(t *testing.T) {
	prefixes := []string{"gs://b/projA", "gs://b/projA/special", "gs://whole", "file:///bucket/projA", "s3://b/projA"}
	for _, c := range []struct {
		url  string
		want int
	}{
		{"gs://b/projA/x", 0},
		{"gs://b/projA/sub/dir/x", 0},
		{"gs://b/projA/special/x", 1},
		{"gs://b/projA/specialx", 0},
		{"gs://b/projAB/x", -1},
		{"gs://b/projA", -1}, // the object named like the prefix is not under it
		{"gs://b/proj/x", -1},
		{"gs://bb/projA/x", -1},
		{"s3://b/projA/x", 4},
		{"s3://b/projB/x", -1},
		{"gs://whole/any/thing", 2},
		{"gs://whol/x", -1},
		{"file:///bucket/projA/r.txt", 3},
		{"file:///bucket/projAB/r.txt", -1},
		{"file:///bucket/projB/r.txt", -1},
		{"file:///bucket/projA/../projB/r.txt", -2},
		{"gs://b/projA/x?endpoint=http://1.2.3.4", -2},
	} {
		got, err := MatchStoragePrefix(prefixes, c.url)
		if c.want == -2 {
			if err == nil {
				t.Errorf("%s: matched %d, want an error", c.url, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %d %v, want %d", c.url, got, err, c.want)
		}
	}
}

func TestAddStoragePrefixRequest(t *testing.T) {
	sa := `{"type":"service_account","client_email":"a@p.iam.gserviceaccount.com","private_key":"-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n","token_uri":"https://oauth2.googleapis.com/token"}`
	for _, c := range []struct {
		name string
		req  AddStoragePrefixRequest
		err  string
	}{
		{"worker identity", AddStoragePrefixRequest{Prefix: "gs://b/p"}, ""},
		{"gcs key", AddStoragePrefixRequest{Prefix: "gs://b/p", Credentials: &StorageCredentials{GCSServiceAccountKey: sa}}, ""},
		{"s3 keys", AddStoragePrefixRequest{Prefix: "s3://b/p", Credentials: &StorageCredentials{S3AccessKeyID: "AKID", S3SecretAccessKey: "s3cr3t"},
			S3: &S3Settings{Endpoint: "http://127.0.0.1:9000", Region: "us-east-1", PathStyle: true}}, ""},
		{"gcs key on s3", AddStoragePrefixRequest{Prefix: "s3://b/p", Credentials: &StorageCredentials{GCSServiceAccountKey: sa}}, "for gs:// prefixes"},
		{"s3 keys on gs", AddStoragePrefixRequest{Prefix: "gs://b/p", Credentials: &StorageCredentials{S3AccessKeyID: "a", S3SecretAccessKey: "b"}}, "for s3:// prefixes"},
		{"both", AddStoragePrefixRequest{Prefix: "gs://b/p", Credentials: &StorageCredentials{GCSServiceAccountKey: sa, S3AccessKeyID: "a"}}, "not both"},
		{"empty", AddStoragePrefixRequest{Prefix: "gs://b/p", Credentials: &StorageCredentials{}}, "credentials are empty"},
		{"no secret", AddStoragePrefixRequest{Prefix: "s3://b/p", Credentials: &StorageCredentials{S3AccessKeyID: "a"}}, "need s3_secret_access_key"},
		{"long secret", AddStoragePrefixRequest{Prefix: "s3://b/p", Credentials: &StorageCredentials{S3AccessKeyID: "a", S3SecretAccessKey: strings.Repeat("x", MaxS3KeyBytes+1)}}, "the limit is 256"},
		{"external account", AddStoragePrefixRequest{Prefix: "gs://b/p", Credentials: &StorageCredentials{GCSServiceAccountKey: `{"type":"external_account","credential_source":{"file":"/etc/shadow"}}`}}, `type "external_account"`},
		{"huge key", AddStoragePrefixRequest{Prefix: "gs://b/p", Credentials: &StorageCredentials{GCSServiceAccountKey: strings.Repeat(" ", MaxCredentialBytes+1)}}, "the limit is 16384"},
		{"s3 settings on gs", AddStoragePrefixRequest{Prefix: "gs://b/p", S3: &S3Settings{Region: "x"}}, "for s3:// prefixes"},
		{"bad endpoint", AddStoragePrefixRequest{Prefix: "s3://b/p", S3: &S3Settings{Endpoint: "http://u:p@host"}}, "not an http:// or https:// URL"},
		{"bad region", AddStoragePrefixRequest{Prefix: "s3://b/p", S3: &S3Settings{Region: "US EAST"}}, "not a region name"},
		{"bad prefix", AddStoragePrefixRequest{Prefix: "gs://b/p?x=1"}, "query parameters"},
	} {
		err := c.req.Validate()
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.err)
		}
	}
}

// TestJobEnvExpansion: the server and the worker expand a file's URL from
// the same environment, the job's own variables winning.
func TestJobEnvExpansion(t *testing.T) {
	a := &Assignment{AttemptRef: AttemptRef{BatchID: 4, JobID: 7, Attempt: 2}, Name: "align[3]", ArrayIndex: 3,
		Env: map[string]string{"SAMPLE": "na12878", "DROVER_ATTEMPT": "9"}}
	env := a.JobEnv()
	if got := ExpandJobVars("gs://b/p/$SAMPLE/${DROVER_INDEX}-$DROVER_ATTEMPT-$NOPE.txt", env); got != "gs://b/p/na12878/3-9-.txt" {
		t.Fatalf("expanded to %q", got)
	}
}
