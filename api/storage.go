package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sched/drover/storageurl"
)

// Storage prefixes: a billing project's jobs read and write only objects
// under its prefixes, and the worker reaches them with the prefix's
// credentials (the project's own) or, for a prefix without any, its own
// identity. The rules live here once: the server checks jobs with them at
// submit, and the worker again before it touches a URL.

// Limits of storage prefixes and their credentials.
const (
	// MaxStoragePrefixes bounds one billing project's storage prefixes
	// (storageurl's, which apply re-checks).
	MaxStoragePrefixes = storageurl.MaxStoragePrefixes
	// MaxCredentialBytes bounds a prefix's credentials as sent: a
	// service-account key is about 2.4 KB.
	MaxCredentialBytes = storageurl.MaxCredentialBytes
	// MaxS3KeyBytes bounds an S3 access key ID and a secret access key;
	// MaxS3SessionTokenBytes a session token.
	MaxS3KeyBytes          = 256
	MaxS3SessionTokenBytes = 8 << 10
	// MaxEndpointBytes bounds an S3-compatible store's endpoint URL.
	MaxEndpointBytes = storageurl.MaxEndpointBytes
)

// Credential kinds of a storage prefix, as listings show them.
const (
	// CredentialsWorker: the worker's own identity (application default
	// credentials for gs://, the AWS default chain for s3://, the
	// worker's -file-url-roots for file://).
	CredentialsWorker = storageurl.CredentialsWorker
	// CredentialsGCSServiceAccount: a service-account key of the project.
	CredentialsGCSServiceAccount = storageurl.CredentialsGCSServiceAccount
	// CredentialsS3Keys: S3 access keys of the project.
	CredentialsS3Keys = storageurl.CredentialsS3Keys
)

// StorageCredentials are a storage prefix's own credentials: a GCS
// service-account key or S3 keys, never both. An admin sends them once;
// servers keep them sealed and hand them only to the workers running the
// project's attempts, which act with them instead of their own identity.
type StorageCredentials struct {
	// GCSServiceAccountKey is a service-account key file's JSON (type
	// "service_account").
	GCSServiceAccountKey string `json:"gcs_service_account_key,omitempty"`
	// S3AccessKeyID, S3SecretAccessKey and, for temporary keys,
	// S3SessionToken.
	S3AccessKeyID     string `json:"s3_access_key_id,omitempty"`
	S3SecretAccessKey string `json:"s3_secret_access_key,omitempty"`
	S3SessionToken    string `json:"s3_session_token,omitempty"`
}

// Kind names the credentials for listings.
func (c *StorageCredentials) Kind() string {
	switch {
	case c == nil:
		return CredentialsWorker
	case c.GCSServiceAccountKey != "":
		return CredentialsGCSServiceAccount
	case c.S3AccessKeyID != "":
		return CredentialsS3Keys
	}
	return CredentialsWorker
}

// S3Settings say where an s3:// prefix's store is: an admin sets them with
// the prefix (a job's URL never can), for S3-compatible stores and for
// regions the worker's environment does not name.
type S3Settings struct {
	// Endpoint is the store's URL (https://..., empty: AWS).
	Endpoint string `json:"endpoint,omitempty"`
	// Region is the bucket's region (empty: the worker's AWS_REGION).
	Region string `json:"region,omitempty"`
	// PathStyle addresses buckets as ENDPOINT/BUCKET/KEY, as most
	// S3-compatible stores want.
	PathStyle bool `json:"path_style,omitempty"`
}

// AddStoragePrefixRequest gives a billing project a storage prefix, or
// replaces the prefix's credentials and settings.
type AddStoragePrefixRequest struct {
	// Prefix is gs://BUCKET[/PATH], s3://BUCKET[/PATH] or file:///DIR.
	Prefix string `json:"prefix"`
	// Credentials: nil, the worker's own identity.
	Credentials *StorageCredentials `json:"credentials,omitempty"`
	// S3: for s3:// prefixes only.
	S3 *S3Settings `json:"s3,omitempty"`
}

