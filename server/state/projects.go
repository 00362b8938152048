package state

// Billing projects (billingBook): creation and deletion, members and
// roles, spend limits and log quotas, who may see or submit to a project.

import (
	"maps"
	"slices"
)

func (s *billingBook) applySetLogQuota(c *SetLogQuota) any {
	p, ok := s.projects[c.Project]
	if !ok {
		return errorf(ErrNotFound, "billing project %q does not exist", c.Project)
	}
	if c.Bytes < 0 || c.Bytes > MaxLogQuota {
		return errorf(ErrInvalid, "a log quota is between 0 (none) and %d bytes", int64(MaxLogQuota))
	}
	p.LogQuota = c.Bytes
	return nil
}

// LogQuotaOf returns the billing project of a batch the state holds and
// that project's log quota (0: none).
func (s *billingBook) LogQuotaOf(batch uint64) (project string, quota int64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b := s.batches[batch]
	if b == nil {
		return "", 0, false
	}
	if p := s.projects[b.BillingProject]; p != nil {
		quota = p.LogQuota
	}
	return b.BillingProject, quota, true
}

func (s *billingBook) applySetSpendLimit(c *SetSpendLimit) any {
	p, ok := s.projects[c.Project]
	if !ok {
		return errorf(ErrNotFound, "billing project %q does not exist", c.Project)
	}
	if err := CheckSpendLimit(c.Limit); err != nil {
		return errorf(ErrInvalid, "%v", err)
	}
	p.SpendLimit = c.Limit
	s.notifySpend(c.Project)
	return nil
}

func (s *billingBook) applyCreateBillingProject(c *CreateBillingProject) any {
	if !ValidName(c.Name) {
		return errorf(ErrInvalid, "invalid billing project name %q: use 1-63 letters, digits, '_', '.' or '-'", c.Name)
	}
	if p, ok := s.projects[c.Name]; ok {
		// The same request again (its answer was lost) finds what it made.
		same := true
		for _, m := range c.Members {
			same = same && p.Members[m]
		}
		if same {
			return nil
		}
		return errorf(ErrConflict, "billing project %q already exists; add members with 'drover billing-project add-member'", c.Name)
	}
	for _, m := range c.Members {
		if _, err := s.liveUser(m); err != nil {
			return errorf(ErrNotFound, "user %q does not exist; create it first with 'drover user create %s'", m, m)
		}
	}
	p := &BillingProject{Name: c.Name, Members: map[string]bool{}, Roles: map[string]string{}, Created: c.Now}
	for _, m := range c.Members {
		p.Members[m] = true
	}
	s.projects[c.Name] = p
	return nil
}

func (s *billingBook) applyDeleteBillingProject(c *DeleteBillingProject) any {
	p, ok := s.projects[c.Name]
	if !ok {
		return errorf(ErrNotFound, "billing project %q does not exist", c.Name)
	}
	// Batches from before the count (a snapshot of an older server) left
	// a bill if any of their attempts ran.
	if _, billed := s.bills[c.Name]; p.Batches > 0 || billed {
		return errorf(ErrConflict, "billing project %q has had batches; its name stays with them (live and in the history store): remove its members and storage instead", c.Name)
	}
	for _, path := range sortedKeys(s.queues) { // the first by path: every server says the same
		q := s.queues[path]
		if slices.Contains(q.Projects, c.Name) || slices.Contains(q.AllowProjects, c.Name) {
			return errorf(ErrConflict, "queue %s names billing project %q; take it out of the queue's billing_projects and allow_projects first", q.Path, c.Name)
		}
	}
	delete(s.projects, c.Name)
	return nil
}

func (s *billingBook) applySetMember(c *SetMember) any {
	p, ok := s.projects[c.Project]
	if !ok {
		return errorf(ErrNotFound, "billing project %q does not exist", c.Project)
	}
	if _, err := s.liveUser(c.User); err != nil {
		return err
	}
	if !c.Member {
		delete(p.Members, c.User)
		delete(p.Roles, c.User)
		return nil
	}
	role := c.Role
	if role == "" {
		role = RoleMember
	}
	if !ValidRole(role) {
		return errorf(ErrInvalid, "role %q is not member, manager or viewer", c.Role)
	}
	p.Members[c.User] = true
	if p.Roles == nil {
		p.Roles = map[string]string{}
	}
	if role == RoleMember {
		delete(p.Roles, c.User)
	} else {
		p.Roles[c.User] = role
	}
	return nil
}

