package api

import (
	"strings"
	"testing"
)

// TestValidateImage: registry references pass; paths, URLs, other
// transports, names that climb out of the registry's API path, uppercase
// and over-long ones are refused with the reason.
func TestValidateImage(t *testing.T) {
	digest := "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, c := range []struct{ name, ref, err string }{
		{"docker hub short name", "busybox", ""},
		{"docker hub with tag", "busybox:1.36", ""},
		{"docker hub user repository", "biocontainers/bwa:v0.7.17", ""},
		{"registry with port", "localhost:5999/tool:1", ""},
		{"one-letter repository", "localhost:5999/x:1", "puller cannot read it"},
		{"registry host", "registry.example.com/tools/bwa:0.7.17", ""},
		{"ip and port", "127.0.0.1:5000/a/b/c:latest", ""},
		{"digest", "registry.example.com/tools/bwa@" + digest, ""},
		{"tag and digest", "registry.example.com/tools/bwa:1@" + digest, ""},
		{"separators", "r.example.com/a__b/c-d/e.f_g:v1.2-rc_3", ""},

		{"empty", "", "image is empty"},
		{"absolute path", "/etc/passwd", "file path"},
		{"relative path", "./x.tar", "file path"},
		{"file url", "file:///etc/shadow", "it is a URL"},
		{"docker url", "docker://x", "it is a URL"},
		{"https url", "https://registry.example.com/x:1", "it is a URL"},
		{"oci archive", "oci-archive:/tmp/x.tar", `"oci-archive:" is a transport`},
		{"docker archive", "docker-archive:/tmp/x.tar", `"docker-archive:" is a transport`},
		{"climbs out of the api path", "localhost:5999/../../x:1", `path component ".."`},
		{"dot dot in the middle", "registry.example.com/a/../b", `path component ".."`},
		{"dot component", "registry.example.com/./b", `path component "."`},
		{"empty component", "registry.example.com//b", `path component ""`},
		{"trailing slash", "registry.example.com/b/", `path component ""`},
		{"uppercase repository", "registry.example.com/Tools/bwa:1", "must be lowercase"},
		{"uppercase short name", "Busybox", "must be lowercase"},
		{"space", "busybox 1", "without spaces"},
		{"newline", "busybox\n:1", "without spaces"},
		{"nul", "busybox\x00", "without spaces"},
		{"non ascii", "bus\u00fdbox", "without spaces"},
		{"bad tag", "busybox:-1", "not an image reference"},
		{"bad digest", "busybox@sha256:123", "not an image reference"},
		{"digest of another algorithm", "busybox@sha512:" + strings.Repeat("ab", 64), "puller cannot read it"},
		{"hex id", strings.Repeat("ab", 32), "not an image reference"},
		{"long repository", "r.example.com/" + strings.Repeat("a", 300), "not an image reference"},
		{"over the limit", "r/" + strings.Repeat("a", MaxImageRef), "the limit is 512"},
	} {
		err := ValidateImage(c.ref)
		if c.err == "" {
			if err != nil {
				t.Errorf("%s: %q refused: %v", c.name, c.ref, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %q: %v, want an error with %q", c.name, c.ref, err, c.err)
		}
	}
}
