package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/config/configfile"
	"github.com/docker/cli/cli/config/types"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"golang.org/x/sync/errgroup"
)

// ErrUnavailable is matched by errors.Is for pull errors that are the
// job's fault rather than the worker's or the network's: the image does
// not exist, access to it is denied, it has no image for this platform, or
// its content is invalid. Pulling again elsewhere would fail the same way,
// so the job should end in error instead of being retried.
var ErrUnavailable = errors.New("image unavailable")

// Reason says why a pull failed.
type Reason int

const (
	// ReasonTransient is registry, network or local trouble: worth retrying.
	ReasonTransient Reason = iota
	// ReasonBadReference is a reference that does not parse.
	ReasonBadReference
	// ReasonNotFound is a repository, tag or digest the registry does not have.
	ReasonNotFound
	// ReasonDenied is a registry refusing the worker's credentials (or
	// their absence); registries also say this for images that do not exist.
	ReasonDenied
	// ReasonNoPlatform is an image or index without a linux image for the
	// worker's architecture.
	ReasonNoPlatform
	// ReasonInvalid is content the worker refuses: a layer escaping its
	// directory, a digest mismatch, a schema 1 manifest.
	ReasonInvalid
	// ReasonRefused is a registry (or a redirect, or a token service)
	// at an address pulls may not reach (see Egress).
	ReasonRefused
	// ReasonTimeout is a pull that took longer than Config.PullTimeout.
	ReasonTimeout
)

