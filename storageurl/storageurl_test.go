package storageurl

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
