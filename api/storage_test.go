package api

import (
	"strings"
	"testing"
)

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