// StoragePrefix is a billing project's storage prefix as listings show it:
// never its credentials, only their kind.
type StoragePrefix struct {
	Prefix      string      `json:"prefix"`
	Credentials string      `json:"credentials"` // CredentialsWorker, CredentialsGCSServiceAccount or CredentialsS3Keys
	S3          *S3Settings `json:"s3,omitempty"`
	AddedBy     string      `json:"added_by,omitempty"`
	TimeAdded   time.Time   `json:"time_added"`
}

// StorageGrant is a storage prefix as a worker gets it with an attempt:
// the attempt may read and write the objects under Prefix that its files
// name, with Credentials (nil: the worker's own identity).
type StorageGrant struct {
	Prefix      string              `json:"prefix"`
	Credentials *StorageCredentials `json:"credentials,omitempty"`
	S3          *S3Settings         `json:"s3,omitempty"`
	// Error, when set, says why the server could not hand over the
	// prefix's credentials: the files under it end the attempt in error
	// with it, rather than being reached as the worker.
	Error string `json:"error,omitempty"`
}

// ObjectURL is a checked object or prefix URL: its scheme, its bucket
// (empty for file://) and its path without the leading slash
// (storageurl.ObjectURL).
type ObjectURL = storageurl.ObjectURL

// ParseObjectURL checks a storage URL, an object's or a prefix's, and
// splits it: storageurl.ParseObjectURL, the one rule.
func ParseObjectURL(raw string) (ObjectURL, error) { return storageurl.ParseObjectURL(raw) }

// ValidateFileURL checks an input's source or an output's destination:
// storageurl.ValidateFileURL, the one rule.
func ValidateFileURL(raw string) error { return storageurl.ValidateFileURL(raw) }

// CleanStoragePrefix checks a storage prefix and returns its canonical
// form: storageurl.CleanStoragePrefix, the one rule.
func CleanStoragePrefix(raw string) (string, error) { return storageurl.CleanStoragePrefix(raw) }

// PrefixSet is a list of canonical storage prefixes parsed once to be
// matched against many URLs (storageurl.PrefixSet: its Match is the one
// rule of which prefix covers a URL).
type PrefixSet = storageurl.PrefixSet

// NewPrefixSet parses canonical prefixes (storageurl.NewPrefixSet).
func NewPrefixSet(prefixes []string) PrefixSet { return storageurl.NewPrefixSet(prefixes) }

// MatchStoragePrefix matches one URL against canonical prefixes: see
// PrefixSet.Match.
func MatchStoragePrefix(prefixes []string, rawURL string) (int, error) {
	return storageurl.MatchStoragePrefix(prefixes, rawURL)
}

// NotUnderPrefixError says that a file's URL is under none of a billing
// project's storage prefixes (storageurl.NotUnderPrefixError).
type NotUnderPrefixError = storageurl.NotUnderPrefixError