// String returns the reason as a metric label.
func (r Reason) String() string {
	switch r {
	case ReasonTransient:
		return "transient"
	case ReasonBadReference:
		return "bad_reference"
	case ReasonNotFound:
		return "not_found"
	case ReasonDenied:
		return "denied"
	case ReasonNoPlatform:
		return "no_platform"
	case ReasonInvalid:
		return "invalid"
	case ReasonRefused:
		return "refused"
	case ReasonTimeout:
		return "timeout"
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

// PullError is the error of Get.
type PullError struct {
	// Ref is the reference as the job gave it.
	Ref    string
	Reason Reason
	Err    error
}

// Error says "pull image "REF": " and why.
func (e *PullError) Error() string { return fmt.Sprintf("pull image %q: %v", e.Ref, e.Err) }

// Unwrap returns the cause, so errors.Is(err, context.Canceled) works.
func (e *PullError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true for the job's faults.
func (e *PullError) Is(target error) bool {
	return target == ErrUnavailable && e.Reason != ReasonTransient && e.Reason != ReasonTimeout
}

// statusError is a registry's answer as a pull error shows it: its status
// alone. Whatever the body said stays out of the job's message and log
// (the answer may come from a service that is not a registry), and so
// does go-containerregistry's rendering of it, which quotes the body.
type statusError struct{ te *transport.Error }

func (e *statusError) Error() string {
	return fmt.Sprintf("HTTP %d %s", e.te.StatusCode, http.StatusText(e.te.StatusCode))
}

func (e *statusError) Unwrap() error { return e.te }

// contentError is an image's content the worker refuses (ReasonInvalid).
type contentError struct{ err error }

func (e *contentError) Error() string { return e.err.Error() }
func (e *contentError) Unwrap() error { return e.err }

func invalidf(format string, args ...any) error {
	return &contentError{fmt.Errorf(format, args...)}
}

// platformError is an image or index lacking a linux/goarch image.
type platformError struct{ msg string }

func (e *platformError) Error() string { return e.msg }

// parse parses ref, as insecure (plain HTTP) if its registry is listed in
// Config.Insecure.
func (s *Store) parse(ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	if slices.Contains(s.cfg.Insecure, r.Context().RegistryStr()) {
		return name.ParseReference(ref, name.Insecure)
	}
	return r, nil
}

// pull asks the registry what r names and downloads the layers the cache
// lacks; Get then finds the image in the index. It runs once at a time per
// reference name (see Get).
func (s *Store) pull(ctx context.Context, ref string, r name.Reference) error {
	key := r.Name()
	if s.fresh(key) {
		return nil // a run that ended between the caller's lookup and this one
	}
	_, isTag := r.(name.Tag)
	p, err := remote.NewPuller(
		remote.WithTransport(s.transport),
		remote.WithAuthFromKeychain(s.keychain()),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: goarch}),
		remote.WithUserAgent(s.cfg.UserAgent),
	)
	if err != nil {
		return s.pullError(ref, r, err)
	}
	s.nPulls.Add(1)
	start := time.Now()

	s.mu.Lock()
	var prev refRecord
	if rr := s.idx.Refs[key]; rr != nil {
		prev = *rr
	}
	s.mu.Unlock()
	if !isTag || prev.Manifest == "" {
		return s.fetch(ctx, p, ref, r, start)
	}

	// A tag that still names the image we have costs a HEAD, which
	// registries do not count against pull rate limits.
	if d, err := p.Head(ctx, r); err == nil && d.Digest.String() == prev.Manifest && s.recordRef(key, prev.Manifest, prev.Image, true) {
		return nil
	}
	err = s.fetch(ctx, p, ref, r, start)
	// A registry outage must not fail every job whose tag is due for a
	// refresh: the tag keeps its last image for another RefreshTags. A
	// registry that answers "not found" or "denied" is believed.
	var pe *PullError
	if errors.As(err, &pe) && pe.Reason == ReasonTransient && ctx.Err() == nil && s.recordRef(key, prev.Manifest, prev.Image, true) {
		s.log.Warn("cannot refresh tag; using its last known image", "ref", ref, "image", prev.Image, "err", err)
		return nil
	}
	return err
}

// fetch gets the manifest of r, then the image's config and the layers
// the cache lacks, and records the image.
func (s *Store) fetch(ctx context.Context, p *remote.Puller, ref string, r name.Reference, start time.Time) error {
	key := r.Name()
	_, isTag := r.(name.Tag)
	desc, err := p.Get(ctx, r)
	if err != nil {
		return s.pullError(ref, r, err)
	}
	img, err := platformImage(desc)
	if err != nil {
		return s.pullError(ref, r, err)
	}
	h, err := img.Digest()
	if err != nil {
		return s.pullError(ref, r, err)
	}
	imgDigest := h.String()
	// Another name for an image we have, or a tag moved back to one.
	if s.recordRef(key, desc.Digest.String(), imgDigest, isTag) {
		return nil
	}

	cf, err := img.ConfigFile()
	if err != nil {
		return s.pullError(ref, r, err)
	}
	if (cf.OS != "" && cf.OS != "linux") || (cf.Architecture != "" && cf.Architecture != goarch) {
		return s.pullError(ref, r, &platformError{fmt.Sprintf("the image is for %s/%s, not linux/%s", cf.OS, cf.Architecture, goarch)})
	}
	m, err := img.Manifest()
	if err != nil {
		return s.pullError(ref, r, err)
	}
	diffIDs := cf.RootFS.DiffIDs
	if len(diffIDs) != len(m.Layers) {
		return s.pullError(ref, r, invalidf("manifest has %d layers but config has %d diff IDs", len(m.Layers), len(diffIDs)))
	}
	ids := make([]string, len(diffIDs))
	for i, d := range diffIDs {
		if ids[i] = d.String(); !validDigest(ids[i]) {
			return s.pullError(ref, r, invalidf("layer diff ID %q is not a sha256 digest", ids[i]))
		}
	}

	// Hold the layers while pulling, so that another pull's eviction does
	// not take the first layers before the last arrive.
	s.mu.Lock()
	s.holdLocked(ids, s.now())
	s.mu.Unlock()
	defer s.unhold(ids)

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.LayerDownloads)
	for i, id := range ids {
		blob := r.Context().Digest(m.Layers[i].Digest.String())
		g.Go(func() error {
			return s.fetchs.do(gctx, id, func(ctx context.Context) error {
				return s.fetchLayer(ctx, p, blob, id)
			})
		})
	}
	if err := g.Wait(); err != nil {
		return s.pullError(ref, r, err)
	}

	c := cf.Config
	s.mu.Lock()
	s.idx.Images[imgDigest] = &imageRecord{
		Layers: ids,
		Config: imageConfig{Env: c.Env, Entrypoint: c.Entrypoint, Cmd: c.Cmd, WorkingDir: c.WorkingDir, User: c.User},
	}
	s.idx.Refs[key] = &refRecord{Manifest: desc.Digest.String(), Image: imgDigest, Tag: isTag, Resolved: s.now()}
	trash := s.evictLocked()
	err = s.saveLocked()
	s.mu.Unlock()
	s.removeTrash(trash)
	if err != nil {
		return s.pullError(ref, r, err)
	}
	s.log.Info("pulled image", "ref", ref, "digest", imgDigest, "layers", len(ids), "duration", time.Since(start))
	return nil
}

