package state

import (
	"fmt"
	"slices"
	"sort"

	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/storageurl"
)

// MaxSealedBytes bounds a storage prefix's sealed credentials in the log:
// the largest credentials the API takes (storageurl.MaxCredentialBytes), as
// JSON (which may escape a character in six), and the sealing's overhead.
const MaxSealedBytes = 6*storageurl.MaxCredentialBytes + 1024

// Policies of the commands that add jobs: which of the rules the API
// checked before the command reached the log apply checks again. An entry
// written before a rule existed keeps applying as it did then.
const (
	// PolicyNone: entries from before storage prefixes.
	PolicyNone uint8 = iota
	// PolicyStorage: files only under the billing project's storage
	// prefixes; network "host" only where the project allows it or an
	// admin submits (CheckJobs).
	PolicyStorage
	// PolicyPriority: and a new batch's priority within its cap
	// (CheckPriority: its leaf queue's and its billing project's
	// max_priority, for anyone but an admin).
	PolicyPriority
)

// StoragePrefix is one of a billing project's storage prefixes: the
// objects its jobs may read and write, and how a worker reaches them.
type StoragePrefix struct {
	// URL is the prefix in canonical form (storageurl.CleanStoragePrefix).
	URL     string
	Added   int64
	AddedBy string
	// Kind is the kind of credentials (storageurl.CredentialsWorker,
	// storageurl.CredentialsGCSServiceAccount, storageurl.CredentialsS3Keys) and
	// Sealed the credentials as JSON sealed with the servers' secrets
	// key (nil for the worker's identity): the state, its snapshots and
	// the log never hold them in the clear.
	Kind   string
	Sealed []byte
	// S3 settings an admin set (s3:// prefixes only).
	S3Endpoint  string
	S3Region    string
	S3PathStyle bool
}

// SealContext is what a prefix's sealed credentials are bound to: they
// open only for this project's prefix.
func SealContext(project, prefix string) []byte {
	return []byte("drover storage credentials\x00" + project + "\x00" + prefix)
}

// SetStoragePrefix gives a billing project a storage prefix, or replaces
// the credentials and settings of the one with the same URL.
type SetStoragePrefix struct {
	Now     int64
	Project string
	Prefix  StoragePrefix
}

// Type implements Command.
func (*SetStoragePrefix) Type() CommandType { return CmdSetStoragePrefix }

// RemoveStoragePrefix takes a storage prefix from a billing project.
type RemoveStoragePrefix struct {
	Project string
	URL     string
}

// Type implements Command.
func (*RemoveStoragePrefix) Type() CommandType { return CmdRemoveStoragePrefix }

// SetProjectSettings changes settings of a billing project; a nil field
// stays as it is. AllowHostNetwork is an admin's setting, MaxPriority its
// managers' (the API checks who sends it).
type SetProjectSettings struct {
	Project          string
	AllowHostNetwork *bool
	MaxPriority      *int64
}

// Type implements Command.
func (*SetProjectSettings) Type() CommandType { return CmdSetProjectSettings }

// CheckStoragePrefix says what is wrong with a prefix to be added (nil:
// nothing): the API checks it before the log, apply again, so a committed
// entry can hold only a bounded, canonical prefix.
func CheckStoragePrefix(p *StoragePrefix) *ApplyError {
	clean, err := storageurl.CleanStoragePrefix(p.URL)
	if err != nil {
		return errorf(ErrInvalid, "%v", err)
	}
	if clean != p.URL {
		return errorf(ErrInvalid, "storage prefix %q is not in canonical form (%s)", p.URL, clean)
	}
	switch p.Kind {
	case "", storageurl.CredentialsWorker:
		if p.Sealed != nil {
			return errorf(ErrInvalid, "storage prefix %s uses the workers' identity and holds no credentials", p.URL)
		}
	case storageurl.CredentialsGCSServiceAccount, storageurl.CredentialsS3Keys:
		if len(p.Sealed) == 0 || len(p.Sealed) > MaxSealedBytes {
			return errorf(ErrInvalid, "storage prefix %s: sealed credentials of %d bytes; they are 1 to %d", p.URL, len(p.Sealed), MaxSealedBytes)
		}
	default:
		return errorf(ErrInvalid, "storage prefix %s: credentials of kind %.40q; they are %s, %s or %s", p.URL, p.Kind,
			storageurl.CredentialsWorker, storageurl.CredentialsGCSServiceAccount, storageurl.CredentialsS3Keys)
	}
	if p.S3Endpoint != "" || p.S3Region != "" || p.S3PathStyle {
		if err := storageurl.CheckS3Settings(p.URL, p.S3Endpoint, p.S3Region); err != nil {
			return errorf(ErrInvalid, "%v", err)
		}
	}
	if len(p.AddedBy) > 63 {
		return errorf(ErrInvalid, "storage prefix %s: added by a name of %d bytes", p.URL, len(p.AddedBy))
	}
	return nil
}

