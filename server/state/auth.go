package state

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/drover-sched/drover/money"
)

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// ValidName reports whether s may name a user, billing project or token:
// 1-63 letters, digits, '_', '.' or '-', starting with a letter or digit.
// Places (regions, clusters, pools, queues, GPU types) have a rule of
// their own, placement.ValidateName, which apply checks with
// checkPlaceName.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// MaxTokensPerUser bounds the tokens one user holds (expired ones are
// dropped when the user makes another).
const MaxTokensPerUser = 64

// MaxSpendLimit bounds a billing project's spend limit, in dollars.
const MaxSpendLimit = 1_000_000_000 * money.Dollar

// Token is a bearer token a user authenticates with; only its hash is
// kept. Accessor names it in lists and revocations without revealing it.
type Token struct {
	Accessor string
	Hash     string
	User     string
	Name     string
	Created  int64
	Expires  int64 // 0: never
	// Parent is the accessor of the token that made this one ("": none,
	// as for a user's first token): revoking a token revokes the tokens
	// it made, and theirs.
	Parent string
}

// TokenAccessor is the public name of a token hash: 16 hex digits of a
// hash of it.
func TokenAccessor(hash string) string {
	sum := sha256.Sum256([]byte("drover-token-accessor:" + hash))
	return hex.EncodeToString(sum[:8])
}

// Expired reports whether the token has expired by now (unix ns).
func (t *Token) Expired(now int64) bool { return t.Expires != 0 && now >= t.Expires }

// BootstrapResult says whether a Bootstrap command created the admin.
type BootstrapResult struct{ Created bool }

