package blobs

import (
	"context"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, c := range []struct{ in, bucket, key, err string }{
		{"gs://bkt/ref/hg38.fa", "gs://bkt", "ref/hg38.fa", ""},
		{"s3://bkt/a.txt?region=eu-west-1", "s3://bkt?region=eu-west-1", "a.txt", ""},
		{"file:///data/in/a.txt", "file:///data/in", "a.txt", ""},
		{"mem://b/k", "mem://b", "k", ""},
		{"gs://bkt", "", "", "names no object"},
		{"ftp://x/y", "", "", "unknown scheme"},
	} {
		b, k, err := Split(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || b != c.bucket || k != c.key {
			t.Errorf("%s: %q %q %v", c.in, b, k, err)
		}
	}
}

// TestDriversAreLinked: gs:// and s3:// open with their drivers (an s3
// bucket needs no call to open; a gs bucket without credentials fails for
// want of them, not for want of a driver).
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