func (s *billingBook) applySetStoragePrefix(c *SetStoragePrefix) any {
	p, ok := s.projects[c.Project]
	if !ok {
		return errorf(ErrNotFound, "billing project %q does not exist", c.Project)
	}
	if err := CheckStoragePrefix(&c.Prefix); err != nil {
		return err
	}
	sp := c.Prefix
	sp.Added = c.Now
	sp.Sealed = slices.Clone(sp.Sealed)
	i, found := slices.BinarySearchFunc(p.Storage, sp.URL, func(e StoragePrefix, url string) int {
		switch {
		case e.URL < url:
			return -1
		case e.URL > url:
			return 1
		}
		return 0
	})
	if found {
		p.Storage[i] = sp
		return nil
	}
	if len(p.Storage) >= storageurl.MaxStoragePrefixes {
		return errorf(ErrConflict, "billing project %s has %d storage prefixes, the most one may have (the limit is %d per billing project); remove one first", c.Project, len(p.Storage), storageurl.MaxStoragePrefixes)
	}
	p.Storage = slices.Insert(p.Storage, i, sp)
	return nil
}

func (s *billingBook) applyRemoveStoragePrefix(c *RemoveStoragePrefix) any {
	p, ok := s.projects[c.Project]
	if !ok {
		return errorf(ErrNotFound, "billing project %q does not exist", c.Project)
	}
	i := slices.IndexFunc(p.Storage, func(e StoragePrefix) bool { return e.URL == c.URL })
	if i < 0 {
		return errorf(ErrNotFound, "billing project %s has no storage prefix %q (list them with 'drover billing-project storage list %s')", c.Project, c.URL, c.Project)
	}
	p.Storage = slices.Delete(p.Storage, i, i+1)
	return nil
}

func (s *billingBook) applySetProjectSettings(c *SetProjectSettings) any {
	p, ok := s.projects[c.Project]
	if !ok {
		return errorf(ErrNotFound, "billing project %q does not exist", c.Project)
	}
	if c.MaxPriority != nil {
		if err := placement.ValidateMaxPriority("billing project "+c.Project, *c.MaxPriority); err != nil {
			return errorf(ErrInvalid, "%v", err)
		}
	}
	if c.AllowHostNetwork != nil {
		p.AllowHostNetwork = *c.AllowHostNetwork
	}
	if c.MaxPriority != nil {
		p.MaxPriority = *c.MaxPriority
	}
	return nil
}

// prefixSet is the project's storage prefixes, parsed for matching.
func (p *BillingProject) prefixSet() storageurl.PrefixSet {
	urls := make([]string, len(p.Storage))
	for i := range p.Storage {
		urls[i] = p.Storage[i].URL
	}
	return storageurl.NewPrefixSet(urls)
}

// CheckJobs is the one rule of what a billing project's jobs may reach
// beyond their sandbox: each input and output URL under one of the
// project's storage prefixes (storageurl.PrefixSet.Match), and network "host"
// only where the project allows it (AllowHostNetwork) or an admin
// submits. The API checks submissions with it before they reach the log,
// and apply again with the state of the moment (an admin may remove a
// prefix in between). A prefix removed after a job was committed stops
// the job's next attempts instead: they are handed no grant for it
// (StorageFor) and the worker refuses the URL.
func (r Reader) CheckJobs(project, user string, entries []JobEntry) *ApplyError {
	return r.s.checkJobs(project, user, entries)
}

