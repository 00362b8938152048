package api

import (
	"errors"
	"fmt"
	"strings"

	"github.com/distribution/reference"
	"github.com/google/go-containerregistry/pkg/name"
)

// ValidateImage is the one rule of a job's image reference: a name in a
// registry by the OCI distribution grammar (github.com/distribution/
// reference, the grammar registries serve: lowercase path components of
// letters and digits joined by '.', '_', '__' or '-', never "." or "..";
// an optional registry host with its port; a tag or a digest), that the
// workers' puller (go-containerregistry) reads as the same reference.
// Anything else is refused before it reaches a worker: a file path
// ("/etc/passwd"), a URL or another transport ("file:///etc/shadow",
// "docker://x", "oci-archive:/tmp/x.tar"), a name that would climb out of
// the registry's API path ("localhost:5999/../../x:1", which made a
// worker GET /v2/../../x/manifests/1), uppercase, control characters,
// and anything longer than MaxImageRef bytes. The API checks every job's
// image with it (400 naming the reference), the jobspec parser too
// (file:line:col), and the worker again before it pulls.
func ValidateImage(ref string) error {
	if ref == "" {
		return errors.New("image is empty: give a registry reference such as registry.example.com/tools/bwa:0.7.17")
	}
	if len(ref) > MaxImageRef {
		return fmt.Errorf("image is %d bytes; the limit is %d", len(ref), MaxImageRef)
	}
	bad := func(why string) error {
		return fmt.Errorf("image %.100q is not an image reference (registry/name:tag or registry/name@sha256:...): %s", ref, why)
	}
	if strings.Contains(ref, "://") {
		return bad("it is a URL; an image is a name in a registry, with no scheme (not file://, docker:// or https://)")
	}
	if strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, ".") {
		return bad("it is a file path; images are pulled from a registry, never read from a worker's files")
	}
	if c, s := strings.Index(ref, ":"), strings.Index(ref, "/"); c > 0 && c+1 < len(ref) && ref[c+1] == '/' && (s < 0 || c < s) {
		return bad(fmt.Sprintf("%q is a transport of its own (as oci-archive: or docker-archive:); images are pulled from a registry", ref[:c+1]))
	}
	for _, part := range strings.Split(strings.SplitN(ref, "@", 2)[0], "/") {
		if part == "" || part == "." || part == ".." {
			return bad(fmt.Sprintf("path component %q: a repository name is lowercase letters and digits joined by '.', '_' or '-', with no empty, \".\" or \"..\" component", part))
		}
	}
	for _, r := range ref {
		if r < 0x21 || r == 0x7f || r > 0x7e {
			return bad(fmt.Sprintf("it holds the character %q; a reference is printable ASCII without spaces", r))
		}
	}
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		return bad(strings.TrimPrefix(err.Error(), "invalid reference format: "))
	}
	if _, err := name.ParseReference(ref); err != nil {
		return bad(fmt.Sprintf("the workers' puller cannot read it: %v", err))
	}
	return nil
}
