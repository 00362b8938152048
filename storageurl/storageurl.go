// Package storageurl holds the rules of the URLs a job's files name and
// of billing projects' storage prefixes: which URLs are acceptable
// (nothing in them steers a storage driver), a prefix's canonical form,
// which prefix covers a URL (PrefixSet.Match), the kinds of credentials a
// prefix holds, a prefix's S3 settings, and their bounds. It imports
// nothing of drover's, so that the API (which re-exports these names),
// the worker and the replicated state, whose apply re-checks a command
// with them, call one definition.
package storageurl

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Limits of URLs, storage prefixes and their credentials.
const (
	// MaxURLBytes bounds one file's URL.
	MaxURLBytes = 2048
	// MaxStoragePrefixes bounds one billing project's storage prefixes.
	MaxStoragePrefixes = 32
	// MaxCredentialBytes bounds a prefix's credentials as sent: a
	// service-account key is about 2.4 KB.
	MaxCredentialBytes = 16 << 10
	// MaxEndpointBytes bounds an S3-compatible store's endpoint URL.
	MaxEndpointBytes = 512
)

// Credential kinds of a storage prefix: what the replicated state keeps
// with each prefix, and what listings show.
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

var regionRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidateS3 checks S3 settings: an http(s) endpoint with nothing but a
// host, port and path, a region name.
func ValidateS3(endpoint, region string) error {
	if region != "" && !regionRE.MatchString(region) {
		return fmt.Errorf("s3 region %.70q is not a region name (lower-case letters, digits and '-', at most 63)", region)
	}
	if endpoint == "" {
		return nil
	}
	if len(endpoint) > MaxEndpointBytes {
		return fmt.Errorf("s3 endpoint is %d bytes; the limit is %d", len(endpoint), MaxEndpointBytes)
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return fmt.Errorf("s3 endpoint %.200q is not an http:// or https:// URL of a host (no user, query or fragment)", endpoint)
	}
	return nil
}

// CheckS3Settings is the rule of a storage prefix's S3 settings: only an
// s3:// prefix (canonical, CleanStoragePrefix) has them, and they pass
// ValidateS3.
func CheckS3Settings(prefix, endpoint, region string) error {
	if scheme, _, _ := strings.Cut(prefix, "://"); scheme != "s3" {
		return fmt.Errorf("s3 settings (endpoint, region, path style) are for s3:// prefixes, not %s://", scheme)
	}
	return ValidateS3(endpoint, region)
}
