// Package blobs opens object storage by URL with every driver drover
// links: file:// (a directory), mem:// (in memory, for tests), gs://
// (Google Cloud Storage, application default credentials) and s3://
// (Amazon S3 and compatible stores, the AWS default credential chain).
// Job logs and jobs' input and output files go through it.
package blobs

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file://
	_ "gocloud.dev/blob/gcsblob"  // gs://
	_ "gocloud.dev/blob/memblob"  // mem://
	_ "gocloud.dev/blob/s3blob"   // s3://
)

// Schemes are the URL schemes Open accepts.
var Schemes = []string{"file", "mem", "gs", "s3"}

// Split cuts an object URL (gs://bucket/path/to/object) into the bucket's
// URL and the object's key.
func Split(object string) (bucketURL, key string, err error) {
	u, err := url.Parse(object)
	if err != nil {
		return "", "", fmt.Errorf("%q is not a URL: %w", object, err)
	}
	switch u.Scheme {
	case "file":
		// file:///dir/name: the bucket is the directory.
		i := strings.LastIndex(u.Path, "/")
		if i <= 0 || i == len(u.Path)-1 {
			return "", "", fmt.Errorf("%q names no file in a directory", object)
		}
		return "file://" + u.Path[:i], u.Path[i+1:], nil
	case "gs", "s3", "mem":
		key = strings.TrimPrefix(u.Path, "/")
		if u.Host == "" || key == "" {
			return "", "", fmt.Errorf("%q names no object in a bucket (%s://BUCKET/KEY)", object, u.Scheme)
		}
		b := u.Scheme + "://" + u.Host
		if u.RawQuery != "" {
			b += "?" + u.RawQuery
		}
		return b, key, nil
	}
	return "", "", fmt.Errorf("%q: unknown scheme %q (file, gs, s3 or mem)", object, u.Scheme)
}

// Open opens a bucket by URL.
func Open(ctx context.Context, bucketURL string) (*blob.Bucket, error) {
	b, err := blob.OpenBucket(ctx, bucketURL)
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", bucketURL, err)
	}
	return b, nil
}
