package images

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// indexVersion is the format of index.json; an index of another version
// is discarded with the layers (they are only a cache).
const indexVersion = 1

// index is what the cache holds, saved as index.json so that a restarted
// worker keeps its layers and their LRU order.
type index struct {
	Version int `json:"version"`
	// Layers by diff ID (the digest of the uncompressed tar), so images
	// that compress a layer differently still share it.
	Layers map[string]*layerRecord `json:"layers"`
	// Images by manifest digest.
	Images map[string]*imageRecord `json:"images"`
	// Refs by reference name ("registry/repo:tag", "registry/repo@sha256:...").
	Refs map[string]*refRecord `json:"refs"`
}

type layerRecord struct {
	Size     int64     `json:"size"` // bytes on disk
	LastUsed time.Time `json:"lastUsed"`
}

type imageRecord struct {
	Layers []string    `json:"layers"` // diff IDs, bottom first
	Config imageConfig `json:"config"`
}

// imageConfig is the part of an image's config a container needs.
type imageConfig struct {
	Env        []string `json:"env,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	WorkingDir string   `json:"workingDir,omitempty"`
	User       string   `json:"user,omitempty"`
}

// refRecord is what a reference resolved to.
type refRecord struct {
	Manifest string    `json:"manifest"` // what the registry serves for it (maybe an index)
	Image    string    `json:"image"`    // the linux image's manifest digest
	Tag      bool      `json:"tag,omitempty"`
	Resolved time.Time `json:"resolved"`
}

func newIndex() *index {
	return &index{
		Version: indexVersion,
		Layers:  map[string]*layerRecord{},
		Images:  map[string]*imageRecord{},
		Refs:    map[string]*refRecord{},
	}
}

// loadIndex reads path; a missing file is an empty index.
func loadIndex(path string) (*index, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return newIndex(), nil
	}
	if err != nil {
		return nil, err
	}
	idx := newIndex()
	if err := json.Unmarshal(b, idx); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if idx.Version != indexVersion {
		return nil, fmt.Errorf("%s has version %d, want %d", path, idx.Version, indexVersion)
	}
	for id, l := range idx.Layers {
		if l == nil || !validDigest(id) {
			return nil, fmt.Errorf("%s: bad layer entry %q", path, id)
		}
	}
	for id, img := range idx.Images {
		if img == nil {
			delete(idx.Images, id)
		}
	}
	for k, r := range idx.Refs {
		if r == nil {
			delete(idx.Refs, k)
		}
	}
	return idx, nil
}

// dropIncomplete forgets images that lack a layer and references to
// images it does not have.
func (idx *index) dropIncomplete() {
	for id, img := range idx.Images {
		for _, l := range img.Layers {
			if _, ok := idx.Layers[l]; !ok {
				delete(idx.Images, id)
				break
			}
		}
	}
	for k, r := range idx.Refs {
		if _, ok := idx.Images[r.Image]; !ok {
			delete(idx.Refs, k)
		}
	}
}

// saveLocked writes the index atomically (temporary file, fsync, rename):
// a crash leaves the old index or the new one, never half of one.
func (s *Store) saveLocked() error {
	b, err := json.Marshal(s.idx)
	if err != nil {
		return fmt.Errorf("save image cache index: %w", err)
	}
	path := s.indexPath()
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("save image cache index: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save image cache index: %w", err)
	}
	s.dirty = false
	return nil
}

// evictLocked removes least recently used layers nothing holds until the
// cache fits in MaxBytes, and forgets the images that used them. It only
// renames the directories away (into Dir/tmp, which New empties); the
// caller removes the returned paths once it has released s.mu.
func (s *Store) evictLocked() (trash []string) {
	if s.total <= s.cfg.MaxBytes {
		return nil
	}
	type cand struct {
		id string
		l  *layerRecord
	}
	var cands []cand
	for id, l := range s.idx.Layers {
		if s.holds[id] == 0 {
			cands = append(cands, cand{id, l})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		return cmp.Or(a.l.LastUsed.Compare(b.l.LastUsed), strings.Compare(a.id, b.id))
	})
	for _, c := range cands {
		if s.total <= s.cfg.MaxBytes {
			break
		}
		dst := filepath.Join(s.tmp, "evicted-"+digestHex(c.id))
		if err := os.Rename(s.layerDir(c.id), dst); err != nil {
			s.log.Error("evict layer", "layer", c.id, "err", err)
			continue
		}
		trash = append(trash, dst)
		delete(s.idx.Layers, c.id)
		s.total -= c.l.Size
		s.nEvictions.Add(1)
		s.log.Info("evicted layer", "layer", c.id, "bytes", c.l.Size, "lastUsed", c.l.LastUsed)
	}
	if trash != nil {
		s.idx.dropIncomplete()
		s.dirty = true
	}
	if s.total > s.cfg.MaxBytes {
		s.log.Warn("image cache over MaxBytes: the rest is held by running jobs",
			"bytes", s.total, "maxBytes", s.cfg.MaxBytes, "heldLayers", len(s.holds))
	}
	return trash
}

// removeTrash deletes evicted layer directories.
func (s *Store) removeTrash(trash []string) {
	for _, d := range trash {
		if err := os.RemoveAll(d); err != nil {
			s.log.Error("remove evicted layer", "dir", d, "err", err)
		}
	}
}

// validDigest reports whether id is "sha256:" and 64 lower-case hex
// digits: it becomes a directory name.
func validDigest(id string) bool {
	hex, ok := strings.CutPrefix(id, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for _, c := range hex {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func digestHex(id string) string { return strings.TrimPrefix(id, "sha256:") }
