// Package images is the worker's image cache: it pulls container images,
// keeps their layers extracted on disk by digest (shared between images,
// evicted least recently used first) and assembles a root filesystem per
// attempt from them, with overlayfs where it can and by copying where it
// cannot.
//
// Layers are extracted in overlayfs form (whiteouts are 0/0 character
// devices, opaque directories carry trusted.overlay.opaque=y), so a layer
// directory can be an overlay lowerdir as it is.
package images

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"golang.org/x/sys/unix"
)

// Config configures a Store. New gives zero fields their DefaultConfig
// values.
type Config struct {
	// Dir holds the extracted layers and the cache's index. One process at
	// a time may use it (New locks it).
	Dir string
	// AuthFile is a Docker config.json with the worker's registry
	// credentials ("auths", "credHelpers", "credsStore"). It is read again
	// at every pull, so credentials can be rotated without a restart.
	// Empty: the Docker default keychain ($DOCKER_CONFIG, ~/.docker).
	AuthFile string
	// Insecure lists registry hosts (host or host:port) spoken to over
	// plain HTTP. Loopback and private addresses need not be listed.
	Insecure []string
	// RefreshTags is how long a tag's digest is trusted before the
	// registry is asked again; until then jobs using the tag start
	// without any registry request. While the registry cannot be reached,
	// a tag keeps its last image.
	RefreshTags time.Duration
	// MaxBytes is the disk space extracted layers may use before the least
	// recently used ones that no job holds are evicted.
	MaxBytes int64
	// CopyRootfs makes Mount copy layers instead of trying overlayfs, for
	// hosts where overlayfs over Dir does not work.
	CopyRootfs bool
	// Egress says where pulls may connect (see Egress); registries in
	// Insecure are allowed by name too. The zero value refuses the
	// host's loopback, link-local, unspecified and multicast addresses.
	Egress Egress
	// PullTimeout bounds one Get's pull: a registry that holds a pull
	// longer fails it (0: DefaultConfig's).
	PullTimeout time.Duration
	// UserAgent is sent to registries (ahead of go-containerregistry's).
	UserAgent string
	// LayerDownloads is how many layers of one image download at once.
	LayerDownloads int
	// Now tells the time (default time.Now); tests set it to move the LRU
	// and tag clocks.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns defaults for a Store; set Dir.
func DefaultConfig() Config {
	return Config{
		RefreshTags:    5 * time.Minute,
		MaxBytes:       20 << 30,
		UserAgent:      "drover-worker",
		LayerDownloads: 3,
		PullTimeout:    10 * time.Minute,
		Now:            time.Now,
		Logger:         slog.Default(),
	}
}

// withDefaults returns c with its zero fields set from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.RefreshTags == 0 {
		c.RefreshTags = d.RefreshTags
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = d.MaxBytes
	}
	if c.UserAgent == "" {
		c.UserAgent = d.UserAgent
	}
	if c.LayerDownloads == 0 {
		c.LayerDownloads = d.LayerDownloads
	}
	if c.PullTimeout == 0 {
		c.PullTimeout = d.PullTimeout
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	return c
}

// Validate checks the configuration and names the bad fields. Zero fields
// are fine: New gives them defaults.
func (c *Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("config field Dir is required"))
	} else if !filepath.IsAbs(c.Dir) {
		errs = append(errs, fmt.Errorf("config field Dir is %q; it must be an absolute path (it ends up in mount options)", c.Dir))
	}
	if c.RefreshTags < 0 {
		errs = append(errs, fmt.Errorf("config field RefreshTags is %v; it must be positive (or 0 for the default)", c.RefreshTags))
	}
	if c.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("config field MaxBytes is %d; it must be positive (or 0 for the default)", c.MaxBytes))
	}
	if c.PullTimeout < 0 {
		errs = append(errs, fmt.Errorf("config field PullTimeout is %v; it must be positive (or 0 for the default)", c.PullTimeout))
	}
	for _, p := range c.Egress.AllowPrefixes {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("config field Egress.AllowPrefixes: %v is not a prefix", p))
		}
	}
	if c.LayerDownloads < 0 {
		errs = append(errs, fmt.Errorf("config field LayerDownloads is %d; it must be positive (or 0 for the default)", c.LayerDownloads))
	}
	for _, h := range c.Insecure {
		if CheckRegistryHost(h) != nil {
			errs = append(errs, fmt.Errorf("config field Insecure: %q is not a registry host", h))
		}
	}
	for _, h := range c.Egress.AllowHosts {
		if CheckRegistryHost(h) != nil {
			errs = append(errs, fmt.Errorf("config field Egress.AllowHosts: %q is not a registry host", h))
		}
	}
	if c.AuthFile != "" {
		if _, err := loadAuthFile(c.AuthFile); err != nil {
			errs = append(errs, fmt.Errorf("config field AuthFile: %w", err))
		}
	}
	return errors.Join(errs...)
}