// IsMember reports whether user has a role in the billing project.
func (s *billingBook) IsMember(project, user string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.isMember(project, user)
}

func (s *billingBook) isMember(project, user string) bool {
	p, ok := s.projects[project]
	return ok && p.Members[user]
}

// Role returns user's role in the billing project ("" for none).
func (s *billingBook) Role(project, user string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if p, ok := s.projects[project]; ok {
		return p.role(user)
	}
	return ""
}

// canSubmit reports whether a user may submit to (and cancel in) a
// billing project: an admin, a member or a manager.
func (s *billingBook) canSubmit(project string, u *User) bool {
	if u.Admin {
		return true
	}
	p, ok := s.projects[project]
	if !ok {
		return false
	}
	r := p.role(u.Name)
	return r == RoleMember || r == RoleManager
}

// submitter refuses a user who may not submit to a billing project, with
// why (nil: the user may).
func (s *billingBook) submitter(project string, u *User) *ApplyError {
	if _, ok := s.projects[project]; !ok {
		return errorf(ErrNotFound, "billing project %q does not exist", project)
	}
	if s.canSubmit(project, u) {
		return nil
	}
	if s.isMember(project, u.Name) {
		return errorf(ErrForbidden, "user %q is a viewer of billing project %q and may not submit to it; a manager can make you a member",
			u.Name, project)
	}
	return errorf(ErrForbidden, "user %q is not a member of billing project %q; an admin can add you with 'drover billing-project add-member %s %s'",
		u.Name, project, project, u.Name)
}

// BillingProjects lists the billing projects visible to the user.
func (s *billingBook) BillingProjects(viewer User) []ProjectRecord {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []ProjectRecord
	for _, name := range sortedKeys(s.projects) {
		p := s.projects[name]
		if !viewer.Admin && !p.Members[viewer.Name] {
			continue
		}
		out = append(out, s.projectRecord(p))
	}
	return out
}

// BillingProject returns one billing project.
func (s *billingBook) BillingProject(name string) (ProjectRecord, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.projects[name]
	if !ok {
		return ProjectRecord{}, false
	}
	return s.projectRecord(p), true
}

func (s *billingBook) visible(b *Batch, v Viewer) bool {
	return v.Admin || s.isMember(b.BillingProject, v.Name)
}

// AccessTo is what the viewer may do with a batch of owner in project
// (for batches the state no longer holds: the history store's).
func (s *billingBook) AccessTo(project, owner string, v Viewer) BatchAccess {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.accessLocked(project, owner, v)
}

func (s *billingBook) accessLocked(project, owner string, v Viewer) BatchAccess {
	switch {
	case v.Admin:
		return Owned
	case !s.isMember(project, v.Name):
		return Hidden
	}
	p := s.projects[project]
	role := ""
	if p != nil {
		role = p.role(v.Name)
	}
	switch {
	case owner == v.Name && (role == RoleMember || role == RoleManager):
		return Owned
	case role == RoleManager:
		return Cancellable
	}
	return Visible
}

// VisibleProjects lists the billing projects whose batches the viewer
// sees (nil: all, for an admin).
func (s *billingBook) VisibleProjects(v Viewer) []string {
	if v.Admin {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []string{}
	for _, name := range sortedKeys(s.projects) {
		if s.isMember(name, v.Name) {
			out = append(out, name)
		}
	}
	return out
}

// projectRecord copies a project for a read. Callers hold the lock.
func (s *billingBook) projectRecord(p *BillingProject) ProjectRecord {
	out := ProjectRecord{BillingProject: *p, budget: s.budget(p.Name)}
	out.Members = maps.Clone(p.Members)
	out.Roles = maps.Clone(p.Roles)
	out.Storage = slices.Clone(p.Storage)
	for i := range out.Storage {
		out.Storage[i].Sealed = nil // a reader never needs the sealed credentials
	}
	return out
}