// fresh reports whether lookup would find key.
func (s *Store) fresh(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, rec := s.freshLocked(key)
	return rec != nil
}

// recordRef notes that key resolved to image (through manifest) now, if
// the cache has all of image's layers, and reports whether it does.
func (s *Store) recordRef(key, manifest, image string, tag bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.idx.Images[image]
	if !ok || !s.completeLocked(rec) {
		return false
	}
	s.idx.Refs[key] = &refRecord{Manifest: manifest, Image: image, Tag: tag, Resolved: s.now()}
	if err := s.saveLocked(); err != nil {
		s.log.Error("save image cache index", "err", err)
	}
	return true
}

// fetchLayer downloads layer id (blob, compressed) and extracts it into
// Dir/tmp, then renames it into place: a crash leaves no layer directory
// that looks complete but is not.
func (s *Store) fetchLayer(ctx context.Context, p *remote.Puller, blob name.Digest, id string) (err error) {
	s.mu.Lock()
	_, have := s.idx.Layers[id]
	s.mu.Unlock()
	if have {
		return nil
	}
	start := time.Now()
	l, err := p.Layer(ctx, blob)
	if err != nil {
		return err
	}
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	s.nLayerPulls.Add(1)

	tmp, err := os.MkdirTemp(s.tmp, "layer-")
	if err != nil {
		return fmt.Errorf("extract layer %s: %w", id, err)
	}
	committed := false
	defer func() {
		if !committed {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("extract layer %s: %w", id, err)
	}
	h := sha256.New()
	tr := io.TeeReader(rc, h)
	if err := extract(tr, tmp, s.root, s.log); err != nil {
		return fmt.Errorf("extract layer %s: %w", id, err)
	}
	// The diff ID covers the whole stream, padding after the tar's end too.
	if _, err := io.Copy(io.Discard, tr); err != nil {
		return fmt.Errorf("extract layer %s: %w", id, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != id {
		return invalidf("layer %s: its content has digest %s", id, got)
	}
	size, err := diskUsage(tmp)
	if err != nil {
		return fmt.Errorf("extract layer %s: %w", id, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.idx.Layers[id]; ok {
		return nil // a run abandoned by its callers and a new one both finished
	}
	if err := os.Rename(tmp, s.layerDir(id)); err != nil {
		return fmt.Errorf("extract layer %s: %w", id, err)
	}
	committed = true
	s.idx.Layers[id] = &layerRecord{Size: size, LastUsed: s.now()}
	s.total += size
	s.dirty = true
	s.log.Info("pulled layer", "layer", id, "from", blob.Context().Name(), "bytes", size, "duration", time.Since(start))
	return nil
}

// platformImage returns desc's image, or its index's linux/goarch image.
// ggcr's own resolution would do, but its error for a missing platform is
// a bare string, and the job's author needs to see what the index offers.
func platformImage(desc *remote.Descriptor) (v1.Image, error) {
	switch {
	case desc.MediaType.IsSchema1():
		return nil, invalidf("the image has a schema 1 manifest, which is not supported; push it again with a current tool")
	case desc.MediaType.IsIndex():
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, err
		}
		return imageFromIndex(idx, 0)
	}
	return desc.Image()
}

func imageFromIndex(idx v1.ImageIndex, depth int) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var have []string
	for _, m := range im.Manifests {
		// A child without a platform is linux/amd64, as ggcr and Docker assume.
		p := v1.Platform{OS: "linux", Architecture: "amd64"}
		if m.Platform != nil {
			p = *m.Platform
		}
		if p.OS == "linux" && p.Architecture == goarch {
			switch {
			case m.MediaType.IsImage():
				return idx.Image(m.Digest)
			case m.MediaType.IsIndex() && depth < 2:
				child, err := idx.ImageIndex(m.Digest)
				if err != nil {
					return nil, err
				}
				return imageFromIndex(child, depth+1)
			}
		}
		have = append(have, p.String())
	}
	return nil, &platformError{fmt.Sprintf("the index has no linux/%s image (it has %s)", goarch, strings.Join(have, ", "))}
}

// pullError classifies err, from pulling r, into a *PullError whose
// message says what the job's author (or the worker's operator) can do.
func (s *Store) pullError(ref string, r name.Reference, err error) error {
	var pe *PullError
	if errors.As(err, &pe) {
		return pe
	}
	reg := r.Context().RegistryStr()
	var (
		te *transport.Error
		ce *contentError
		pl *platformError
		ne net.Error
	)
	switch {
	case refused(err) != nil:
		return &PullError{Ref: ref, Reason: ReasonRefused, Err: refused(err)}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &PullError{Ref: ref, Reason: ReasonTransient, Err: err}
	case errors.As(err, &pl):
		return &PullError{Ref: ref, Reason: ReasonNoPlatform, Err: err}
	case errors.As(err, &ce):
		return &PullError{Ref: ref, Reason: ReasonInvalid, Err: err}
	case errors.As(err, &te):
		se := &statusError{te}
		switch {
		case te.StatusCode == 401 || te.StatusCode == 403 ||
			hasCode(te, transport.UnauthorizedErrorCode, transport.DeniedErrorCode):
			return &PullError{Ref: ref, Reason: ReasonDenied, Err: fmt.Errorf(
				"registry %s denied access (or has no such repository); the worker's credentials for it come from %s: %w",
				reg, s.credentialSource(), se)}
		case te.StatusCode == 404 ||
			hasCode(te, transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode):
			return &PullError{Ref: ref, Reason: ReasonNotFound, Err: fmt.Errorf("image not found in registry %s: %w", reg, se)}
		}
		return &PullError{Ref: ref, Reason: ReasonTransient, Err: fmt.Errorf("registry %s answered %w", reg, se)}
	case errors.As(err, &ne):
		return &PullError{Ref: ref, Reason: ReasonTransient, Err: fmt.Errorf("registry %s unreachable: %w", reg, err)}
	}
	return &PullError{Ref: ref, Reason: ReasonTransient, Err: err}
}

func hasCode(te *transport.Error, codes ...transport.ErrorCode) bool {
	for _, d := range te.Errors {
		if slices.Contains(codes, d.Code) {
			return true
		}
	}
	return false
}

// credentialSource says where the worker's registry credentials come from,
// for error messages: the job's author cannot fix them, the operator can.
func (s *Store) credentialSource() string {
	if s.cfg.AuthFile != "" {
		return "the worker's auth file " + s.cfg.AuthFile
	}
	return "the worker's Docker config ($DOCKER_CONFIG or ~/.docker/config.json)"
}

func (s *Store) keychain() authn.Keychain {
	if s.cfg.AuthFile == "" {
		return authn.DefaultKeychain
	}
	return fileKeychain{path: s.cfg.AuthFile}
}

// fileKeychain resolves credentials from one Docker config file, the way
// authn.DefaultKeychain does from $DOCKER_CONFIG (including credHelpers
// and credsStore), but from a file the worker's configuration names rather
// than from the environment.
type fileKeychain struct{ path string }

// Resolve implements authn.Keychain.
func (k fileKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	cf, err := loadAuthFile(k.path)
	if err != nil {
		return nil, err
	}
	var empty types.AuthConfig
	for _, key := range []string{target.String(), target.RegistryStr()} {
		if key == name.DefaultRegistry {
			key = authn.DefaultAuthKey
		}
		cfg, err := cf.GetAuthConfig(key)
		if err != nil {
			return nil, fmt.Errorf("credentials for %s from %s: %w", key, k.path, err)
		}
		cfg.ServerAddress = "" // set by GetAuthConfig; not a credential
		if cfg != empty {
			return authn.FromConfig(authn.AuthConfig{
				Username:      cfg.Username,
				Password:      cfg.Password,
				Auth:          cfg.Auth,
				IdentityToken: cfg.IdentityToken,
				RegistryToken: cfg.RegistryToken,
			}), nil
		}
	}
	return authn.Anonymous, nil
}

func loadAuthFile(path string) (*configfile.ConfigFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read registry auth file: %w", err)
	}
	defer f.Close()
	cf, err := config.LoadFromReader(f)
	if err != nil {
		return nil, fmt.Errorf("read registry auth file %s: %w", path, err)
	}
	return cf, nil
}
