// Package blobs opens object storage with every driver drover links:
// file:// (a directory), mem:// (in memory, for tests), gs:// (Google
// Cloud Storage) and s3:// (Amazon S3 and compatible stores). Job logs go
// through Open, with a URL an operator wrote; jobs' input and output
// files through OpenBucket, with explicit settings and credentials, never
// with anything a job's URL says.
package blobs

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/memblob" // mem://
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcp"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/option"
)

// Schemes are the URL schemes Open accepts.
var Schemes = []string{"file", "mem", "gs", "s3"}

// Split cuts a job's object URL (gs://bucket/path/to/object) into its
// scheme, its bucket (for file://, the directory) and the object's key. A
// URL with anything that could steer a driver (a query, a fragment, user
// information, a port) is refused: nothing of a job's URL but its bucket
// and key reaches a driver.
func Split(object string) (scheme, bucket, key string, err error) {
	u, err := url.Parse(object)
	if err != nil {
		return "", "", "", fmt.Errorf("%q is not a URL: %w", object, err)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(object, "#") || u.User != nil || u.Opaque != "" || u.Port() != "" {
		return "", "", "", fmt.Errorf("%q: a job's object URL is SCHEME://BUCKET/KEY with no query, fragment, user or port", u.Redacted())
	}
	switch u.Scheme {
	case "file":
		// file:///dir/name: the bucket is the directory.
		i := strings.LastIndex(u.Path, "/")
		if u.Host != "" || i <= 0 || i == len(u.Path)-1 {
			return "", "", "", fmt.Errorf("%q names no file in a directory", object)
		}
		return "file", u.Path[:i], u.Path[i+1:], nil
	case "gs", "s3", "mem":
		key = strings.TrimPrefix(u.Path, "/")
		if u.Host == "" || key == "" {
			return "", "", "", fmt.Errorf("%q names no object in a bucket (%s://BUCKET/KEY)", object, u.Scheme)
		}
		return u.Scheme, u.Host, key, nil
	}
	return "", "", "", fmt.Errorf("%q: unknown scheme %q (file, gs, s3 or mem)", object, u.Scheme)
}

// Open opens a bucket by URL: an operator's (a log store), whose query
// may configure the driver. A job's URLs go through OpenBucket instead.
func Open(ctx context.Context, bucketURL string) (*blob.Bucket, error) {
	b, err := blob.OpenBucket(ctx, bucketURL)
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", bucketURL, err)
	}
	return b, nil
}

// Access is how a job's bucket is reached: with a billing project's own
// credentials (a GCS service-account key, S3 keys) or, without any, the
// worker's identity (application default credentials, the AWS default
// chain); for S3, where the store is. All of it comes from the servers
// (an admin's storage prefix), none from the job.
type Access struct {
	// GCSServiceAccountKey is a service account's JSON key.
	GCSServiceAccountKey []byte
	// S3 keys; S3AccessKeyID empty: the AWS default chain.
	S3AccessKeyID     string
	S3SecretAccessKey string
	S3SessionToken    string
	// S3Endpoint (empty: AWS), S3Region (empty: the worker's AWS_REGION,
	// or us-east-1 with keys) and S3PathStyle.
	S3Endpoint  string
	S3Region    string
	S3PathStyle bool
	// CreateDir makes a file:// bucket's directory (for outputs).
	CreateDir bool
}

// Own reports whether the access uses credentials of its own rather than
// the worker's.
func (a *Access) Own() bool { return len(a.GCSServiceAccountKey) > 0 || a.S3AccessKeyID != "" }

// gcsScope is what a project's service account is asked for: objects,
// read and write.
const gcsScope = "https://www.googleapis.com/auth/devstorage.read_write"

// gcsClientOptions are added to every GCS client (tests point them at a
// fake server).
var gcsClientOptions []option.ClientOption

// OpenBucket opens the bucket of a job's file (from Split) with acc.
// file:// buckets are directories, written without metadata sidecars and
// with temporary files beside the data (the last rename stays on one
// disk); gs:// and s3:// buckets use acc's credentials and nothing else
// when it has them.
func OpenBucket(ctx context.Context, scheme, bucket string, acc Access) (*blob.Bucket, error) {
	switch scheme {
	case "file":
		b, err := fileblob.OpenBucket(bucket, &fileblob.Options{Metadata: fileblob.MetadataDontWrite, NoTempDir: true, CreateDir: acc.CreateDir})
		if err != nil {
			return nil, fmt.Errorf("open directory %s: %w", bucket, err)
		}
		return b, nil
	case "gs":
		return openGCS(ctx, bucket, acc)
	case "s3":
		return openS3(ctx, bucket, acc)
	}
	return nil, fmt.Errorf("a job's files are gs://, s3:// or file:// objects, not %s://", scheme)
}

func openGCS(ctx context.Context, bucket string, acc Access) (*blob.Bucket, error) {
	var ts gcp.TokenSource
	if len(acc.GCSServiceAccountKey) > 0 {
		// A service account's key only (JWTConfigFromJSON takes no other
		// kind): other kinds of Google credentials make their holder read
		// files or run programs.
		cfg, err := google.JWTConfigFromJSON(acc.GCSServiceAccountKey, gcsScope)
		if err != nil {
			return nil, fmt.Errorf("the billing project's GCS key: %w", err)
		}
		ts = cfg.TokenSource(context.Background())
	} else {
		creds, err := gcp.DefaultCredentials(ctx)
		if err != nil {
			return nil, fmt.Errorf("the worker's GCS credentials: %w", err)
		}
		ts = gcp.CredentialsTokenSource(creds)
	}
	client, err := gcp.NewHTTPClient(gcp.DefaultTransport(), ts)
	if err != nil {
		return nil, err
	}
	b, err := gcsblob.OpenBucket(ctx, client, bucket, &gcsblob.Options{ClientOptions: gcsClientOptions})
	if err != nil {
		return nil, fmt.Errorf("open bucket gs://%s: %w", bucket, err)
	}
	return b, nil
}

func openS3(ctx context.Context, bucket string, acc Access) (*blob.Bucket, error) {
	set := func(o *s3.Options) {
		if acc.S3Endpoint != "" {
			o.BaseEndpoint = aws.String(acc.S3Endpoint)
		}
		o.UsePathStyle = acc.S3PathStyle
	}
	var client *s3.Client
	if acc.S3AccessKeyID != "" {
		// The project's keys and nothing else: no environment, no shared
		// config, no instance metadata.
		region := acc.S3Region
		if region == "" {
			region = "us-east-1"
		}
		o := s3.Options{
			Region:      region,
			Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(acc.S3AccessKeyID, acc.S3SecretAccessKey, acc.S3SessionToken)),
		}
		set(&o)
		client = s3.New(o)
	} else {
		var opts []func(*awsconfig.LoadOptions) error
		if acc.S3Region != "" {
			opts = append(opts, awsconfig.WithRegion(acc.S3Region))
		}
		cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("the worker's AWS configuration: %w", err)
		}
		if cfg.Region == "" {
			return nil, errors.New("no AWS region for this s3:// prefix: an admin sets one with the prefix (-s3-region), or the worker's environment names one (AWS_REGION)")
		}
		client = s3.NewFromConfig(cfg, set)
	}
	b, err := s3blob.OpenBucket(ctx, client, bucket, nil)
	if err != nil {
		return nil, fmt.Errorf("open bucket s3://%s: %w", bucket, err)
	}
	return b, nil
}
