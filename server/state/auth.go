package state

import (
	"regexp"
	"sort"
	"time"

	"github.com/drover-sched/drover/api"
)

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// ValidName reports whether s may name a user or billing project: 1-63
// letters, digits, '_', '.' or '-', starting with a letter or digit.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// BootstrapResult says whether a Bootstrap command created the admin.
type BootstrapResult struct{ Created bool }

func (s *State) applyBootstrap(c *Bootstrap) any {
	for _, u := range s.users {
		if u.Admin {
			return &BootstrapResult{Created: false}
		}
	}
	if r := s.applyCreateUser(&CreateUser{Now: c.Now, Name: c.Admin, Admin: true, TokenHash: c.TokenHash}); r != nil {
		if err, ok := r.(*ApplyError); ok {
			return err
		}
	}
	if c.DefaultProject != "" {
		if _, ok := s.projects[c.DefaultProject]; !ok {
			s.applyCreateBillingProject(&CreateBillingProject{Now: c.Now, Name: c.DefaultProject, Members: []string{c.Admin}})
		}
	}
	return &BootstrapResult{Created: true}
}

func (s *State) applyCreateUser(c *CreateUser) any {
	if !ValidName(c.Name) {
		return errorf(ErrInvalid, "invalid user name %q: use 1-63 letters, digits, '_', '.' or '-'", c.Name)
	}
	if c.TokenHash == "" {
		return errorf(ErrInvalid, "user %q has no token", c.Name)
	}
	if u, ok := s.users[c.Name]; ok {
		// The same request again (its answer was lost): the same user.
		if u.TokenHash == c.TokenHash && u.Admin == c.Admin {
			return &CreateUserResult{Existing: true, Created: u.Created}
		}
		return errorf(ErrConflict, "user %q already exists; an admin can give it a new token with 'drover user rotate-token %s'", c.Name, c.Name)
	}
	if _, taken := s.tokens[c.TokenHash]; taken {
		return errorf(ErrConflict, "that token is already in use; make a new one")
	}
	s.users[c.Name] = &User{Name: c.Name, Admin: c.Admin, TokenHash: c.TokenHash, Created: c.Now}
	s.tokens[c.TokenHash] = c.Name
	return &CreateUserResult{Created: c.Now}
}

// CreateUserResult says whether the user already existed with that token
// (a retried request).
type CreateUserResult struct {
	Existing bool
	Created  int64
}

func (s *State) applyRotateToken(c *RotateToken) any {
	u, ok := s.users[c.User]
	if !ok {
		return errorf(ErrNotFound, "user %q does not exist", c.User)
	}
	if c.TokenHash == "" {
		return errorf(ErrInvalid, "no token")
	}
	if u.TokenHash == c.TokenHash {
		return nil // a retry
	}
	if _, taken := s.tokens[c.TokenHash]; taken {
		return errorf(ErrConflict, "that token is already in use; make a new one")
	}
	delete(s.tokens, u.TokenHash)
	u.TokenHash = c.TokenHash
	s.tokens[c.TokenHash] = u.Name
	return nil
}

func (s *State) applyCreateBillingProject(c *CreateBillingProject) any {
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
		if _, ok := s.users[m]; !ok {
			return errorf(ErrNotFound, "user %q does not exist; create it first with 'drover user create %s'", m, m)
		}
	}
	p := &BillingProject{Name: c.Name, Members: map[string]bool{}, Created: c.Now}
	for _, m := range c.Members {
		p.Members[m] = true
	}
	s.projects[c.Name] = p
	return nil
}

func (s *State) applySetMember(c *SetMember) any {
	p, ok := s.projects[c.Project]
	if !ok {
		return errorf(ErrNotFound, "billing project %q does not exist", c.Project)
	}
	if _, ok := s.users[c.User]; !ok {
		return errorf(ErrNotFound, "user %q does not exist", c.User)
	}
	if c.Member {
		p.Members[c.User] = true
	} else {
		delete(p.Members, c.User)
	}
	return nil
}

// UserByTokenHash returns the user owning a token hash.
func (s *State) UserByTokenHash(hash string) (User, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	name, ok := s.tokens[hash]
	if !ok {
		return User{}, false
	}
	return *s.users[name], true
}

// HasUsers reports whether any user exists (the cluster is bootstrapped).
func (s *State) HasUsers() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.users) > 0
}

// UserExists reports whether a user exists.
func (s *State) UserExists(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.users[name]
	return ok
}

// Users lists users by name.
func (s *State) Users() []api.User {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]api.User, 0, len(s.users))
	for _, name := range sortedKeys(s.users) {
		out = append(out, s.users[name].toAPI())
	}
	return out
}

// User returns one user, without its token.
func (s *State) User(name string) (api.User, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u, ok := s.users[name]
	if !ok {
		return api.User{}, false
	}
	return u.toAPI(), true
}

// toAPI is the user as the API shows it, without its token.
func (u *User) toAPI() api.User {
	return api.User{Name: u.Name, Admin: u.Admin, TimeCreated: time.Unix(0, u.Created).UTC()}
}

// IsMember reports whether user belongs to the billing project.
func (s *State) IsMember(project, user string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.isMember(project, user)
}

func (s *State) isMember(project, user string) bool {
	p, ok := s.projects[project]
	return ok && p.Members[user]
}

// BillingProjects lists the billing projects visible to the user.
func (s *State) BillingProjects(viewer User) []api.BillingProject {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []api.BillingProject
	for _, name := range sortedKeys(s.projects) {
		p := s.projects[name]
		if !viewer.Admin && !p.Members[viewer.Name] {
			continue
		}
		members := make([]string, 0, len(p.Members))
		for m := range p.Members {
			members = append(members, m)
		}
		sort.Strings(members)
		out = append(out, api.BillingProject{Name: p.Name, Members: members, TimeCreated: time.Unix(0, p.Created).UTC()})
	}
	return out
}

// BillingProject returns one billing project.
func (s *State) BillingProject(name string) (api.BillingProject, bool) {
	for _, p := range s.BillingProjects(User{Admin: true}) {
		if p.Name == name {
			return p, true
		}
	}
	return api.BillingProject{}, false
}