// CheckRegistryHost checks that h is a registry's host as references name
// it: host or host:port.
func CheckRegistryHost(h string) error {
	if h == "" || strings.ContainsAny(h, "/@") {
		return errors.New("a registry host is HOST or HOST:PORT")
	}
	_, err := name.NewRegistry(h, name.StrictValidation)
	return err
}

// Store is the image cache. Its methods are safe for concurrent use.
type Store struct {
	cfg    *Config
	log    *slog.Logger
	now    func() time.Time
	root   bool     // running as root: ownership, devices and overlay work
	lock   *os.File // flock on Dir, held until Close
	closed sync.Once
	layers string // Dir/layers: one directory per layer, named by digest hex
	tmp    string // Dir/tmp: extractions in progress and evicted layers being removed

	transport http.RoundTripper // every pull's: connections checked by cfg.Egress

	pulls  flights // image pulls, by reference name
	fetchs flights // layer downloads, by diff ID

	mu    sync.Mutex
	idx   *index
	holds map[string]int // layer diff ID -> images and rootfs using it
	total int64          // bytes of all layers in idx
	dirty bool           // idx has changes (last use) not yet saved

	nPulls, nLayerPulls, nEvictions, nHits atomic.Int64
	copyWarned                             atomic.Bool
}

// New opens (creating if needed) the cache in cfg.Dir. It removes what a
// previous process left half done: layers are extracted in Dir/tmp and
// renamed into place only when complete, so anything in Dir/tmp, and any
// layer directory the index does not know, is debris.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("image cache config: %w", err)
	}
	cfg = cfg.withDefaults()
	s := &Store{
		cfg:    &cfg,
		log:    cfg.Logger.With("component", "images"),
		now:    cfg.Now,
		root:   os.Geteuid() == 0,
		layers: filepath.Join(cfg.Dir, "layers"),
		tmp:    filepath.Join(cfg.Dir, "tmp"),
		holds:  map[string]int{},
	}
	egress := cfg.Egress
	egress.AllowHosts = append(slices.Clone(egress.AllowHosts), cfg.Insecure...)
	s.transport = egress.transport()
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("open image cache: %w", err)
	}
	// 0700: layers hold setuid files and device nodes of any image, for
	// overlayfs (which looks at them as root) and no one else.
	for _, d := range []string{s.layers, s.tmp} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("open image cache: %w", err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("open image cache: %w", err)
		}
	}
	lock, err := os.OpenFile(filepath.Join(cfg.Dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open image cache: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("open image cache %s: in use by another process: %w", cfg.Dir, err)
	}
	s.lock = lock
	if err := s.recover(); err != nil {
		lock.Close()
		return nil, fmt.Errorf("open image cache %s: %w", cfg.Dir, err)
	}
	return s, nil
}

