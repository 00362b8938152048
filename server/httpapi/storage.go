package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/state"
)

// Secrets seals the storage credentials an admin sends before they go to
// the log, and opens them for the workers that run the project's
// attempts (the keyring of internal/secrets).
type Secrets interface {
	Seal(plaintext, context []byte) ([]byte, error)
	Open(sealed, context []byte) ([]byte, error)
}

// maxStorageBody bounds a storage prefix request: its credentials, JSON
// escaped, and the rest.
const maxStorageBody = 8 * api.MaxCredentialBytes

// inProject checks that the project exists and that the caller has a role
// in it (or is an admin).
func (s *projectHandlers) inProject(r *http.Request, project string) error {
	u := userOf(r)
	if _, ok := s.reads.BillingProject(project); !ok {
		return codedf(http.StatusNotFound, "billing project %q does not exist", project)
	}
	if !u.Admin && s.state.Role(project, u.Name) == "" {
		return codedf(http.StatusForbidden, "user %q is not in billing project %q", u.Name, project)
	}
	return nil
}

func (s *projectHandlers) handleListStorage(w http.ResponseWriter, r *http.Request) (any, error) {
	project := r.PathValue("name")
	if err := s.inProject(r, project); err != nil {
		return nil, err
	}
	list, _ := s.reads.StoragePrefixes(project)
	return list, nil
}

// projectPrefixes returns a project's prefixes, or a 404 error.
func (s *projectHandlers) projectPrefixes(project string) ([]api.StoragePrefix, error) {
	list, ok := s.reads.StoragePrefixes(project)
	if !ok {
		return nil, codedf(http.StatusNotFound, "billing project %q does not exist", project)
	}
	return list, nil
}

func (s *projectHandlers) handleAddStorage(w http.ResponseWriter, r *http.Request) (any, error) {
	project := r.PathValue("name")
	if _, err := s.projectPrefixes(project); err != nil {
		return nil, err
	}
	var req api.AddStoragePrefixRequest
	if err := decodeLimit(w, r, &req, maxStorageBody, fmt.Sprintf("credentials are at most %d bytes", api.MaxCredentialBytes)); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, badRequest(err)
	}
	prefix, _ := api.CleanStoragePrefix(req.Prefix)
	sp := state.StoragePrefix{URL: prefix, AddedBy: userOf(r).Name, Kind: req.Credentials.Kind()}
	if s3 := req.S3; s3 != nil {
		sp.S3Endpoint, sp.S3Region, sp.S3PathStyle = s3.Endpoint, s3.Region, s3.PathStyle
	}
	if req.Credentials != nil {
		if s.secrets == nil {
			return nil, coded(http.StatusBadRequest, "this cluster keeps no credentials: its servers have no secrets key (start every server with the same -secrets-key-file; a single server makes one in its data dir); without credentials a prefix uses the workers' own identity")
		}
		plain, err := json.Marshal(req.Credentials)
		if err == nil {
			sp.Sealed, err = s.secrets.Seal(plain, state.SealContext(project, prefix))
		}
		if err != nil {
			return nil, fmt.Errorf("seal the credentials: %w", err)
		}
	}
	if err := state.CheckStoragePrefix(&sp); err != nil {
		return nil, err
	}
	if _, err := s.apply(&state.SetStoragePrefix{Now: time.Now().UnixNano(), Project: project, Prefix: sp}); err != nil {
		return nil, err
	}
	s.log.Info("storage prefix set", "project", project, "prefix", prefix, "credentials", sp.Kind, "by", sp.AddedBy)
	list, _ := s.reads.StoragePrefixes(project)
	return list, nil
}

func (s *projectHandlers) handleRemoveStorage(w http.ResponseWriter, r *http.Request) (any, error) {
	project := r.PathValue("name")
	raw := r.URL.Query().Get("prefix")
	prefix, err := api.CleanStoragePrefix(raw)
	if err != nil {
		return nil, codedf(http.StatusBadRequest, "query parameter prefix: %w", err)
	}
	list, err := s.projectPrefixes(project)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(list, func(p api.StoragePrefix) bool { return p.Prefix == prefix }) {
		return nil, codedf(http.StatusNotFound, "billing project %s has no storage prefix %q (list them with 'drover billing-project storage list %s')", project, prefix, project)
	}
	if _, err := s.apply(&state.RemoveStoragePrefix{Project: project, URL: prefix}); err != nil {
		return nil, err
	}
	s.log.Info("storage prefix removed", "project", project, "prefix", prefix, "by", userOf(r).Name)
	list, _ = s.reads.StoragePrefixes(project)
	return list, nil
}

func (s *projectHandlers) handleProjectSettings(w http.ResponseWriter, r *http.Request) (any, error) {
	project := r.PathValue("name")
	if _, err := s.projectPrefixes(project); err != nil {
		return nil, err
	}
	var req api.BillingProjectSettings
	if err := decodeLimit(w, r, &req, maxUnauthenticatedBody, "settings are a few fields"); err != nil {
		return nil, err
	}
	if _, err := s.apply(&state.SetProjectSettings{Project: project, AllowHostNetwork: req.AllowHostNetwork}); err != nil {
		return nil, err
	}
	p, _ := s.reads.BillingProject(project)
	return p, nil
}

// storageGrants are the storage prefixes an attempt's files lie under,
// its variables expanded as the worker will, with the credentials opened:
// what the worker needs to reach them as the project, and no more. A
// prefix whose credentials this server cannot open is granted with the
// reason, which ends the attempt's files under it in error (never
// reached as the worker instead).
func (s *workerHandlers) storageGrants(project string, a *api.Assignment) []api.StorageGrant {
	if len(a.Inputs) == 0 && len(a.Outputs) == 0 {
		return nil
	}
	env := a.JobEnv()
	urls := make([]string, 0, len(a.Inputs)+len(a.Outputs))
	for _, f := range a.Inputs {
		urls = append(urls, api.ExpandJobVars(f.Source, env))
	}
	for _, f := range a.Outputs {
		urls = append(urls, api.ExpandJobVars(f.Destination, env))
	}
	var out []api.StorageGrant
	for _, sp := range s.state.StorageFor(project, urls) {
		g := api.StorageGrant{Prefix: sp.URL}
		if sp.S3Endpoint != "" || sp.S3Region != "" || sp.S3PathStyle {
			g.S3 = &api.S3Settings{Endpoint: sp.S3Endpoint, Region: sp.S3Region, PathStyle: sp.S3PathStyle}
		}
		if sp.Sealed != nil {
			creds, err := s.openCredentials(project, &sp)
			if err != nil {
				s.log.Error("cannot hand a storage prefix's credentials to a worker", "project", project, "prefix", sp.URL, "err", err)
				g.Error = fmt.Sprintf("server %s cannot open the prefix's credentials (%v); its operator gives every server the same -secrets-key-file", s.cfg.ID, err)
			}
			g.Credentials = creds
		}
		out = append(out, g)
	}
	return out
}

// openCredentials opens a prefix's sealed credentials.
func (s *workerHandlers) openCredentials(project string, sp *state.StoragePrefix) (*api.StorageCredentials, error) {
	if s.secrets == nil {
		return nil, fmt.Errorf("it has no secrets key")
	}
	plain, err := s.secrets.Open(sp.Sealed, state.SealContext(project, sp.URL))
	if err != nil {
		return nil, err
	}
	var c api.StorageCredentials
	if err := json.Unmarshal(plain, &c); err != nil {
		return nil, fmt.Errorf("sealed credentials are not JSON: %w", err)
	}
	return &c, nil
}
