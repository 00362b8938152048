package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Storage prefixes: a billing project's jobs read and write only objects
// under its prefixes, and the worker reaches them with the prefix's
// credentials (the project's own) or, for a prefix without any, its own
// identity. The rules live here once: the server checks jobs with them at
// submit, and the worker again before it touches a URL.

// Limits of storage prefixes and their credentials.
const (
	// MaxStoragePrefixes bounds one billing project's storage prefixes.
	MaxStoragePrefixes = 32
	// MaxCredentialBytes bounds a prefix's credentials as sent: a
	// service-account key is about 2.4 KB.
	MaxCredentialBytes = 16 << 10
	// MaxS3KeyBytes bounds an S3 access key ID and a secret access key;
	// MaxS3SessionTokenBytes a session token.
	MaxS3KeyBytes          = 256
	MaxS3SessionTokenBytes = 8 << 10
	// MaxEndpointBytes bounds an S3-compatible store's endpoint URL.
	MaxEndpointBytes = 512
)

// Credential kinds of a storage prefix, as listings show them.
const (
	// CredentialsWorker: the worker's own identity (application default
	// credentials for gs://, the AWS default chain for s3://, the
	// worker's -file-url-roots for file://).
	CredentialsWorker = "worker"
	// CredentialsGCSServiceAccount: a service-account key of the project.
	CredentialsGCSServiceAccount = "gcs-service-account"
	// CredentialsS3Keys: S3 access keys of the project.
	CredentialsS3Keys = "s3-keys"
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
// (empty for file://) and its path without the leading slash.
type ObjectURL struct {
	Scheme string
	Bucket string
	Path   string
}

// String writes the URL back in its canonical form.
func (o ObjectURL) String() string {
	if o.Path == "" {
		return o.Scheme + "://" + o.Bucket
	}
	return o.Scheme + "://" + o.Bucket + "/" + o.Path
}

// bucketRE: the bucket names of GCS and S3 (lower-case letters, digits,
// '.', '-' and '_', starting and ending with a letter or digit). It
// leaves no room for a port, user information or a variable.
var bucketRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,220}[a-z0-9])?$`)

// ParseObjectURL checks a storage URL, an object's or a prefix's, and
// splits it. Nothing in it may steer the storage driver: a query
// (gocloud.dev reads endpoint=, region=, profile=, anonymous= and more
// from it), a fragment, user information or a port are refused, as are
// empty, "." and ".." path segments (no URL reaches outside a prefix by
// its spelling). A trailing slash is kept out of Path; ValidateFileURL
// refuses it for objects.
func ParseObjectURL(raw string) (ObjectURL, error) {
	if raw == "" {
		return ObjectURL{}, errors.New("no URL: give gs://bucket/key, s3://bucket/key or file:///dir/name")
	}
	if len(raw) > MaxURLBytes {
		return ObjectURL{}, fmt.Errorf("URL is %d bytes; the limit is %d", len(raw), MaxURLBytes)
	}
	if strings.ContainsRune(raw, 0) {
		return ObjectURL{}, errors.New("URL holds a NUL byte")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ObjectURL{}, fmt.Errorf("%.200q is not a URL: %v", raw, err)
	}
	switch u.Scheme {
	case "gs", "s3", "file":
	default:
		return ObjectURL{}, fmt.Errorf("%.200q: scheme %q is not one of gs, s3 or file", raw, u.Scheme)
	}
	if u.Opaque != "" {
		return ObjectURL{}, fmt.Errorf("%.200q: write %s://BUCKET/KEY", raw, u.Scheme)
	}
	if u.RawQuery != "" || u.ForceQuery {
		return ObjectURL{}, fmt.Errorf("%.200q has query parameters (%s): a job's URL may not steer the storage driver (its endpoint, region or credentials come from the billing project's storage prefix, which an admin sets); drop the query",
			raw, queryNames(u.RawQuery))
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return ObjectURL{}, fmt.Errorf("%.200q has a fragment (#...): drop it; object names cannot hold '#' in a URL", raw)
	}
	if u.User != nil {
		return ObjectURL{}, fmt.Errorf("%.200q carries user information (...@): credentials come from the billing project's storage prefix, never from a URL", u.Redacted())
	}
	o := ObjectURL{Scheme: u.Scheme}
	p := u.Path
	switch u.Scheme {
	case "gs", "s3":
		if !bucketRE.MatchString(u.Host) {
			return ObjectURL{}, fmt.Errorf("%.200q: %.70q is not a bucket name (lower-case letters, digits, '.', '-' and '_'; no port, no variable)", raw, u.Host)
		}
		o.Bucket = u.Host
	case "file":
		if u.Host != "" || !strings.HasPrefix(p, "/") {
			return ObjectURL{}, fmt.Errorf("%.200q names no file: write file:///DIR/NAME", raw)
		}
	}
	p = strings.TrimPrefix(p, "/")
	p = strings.TrimSuffix(p, "/")
	if p != "" {
		for _, seg := range strings.Split(p, "/") {
			switch seg {
			case "":
				return ObjectURL{}, fmt.Errorf("%.200q has an empty path segment (//): write each name once", raw)
			case ".", "..":
				return ObjectURL{}, fmt.Errorf("%.200q has a %q path segment: a URL names its object without \".\" or \"..\" segments", raw, seg)
			}
		}
	}
	o.Path = p
	return o, nil
}

// queryNames lists a query's parameter names, sorted, for an error.
func queryNames(raw string) string {
	q, _ := url.ParseQuery(raw)
	names := make([]string, 0, len(q))
	for k := range q {
		names = append(names, fmt.Sprintf("%.40q", k))
	}
	if len(names) == 0 {
		return "an empty query"
	}
	slices.Sort(names)
	word := "parameter "
	if len(names) > 1 {
		word = "parameters "
	}
	if len(names) > 5 {
		names = append(names[:5], fmt.Sprintf("and %d more", len(names)-5))
	}
	return word + strings.Join(names, ", ")
}

// ValidateFileURL checks an input's source or an output's destination:
// gs://bucket/key, s3://bucket/key or file:///dir/name, with nothing that
// steers the driver (ParseObjectURL). Job variables ($DROVER_INDEX) may
// appear in the key; the worker expands them and checks the result again.
func ValidateFileURL(raw string) error {
	o, err := ParseObjectURL(raw)
	if err != nil {
		return err
	}
	if o.Path == "" || strings.HasSuffix(raw, "/") {
		if o.Scheme == "file" {
			return fmt.Errorf("%.200q names no file: write file:///DIR/NAME", raw)
		}
		return fmt.Errorf("%.200q names no object: write %s://BUCKET/KEY", raw, o.Scheme)
	}
	if o.Scheme == "file" && !strings.Contains(o.Path, "/") {
		return fmt.Errorf("%.200q names no file in a directory: write file:///DIR/NAME", raw)
	}
	return nil
}

// CleanStoragePrefix checks a storage prefix and returns its canonical
// form: gs://BUCKET or gs://BUCKET/PATH (likewise s3://), or
// file:///DIR, without a trailing slash. A prefix covers the objects
// below it by whole path segments (see MatchStoragePrefix).
func CleanStoragePrefix(raw string) (string, error) {
	o, err := ParseObjectURL(raw)
	if err != nil {
		return "", fmt.Errorf("storage prefix: %w", err)
	}
	if strings.Contains(raw, "$") {
		return "", fmt.Errorf("storage prefix %.200q holds '$': jobs' URLs expand variables, a prefix does not; name the directory itself", raw)
	}
	if o.Scheme == "file" && o.Path == "" {
		return "", fmt.Errorf("storage prefix %.200q is the whole file system: name a directory (file:///DIR)", raw)
	}
	return o.String(), nil
}

// under reports whether o lies below prefix p, by whole path segments:
// gs://b/projA covers gs://b/projA/x, not gs://b/projAB/x nor gs://b/projA
// itself.
func (o ObjectURL) under(p ObjectURL) bool {
	if o.Scheme != p.Scheme || o.Bucket != p.Bucket {
		return false
	}
	return p.Path == "" || strings.HasPrefix(o.Path, p.Path+"/")
}

// PrefixSet is a list of canonical storage prefixes (CleanStoragePrefix),
// parsed once to be matched against many URLs.
type PrefixSet struct {
	parsed []ObjectURL // nil where a prefix did not parse
}

// NewPrefixSet parses canonical prefixes; one that does not parse (none
// should: they are checked when added) matches nothing.
func NewPrefixSet(prefixes []string) PrefixSet {
	ps := PrefixSet{parsed: make([]ObjectURL, len(prefixes))}
	for i, raw := range prefixes {
		if p, err := ParseObjectURL(raw); err == nil {
			ps.parsed[i] = p
		}
	}
	return ps
}

// Match is the one rule of which storage prefix covers an object URL: of
// the set's prefixes, the longest the URL lies below by whole path
// segments (gs://b/projA covers gs://b/projA/x but not gs://b/projAB/x,
// nor gs://b/projA itself). It returns the prefix's index, or -1 when
// none covers it, and an error when the URL itself is not acceptable
// (ParseObjectURL). Servers check submitted jobs with it, workers each
// expanded URL against the prefixes an attempt was granted.
func (ps PrefixSet) Match(rawURL string) (int, error) {
	o, err := ParseObjectURL(rawURL)
	if err != nil {
		return -1, err
	}
	best, bestLen := -1, -1
	for i, p := range ps.parsed {
		if p.Scheme != "" && o.under(p) && len(p.Path) > bestLen {
			best, bestLen = i, len(p.Path)
		}
	}
	return best, nil
}

// MatchStoragePrefix matches one URL against canonical prefixes: see
// PrefixSet.Match.
func MatchStoragePrefix(prefixes []string, rawURL string) (int, error) {
	return NewPrefixSet(prefixes).Match(rawURL)
}

// NotUnderPrefixError says that a file's URL is under none of a billing
// project's storage prefixes: the server refuses the job with 403, the
// worker ends an attempt in error with it.
type NotUnderPrefixError struct {
	Kind, Name, URL string // "input" or "output", its name, its URL
	Project         string
	Prefixes        int // how many the project has
}

func (e *NotUnderPrefixError) Error() string {
	return fmt.Sprintf("%s %q: %.200q is under none of billing project %s's %d storage prefixes; a job reads and writes only there (list them with 'drover billing-project storage list %s'; an admin adds one with 'drover billing-project storage add %s PREFIX')",
		e.Kind, e.Name, e.URL, e.Project, e.Prefixes, e.Project, e.Project)
}

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
		if scheme != "s3" {
			return fmt.Errorf("s3 settings (endpoint, region, path style) are for s3:// prefixes, not %s://", scheme)
		}
		if err := r.S3.Validate(); err != nil {
			return err
		}
	}
	return nil
}

var regionRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// Validate checks S3 settings: an http(s) endpoint with nothing but a host,
// port and path, a region name.
func (s *S3Settings) Validate() error {
	if s.Region != "" && !regionRE.MatchString(s.Region) {
		return fmt.Errorf("s3 region %.70q is not a region name (lower-case letters, digits and '-', at most 63)", s.Region)
	}
	if s.Endpoint == "" {
		return nil
	}
	if len(s.Endpoint) > MaxEndpointBytes {
		return fmt.Errorf("s3 endpoint is %d bytes; the limit is %d", len(s.Endpoint), MaxEndpointBytes)
	}
	u, err := url.Parse(s.Endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return fmt.Errorf("s3 endpoint %.200q is not an http:// or https:// URL of a host (no user, query or fragment)", s.Endpoint)
	}
	return nil
}

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
	env := make([]string, 0, 7+len(a.Env))
	env = append(env,
		"DROVER_BATCH_ID="+strconv.FormatInt(a.BatchID, 10),
		"DROVER_JOB_ID="+strconv.FormatInt(a.JobID, 10),
		"DROVER_ATTEMPT="+strconv.Itoa(a.Attempt),
		"DROVER_INDEX="+strconv.FormatInt(a.ArrayIndex, 10),
		"DROVER_JOB_NAME="+a.Name,
		"DROVER_CPU="+strconv.FormatFloat(a.CPU, 'f', -1, 64),
		"DROVER_MEMORY="+strconv.FormatInt(a.Memory, 10),
	)
	for k, v := range a.Env {
		env = append(env, k+"="+v)
	}
	return env
}