func (s *billingBook) checkJobs(project, user string, entries []JobEntry) *ApplyError {
	u, uerr := s.liveUser(user)
	if uerr != nil {
		return uerr
	}
	if err := s.submitter(project, u); err != nil {
		return err // before anything of the project's is told
	}
	p, admin := s.projects[project], u.Admin
	var set storageurl.PrefixSet
	parsed := false
	for i := range entries {
		sp := entries[i].Spec
		if sp == nil || sp.Run == nil {
			continue
		}
		r, job := sp.Run, jobLabel(&entries[i])
		if r.Network == NetworkHost && !admin && !p.AllowHostNetwork {
			return errorf(ErrForbidden, "%s: billing project %s does not allow network %q (its setting allow_host_network is off): such a job shares its worker machine's network, loopback services and cloud metadata address included; an admin can allow it with 'drover billing-project set %s -allow-host-network=true'",
				job, project, NetworkHost, project)
		}
		check := func(kind string, files []File) *ApplyError {
			for _, f := range files {
				if !parsed {
					set, parsed = p.prefixSet(), true
				}
				at, err := set.Match(f.URL)
				if err != nil {
					return errorf(ErrInvalid, "%s: %s %q: %v", job, kind, f.Name, err)
				}
				if at < 0 {
					return errorf(ErrForbidden, "%s: %v", job, &storageurl.NotUnderPrefixError{Kind: kind, Name: f.Name, URL: f.URL, Project: project, Prefixes: len(p.Storage)})
				}
			}
			return nil
		}
		if err := check("input", r.Inputs); err != nil {
			return err
		}
		if err := check("output", r.Outputs); err != nil {
			return err
		}
	}
	return nil
}

// jobLabel names an entry's job in a refusal: by its name, or its ID in
// the update when it has none.
func jobLabel(e *JobEntry) string {
	if e.Spec.Name != "" {
		return fmt.Sprintf("job %q", e.Spec.Name)
	}
	return fmt.Sprintf("job %d", e.First)
}

// StorageFor returns the storage prefixes of a billing project that the
// given URLs (an attempt's files, variables expanded) lie under, each
// once, with their sealed credentials: what a worker is handed to run the
// attempt. A URL under none adds nothing, and the worker refuses it.
func (s *billingBook) StorageFor(project string, urls []string) []StoragePrefix {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.projects[project]
	if !ok || len(p.Storage) == 0 {
		return nil
	}
	set := p.prefixSet()
	var out []StoragePrefix
	seen := map[int]bool{}
	for _, u := range urls {
		if i, err := set.Match(u); err == nil && i >= 0 && !seen[i] {
			seen[i] = true
			sp := p.Storage[i]
			sp.Sealed = slices.Clone(sp.Sealed)
			out = append(out, sp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].URL < out[j].URL })
	return out
}

// StoragePrefixes lists a billing project's storage prefixes, sorted by
// URL, without their sealed credentials; false when the project does not
// exist.
func (s *billingBook) StoragePrefixes(project string) ([]StoragePrefix, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.projects[project]
	if !ok {
		return nil, false
	}
	out := slices.Clone(p.Storage)
	for i := range out {
		out[i].Sealed = nil
	}
	return out, true
}

// checkStorage: every project's storage prefixes are valid, bounded in
// number and sorted by URL, each once.
func (s *billingBook) checkStorage() error {
	for name, p := range s.projects {
		if len(p.Storage) > storageurl.MaxStoragePrefixes {
			return fmt.Errorf("billing project %s holds %d storage prefixes", name, len(p.Storage))
		}
		for i := range p.Storage {
			if err := CheckStoragePrefix(&p.Storage[i]); err != nil {
				return fmt.Errorf("billing project %s: %v", name, err)
			}
			if i > 0 && p.Storage[i-1].URL >= p.Storage[i].URL {
				return fmt.Errorf("billing project %s: storage prefixes %s and %s out of order", name, p.Storage[i-1].URL, p.Storage[i].URL)
			}
		}
	}
	return nil
}