// recover loads the index and makes it agree with the disk.
func (s *Store) recover() error {
	if err := emptyDir(s.tmp); err != nil {
		return fmt.Errorf("clean %s: %w", s.tmp, err)
	}
	idx, err := loadIndex(s.indexPath())
	if err != nil {
		// The index is a cache of what is on disk; without it the layers
		// cannot be trusted to be complete, so they go.
		s.log.Warn("image cache index unreadable; starting empty", "err", err)
		idx = newIndex()
	}
	s.idx = idx
	entries, err := os.ReadDir(s.layers)
	if err != nil {
		return err
	}
	onDisk := map[string]bool{}
	for _, e := range entries {
		id := "sha256:" + e.Name()
		if _, ok := idx.Layers[id]; ok && e.IsDir() {
			onDisk[id] = true
			continue
		}
		s.log.Info("removing layer the index does not know", "dir", e.Name())
		if err := os.RemoveAll(filepath.Join(s.layers, e.Name())); err != nil {
			return err
		}
	}
	for id := range idx.Layers {
		if !onDisk[id] {
			delete(idx.Layers, id)
		}
	}
	idx.dropIncomplete()
	for _, l := range idx.Layers {
		s.total += l.Size
	}
	trash := s.evictLocked()
	if err := s.saveLocked(); err != nil {
		return err
	}
	s.removeTrash(trash)
	return nil
}

// Close saves the index and unlocks the cache directory. Images and root
// filesystems still held stay usable on disk, but the Store must not be
// used after Close.
func (s *Store) Close() error {
	var err error
	s.closed.Do(func() {
		s.mu.Lock()
		err = s.saveLocked()
		s.mu.Unlock()
		if cerr := s.lock.Close(); err == nil {
			err = cerr
		}
	})
	return err
}

// Image is a pulled image whose layers stay on disk until Release.
type Image struct {
	// Ref is the reference the image was asked for.
	Ref string
	// Digest is the manifest digest of the linux image that was resolved
	// (for a multi-platform index, the matching child's, not the index's).
	Digest string
	// Env, Entrypoint, Cmd, WorkingDir and User are from the image's
	// config, for building the container's process.
	Env        []string
	Entrypoint []string
	Cmd        []string
	WorkingDir string
	User       string

	layers  []string // layer diff IDs, bottom first
	dirs    []string // their directories, bottom first
	release sync.Once
	store   *Store
}

// LayerDirs returns the image's extracted layer directories, bottom layer
// first. They must not be written to.
func (img *Image) LayerDirs() []string { return slices.Clone(img.dirs) }

// Release lets the image's layers be evicted again (once no other image or
// root filesystem uses them). Calling it more than once is harmless.
func (img *Image) Release() {
	img.release.Do(func() { img.store.unhold(img.layers) })
}

// Get returns the image ref names ("registry/repo:tag", "repo@sha256:..."),
// pulling what the cache lacks; the caller must Release it. A tag resolved
// less than RefreshTags ago, and a digest once cached, need no registry
// request. Concurrent Gets of one image, and of images sharing layers,
// download each layer once.
//
// Errors are *PullError; errors.Is(err, ErrUnavailable) tells the job's
// fault (no such image, access denied, no image for this platform) from
// trouble worth retrying.
func (s *Store) Get(ctx context.Context, ref string) (*Image, error) {
	r, err := s.parse(ref)
	if err != nil {
		return nil, &PullError{Ref: ref, Reason: ReasonBadReference, Err: err}
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, s.cfg.PullTimeout)
	defer cancel()
	img, err := s.get(ctx, ref, r)
	if err != nil && parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, &PullError{Ref: ref, Reason: ReasonTimeout, Err: fmt.Errorf("not done after %s (the worker's -pull-timeout)", s.cfg.PullTimeout)}
	}
	return img, err
}

// get is Get within its timeout.
func (s *Store) get(ctx context.Context, ref string, r name.Reference) (*Image, error) {
	key := r.Name()
	// An image found complete by the pull can lose layers to eviction by
	// another pull before this caller holds it (only when the cache is too
	// small for the images in use at once); then it is pulled again.
	for attempt := 0; ; attempt++ {
		if img := s.lookup(ref, key); img != nil {
			if attempt == 0 {
				s.nHits.Add(1)
			}
			return img, nil
		}
		if attempt == 3 {
			return nil, &PullError{Ref: ref, Reason: ReasonTransient, Err: fmt.Errorf("layers evicted as soon as pulled: MaxBytes (%d) is too small for the images in use", s.cfg.MaxBytes)}
		}
		if err := s.pulls.do(ctx, key, func(ctx context.Context) error { return s.pull(ctx, ref, r) }); err != nil {
			// The run may be another caller's, under another spelling
			// of the reference.
			pe := &PullError{Ref: ref, Reason: ReasonTransient, Err: err}
			if e := (*PullError)(nil); errors.As(err, &e) {
				pe.Reason, pe.Err = e.Reason, e.Err
			}
			return nil, pe
		}
	}
}