// Validate checks a request to add a storage prefix: the prefix, and
// credentials and settings that fit its scheme, within their limits.
func (r *AddStoragePrefixRequest) Validate() error {
	prefix, err := CleanStoragePrefix(r.Prefix)
	if err != nil {
		return err
	}
	scheme, _, _ := strings.Cut(prefix, "://")
	if c := r.Credentials; c != nil {
		if err := c.validate(scheme); err != nil {
			return err
		}
	}
	if r.S3 != nil {
		if err := storageurl.CheckS3Settings(prefix, r.S3.Endpoint, r.S3.Region); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks S3 settings: an http(s) endpoint with nothing but a host,
// port and path, a region name (storageurl.ValidateS3).
func (s *S3Settings) Validate() error { return storageurl.ValidateS3(s.Endpoint, s.Region) }

func (c *StorageCredentials) validate(scheme string) error {
	gcs := c.GCSServiceAccountKey != ""
	s3 := c.S3AccessKeyID != "" || c.S3SecretAccessKey != "" || c.S3SessionToken != ""
	switch {
	case gcs && s3:
		return errors.New("credentials are a GCS service-account key or S3 keys, not both")
	case !gcs && !s3:
		return errors.New("credentials are empty: give a GCS service-account key or S3 keys, or none to use the workers' own identity")
	case gcs && scheme != "gs":
		return fmt.Errorf("a GCS service-account key is for gs:// prefixes, not %s://", scheme)
	case s3 && scheme != "s3":
		return fmt.Errorf("S3 keys are for s3:// prefixes, not %s://", scheme)
	case gcs:
		return validateServiceAccountKey(c.GCSServiceAccountKey)
	}
	for _, f := range []struct {
		name, v string
		limit   int
	}{{"s3_access_key_id", c.S3AccessKeyID, MaxS3KeyBytes}, {"s3_secret_access_key", c.S3SecretAccessKey, MaxS3KeyBytes}, {"s3_session_token", c.S3SessionToken, MaxS3SessionTokenBytes}} {
		if f.v == "" && f.name != "s3_session_token" {
			return fmt.Errorf("S3 keys need %s", f.name)
		}
		if len(f.v) > f.limit {
			return fmt.Errorf("%s is %d bytes; the limit is %d", f.name, len(f.v), f.limit)
		}
		for _, r := range f.v {
			if r <= ' ' || r > '~' {
				return fmt.Errorf("%s holds a character that is not printable ASCII", f.name)
			}
		}
	}
	return nil
}

// validateServiceAccountKey checks that a GCS key is a service account's
// (type "service_account" with an email and a private key): other kinds of
// Google credentials (external accounts) make their holder read files or
// run programs to get a token.
func validateServiceAccountKey(key string) error {
	if len(key) > MaxCredentialBytes {
		return fmt.Errorf("gcs_service_account_key is %d bytes; the limit is %d", len(key), MaxCredentialBytes)
	}
	var k struct {
		Type        string `json:"type"`
		ClientEmail string `json:"client_email"`
		PrivateKey  string `json:"private_key"`
		TokenURI    string `json:"token_uri"`
	}
	if err := json.Unmarshal([]byte(key), &k); err != nil {
		return fmt.Errorf("gcs_service_account_key is not a service-account key file (JSON): %v", err)
	}
	if k.Type != "service_account" || k.ClientEmail == "" || k.PrivateKey == "" {
		return fmt.Errorf("gcs_service_account_key is of type %.40q; it is a service account's key file (type \"service_account\" with client_email and private_key)", k.Type)
	}
	if k.TokenURI != "" {
		if u, err := url.Parse(k.TokenURI); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("gcs_service_account_key's token_uri %.200q is not an http(s) URL", k.TokenURI)
		}
	}
	return nil
}

// ExpandJobVars expands $NAME and ${NAME} in s from env (KEY=value pairs,
// the last of a key winning; a name not there expands to nothing), as the
// worker does in files' URLs and paths.
func ExpandJobVars(s string, env []string) string {
	return os.Expand(s, func(k string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], k+"="); ok {
				return v
			}
		}
		return ""
	})
}

// JobEnv is the environment an attempt's command gets, as KEY=value
// pairs: DROVER_* first, then the job's own variables (which win, being
// later). The worker expands it in the files' URLs and paths, and the
// server, to know which storage prefixes the attempt needs.
func (a *Assignment) JobEnv() []string {
	env := a.droverEnv(len(a.Env))
	for k, v := range a.Env {
		env = append(env, k+"="+v)
	}
	return env
}

// droverEnv is drover's variables of an attempt, with room for more.
func (a *Assignment) droverEnv(more int) []string {
	env := make([]string, 0, 7+more)
	return append(env,
		"DROVER_BATCH_ID="+strconv.FormatInt(a.BatchID, 10),
		"DROVER_JOB_ID="+strconv.FormatInt(a.JobID, 10),
		"DROVER_ATTEMPT="+strconv.Itoa(a.Attempt),
		"DROVER_INDEX="+strconv.FormatInt(a.ArrayIndex, 10),
		"DROVER_JOB_NAME="+a.Name,
		"DROVER_CPU="+strconv.FormatFloat(a.CPU, 'f', -1, 64),
		"DROVER_MEMORY="+strconv.FormatInt(a.Memory, 10),
	)
}