func (s *identityBook) applyBootstrap(c *Bootstrap) any {
	for _, u := range s.users {
		if u.Admin && u.Deleted == 0 {
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
	if s.timeline == 0 && len(s.forks) == 0 {
		s.timeline = c.Timeline
	}
	return &BootstrapResult{Created: true}
}

func (s *identityBook) applyCreateUser(c *CreateUser) any {
	if !ValidName(c.Name) {
		return errorf(ErrInvalid, "invalid user name %q: use 1-63 letters, digits, '_', '.' or '-'", c.Name)
	}
	if c.TokenHash == "" {
		return errorf(ErrInvalid, "user %q has no token", c.Name)
	}
	if u, ok := s.users[c.Name]; ok {
		if u.Deleted != 0 {
			return errorf(ErrConflict, "user %q was deleted on %s; its batches keep the name, so pick another", c.Name, time.Unix(0, u.Deleted).UTC().Format(time.RFC3339))
		}
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
	s.addToken(&Token{Hash: c.TokenHash, User: c.Name, Name: "default", Created: c.Now, Expires: c.Expires})
	return &CreateUserResult{Created: c.Now}
}

func (s *identityBook) addToken(t *Token) {
	t.Accessor = TokenAccessor(t.Hash)
	s.tokens[t.Hash] = t
}

// CreateUserResult says whether the user already existed with that token
// (a retried request).
type CreateUserResult struct {
	Existing bool
	Created  int64
}

// liveUser returns a user that exists and is not deleted.
func (s *identityBook) liveUser(name string) (*User, *ApplyError) {
	u, ok := s.users[name]
	if !ok {
		return nil, errorf(ErrNotFound, "user %q does not exist", name)
	}
	if u.Deleted != 0 {
		return nil, errorf(ErrNotFound, "user %q was deleted", name)
	}
	return u, nil
}

func (s *identityBook) applyRotateToken(c *RotateToken) any {
	u, err := s.liveUser(c.User)
	if err != nil {
		return err
	}
	if c.TokenHash == "" {
		return errorf(ErrInvalid, "no token")
	}
	if t, ok := s.tokens[c.TokenHash]; ok {
		if t.User == u.Name {
			return nil // a retry
		}
		return errorf(ErrConflict, "that token is already in use; make a new one")
	}
	s.dropTokens(s.tokensOf(u.Name))
	s.addToken(&Token{Hash: c.TokenHash, User: u.Name, Name: "default", Created: c.Now, Expires: c.Expires})
	return nil
}

// CreateToken gives a user one more token.
type CreateToken struct {
	Now       int64
	User      string
	Name      string
	TokenHash string
	Expires   int64 // 0: never
	// Parent is the accessor of the token the request came with: the new
	// token may not outlive it (CheckTokenLifetime), and goes when it is
	// revoked. "": none (an operator's own command).
	Parent string
	// Replaces, when set, is the accessor of a token of the same user that
	// the new one takes the place of (a rotation): the new token takes
	// its parent and the tokens it made, and the old one is revoked, in
	// one step.
	Replaces string
}

// CheckTokenLifetime says whether a token expiring at expires (0: never)
// may be made with parent, the token the request came with: never past
// the parent's own expiry. This is the one place the rule lives; the API
// checks it before a request reaches the log, and apply again.
func CheckTokenLifetime(parent Token, expires int64) error {
	if parent.Expires == 0 || (expires != 0 && expires <= parent.Expires) {
		return nil
	}
	want := "one that never expires"
	if expires != 0 {
		want = "one that expires at " + time.Unix(0, expires).UTC().Format(time.RFC3339)
	}
	return fmt.Errorf("token %q (%s) expires at %s and cannot make %s: a token may not outlive the token that makes it; ask for a shorter ttl, or use a token that lives longer",
		parent.Name, parent.Accessor, time.Unix(0, parent.Expires).UTC().Format(time.RFC3339), want)
}

// Type implements Command.
func (*CreateToken) Type() CommandType { return CmdCreateToken }

// RevokeToken deletes a token. User, when set, must own it (a user
// revoking their own).
type RevokeToken struct {
	Accessor string
	User     string
}

// Type implements Command.
func (*RevokeToken) Type() CommandType { return CmdRevokeToken }

// DeleteUser deletes a user: its tokens and memberships go, its batches
// stay.
type DeleteUser struct {
	Now  int64
	Name string
}

// Type implements Command.
func (*DeleteUser) Type() CommandType { return CmdDeleteUser }

// MaxLogQuota bounds a billing project's log quota, in bytes (1 PiB).
const MaxLogQuota = 1 << 50

// SetLogQuota sets the bytes of job logs each server keeps of a billing
// project's batches (0: none).
type SetLogQuota struct {
	Project string
	Bytes   int64
}

// Type implements Command.
func (*SetLogQuota) Type() CommandType { return CmdSetLogQuota }

// SetSpendLimit sets a billing project's spend limit (0: none).
type SetSpendLimit struct {
	Project string
	Limit   money.Amount // a float of dollars in entries from before integral money
}

// Type implements Command.
func (*SetSpendLimit) Type() CommandType { return CmdSetSpendLimitExact }

func (s *identityBook) applyCreateToken(c *CreateToken) any {
	u, err := s.liveUser(c.User)
	if err != nil {
		return err
	}
	if !ValidName(c.Name) {
		return errorf(ErrInvalid, "invalid token name %q: use 1-63 letters, digits, '_', '.' or '-'", c.Name)
	}
	if c.TokenHash == "" {
		return errorf(ErrInvalid, "no token")
	}
	if t, ok := s.tokens[c.TokenHash]; ok {
		if t.User == u.Name && t.Name == c.Name {
			return nil // a retry
		}
		return errorf(ErrConflict, "that token is already in use; make a new one")
	}
	parent := c.Parent
	var old *Token
	if c.Replaces != "" {
		if old = s.tokenByAccessor(c.Replaces); old == nil || old.User != u.Name {
			return errorf(ErrNotFound, "no token %q of user %q to replace; it was revoked", c.Replaces, u.Name)
		}
		parent = old.Parent
	}
	for _, acc := range []string{c.Parent, parent} {
		if acc == "" {
			continue
		}
		p := s.tokenByAccessor(acc)
		if p == nil || (p.Expires != 0 && p.Expires <= c.Now) {
			return errorf(ErrForbidden, "token %s, which would make this one, was revoked or has expired", acc)
		}
		if err := CheckTokenLifetime(*p, c.Expires); err != nil {
			return errorf(ErrForbidden, "%v", err)
		}
	}
	n := 0
	for h, t := range s.tokens {
		if t.User != u.Name {
			continue
		}
		if t.Expires != 0 && t.Expires <= c.Now {
			delete(s.tokens, h) // expired: make room
			continue
		}
		n++
	}
	if old != nil {
		n-- // it goes as this one comes
	}
	if n >= MaxTokensPerUser {
		return errorf(ErrConflict, "user %q has %d tokens, the most one may hold; revoke some with 'drover token revoke'", u.Name, n)
	}
	t := &Token{Hash: c.TokenHash, User: u.Name, Name: c.Name, Created: c.Now, Expires: c.Expires, Parent: parent}
	s.addToken(t)
	if old != nil {
		for _, child := range s.tokens {
			if child.Parent == old.Accessor {
				child.Parent = t.Accessor
			}
		}
		delete(s.tokens, old.Hash)
	}
	return nil
}

// tokenByAccessor finds a token by its accessor (nil: none).
func (s *identityBook) tokenByAccessor(accessor string) *Token {
	for _, t := range s.tokens {
		if t.Accessor == accessor {
			return t
		}
	}
	return nil
}

// tokensOf returns the hashes of a user's tokens.
func (s *identityBook) tokensOf(user string) map[string]bool {
	out := map[string]bool{}
	for h, t := range s.tokens {
		if t.User == user {
			out[h] = true
		}
	}
	return out
}

// dropTokens deletes the tokens whose hashes gone names, and every token
// they made, and theirs.
func (s *identityBook) dropTokens(gone map[string]bool) {
	revoked := map[string]bool{}
	for h := range gone {
		if t := s.tokens[h]; t != nil {
			revoked[t.Accessor] = true
			delete(s.tokens, h)
		}
	}
	for len(revoked) > 0 {
		next := map[string]bool{}
		for h, t := range s.tokens {
			if revoked[t.Parent] {
				next[t.Accessor] = true
				delete(s.tokens, h)
			}
		}
		revoked = next
	}
}

func (s *identityBook) applyRevokeToken(c *RevokeToken) any {
	t := s.tokenByAccessor(c.Accessor)
	// Another user's token: as if it did not exist.
	if t == nil || (c.User != "" && t.User != c.User) {
		return errorf(ErrNotFound, "no token %q; list yours with 'drover token list'", c.Accessor)
	}
	s.dropTokens(map[string]bool{t.Hash: true})
	return nil
}

func (s *identityBook) applyDeleteUser(c *DeleteUser) any {
	u, err := s.liveUser(c.Name)
	if err != nil {
		return err
	}
	if u.Admin {
		admins := 0
		for _, o := range s.users {
			if o.Admin && o.Deleted == 0 {
				admins++
			}
		}
		if admins == 1 {
			return errorf(ErrConflict, "user %q is the last admin; make another admin first", u.Name)
		}
	}
	u.Deleted = c.Now
	s.dropTokens(s.tokensOf(u.Name))
	for _, p := range s.projects {
		delete(p.Members, u.Name)
		delete(p.Roles, u.Name)
	}
	return nil
}

// CheckSpendLimit says what is wrong with a spend limit, or nil: the API
// refuses such a limit before it reaches the log, and apply again.
func CheckSpendLimit(limit money.Amount) error {
	if limit < 0 || limit > MaxSpendLimit {
		return fmt.Errorf("a spend limit is between 0 (none) and %g dollars", MaxSpendLimit.Dollars())
	}
	return nil
}

// AuthStatus is what a token is worth.
type AuthStatus int

// Token states.
const (
	TokenUnknown AuthStatus = iota // no such token: never made, revoked, or its user deleted
	TokenValid
	TokenExpired
)

// Authenticate returns the user owning a token hash and the token, and
// whether the token is valid at now.
func (s *identityBook) Authenticate(hash string, now time.Time) (User, Token, AuthStatus) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.tokens[hash]
	if !ok {
		return User{}, Token{}, TokenUnknown
	}
	u := s.users[t.User]
	if u == nil || u.Deleted != 0 {
		return User{}, Token{}, TokenUnknown
	}
	if t.Expires != 0 && now.UnixNano() >= t.Expires {
		return *u, *t, TokenExpired
	}
	return *u, *t, TokenValid
}

// UserByTokenHash returns the user owning a valid token hash.
func (s *identityBook) UserByTokenHash(hash string) (User, bool) {
	u, _, st := s.Authenticate(hash, time.Now())
	return u, st == TokenValid
}

// Tokens lists tokens (of one user, or all with user ""), newest first.
func (s *identityBook) Tokens(user string) []Token {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []Token{}
	for _, t := range s.tokens {
		if user == "" || t.User == user {
			out = append(out, *t)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Created != out[j].Created {
			return out[i].Created > out[j].Created
		}
		return out[i].Accessor < out[j].Accessor
	})
	return out
}

// Token returns one token by accessor.
func (s *identityBook) Token(accessor string) (Token, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, t := range s.tokens {
		if t.Accessor == accessor {
			return *t, true
		}
	}
	return Token{}, false
}

// HasUsers reports whether any user exists (the cluster is bootstrapped).
func (s *identityBook) HasUsers() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.users) > 0
}

// UserExists reports whether a user exists and is not deleted.
func (s *identityBook) UserExists(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u, ok := s.users[name]
	return ok && u.Deleted == 0
}

// Users lists the users that are not deleted, by name.
func (s *identityBook) Users() []User {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]User, 0, len(s.users))
	for _, name := range sortedKeys(s.users) {
		if s.users[name].Deleted == 0 {
			out = append(out, *s.users[name])
		}
	}
	return out
}

// User returns one user (not deleted).
func (s *identityBook) User(name string) (User, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u, ok := s.users[name]
	if !ok || u.Deleted != 0 {
		return User{}, false
	}
	return *u, true
}