// lookup returns the image that key names, held, if the cache has it and
// (for a tag) resolved it recently enough.
func (s *Store) lookup(ref, key string) *Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	rr, rec := s.freshLocked(key)
	if rec == nil {
		return nil
	}
	s.holdLocked(rec.Layers, s.now())
	img := &Image{
		Ref:        ref,
		Digest:     rr.Image,
		Env:        slices.Clone(rec.Config.Env),
		Entrypoint: slices.Clone(rec.Config.Entrypoint),
		Cmd:        slices.Clone(rec.Config.Cmd),
		WorkingDir: rec.Config.WorkingDir,
		User:       rec.Config.User,
		layers:     slices.Clone(rec.Layers),
		store:      s,
	}
	for _, id := range rec.Layers {
		img.dirs = append(img.dirs, s.layerDir(id))
	}
	return img
}

// freshLocked returns what key resolves to, if the cache has all of it
// and (for a tag) resolved it less than RefreshTags ago.
func (s *Store) freshLocked(key string) (*refRecord, *imageRecord) {
	rr, ok := s.idx.Refs[key]
	if !ok || rr.Tag && s.now().Sub(rr.Resolved) >= s.cfg.RefreshTags {
		return nil, nil
	}
	rec, ok := s.idx.Images[rr.Image]
	if !ok || !s.completeLocked(rec) {
		return nil, nil
	}
	return rr, rec
}

// completeLocked reports whether all of rec's layers are on disk.
func (s *Store) completeLocked(rec *imageRecord) bool {
	for _, id := range rec.Layers {
		if _, ok := s.idx.Layers[id]; !ok {
			return false
		}
	}
	return true
}

// holdLocked keeps layers from eviction and marks them used now.
func (s *Store) holdLocked(layers []string, now time.Time) {
	for _, id := range layers {
		s.holds[id]++
		if l, ok := s.idx.Layers[id]; ok {
			l.LastUsed = now
		}
	}
	s.dirty = true
}

// unhold undoes holdLocked; the layers were in use until now.
func (s *Store) unhold(layers []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, id := range layers {
		if s.holds[id]--; s.holds[id] <= 0 {
			delete(s.holds, id)
		}
		if l, ok := s.idx.Layers[id]; ok {
			l.LastUsed = now
		}
	}
	s.dirty = true
}

// Stats counts what the cache holds and has done since New.
type Stats struct {
	// Bytes is the disk space of the extracted layers.
	Bytes int64
	// Layers and Images are how many are cached.
	Layers, Images int
	// Held is how many layers images or root filesystems in use hold.
	Held int
	// Pulls counts Gets that asked a registry about an image (a manifest
	// request); Hits counts Gets served from the cache alone.
	Pulls, Hits int64
	// LayerPulls counts layers downloaded and extracted.
	LayerPulls int64
	// Evictions counts layers removed to stay under MaxBytes.
	Evictions int64
}

// Stats returns the cache's counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	st := Stats{Bytes: s.total, Layers: len(s.idx.Layers), Images: len(s.idx.Images), Held: len(s.holds)}
	s.mu.Unlock()
	st.Pulls = s.nPulls.Load()
	st.Hits = s.nHits.Load()
	st.LayerPulls = s.nLayerPulls.Load()
	st.Evictions = s.nEvictions.Load()
	return st
}

// layerDir is where layer id is extracted. Only the hex part names it: a
// colon would have to be escaped in overlay's lowerdir option.
func (s *Store) layerDir(id string) string {
	return filepath.Join(s.layers, digestHex(id))
}

func (s *Store) indexPath() string { return filepath.Join(s.cfg.Dir, "index.json") }

// emptyDir removes everything in dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// goarch is the architecture images must be built for.
var goarch = runtime.GOARCH
