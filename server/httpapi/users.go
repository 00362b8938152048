package httpapi

import (
	"net/http"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/state"
)

// identityHandlers serve who calls: users, their tokens, and the audit
// log of what they did.
type identityHandlers struct{ *Server }

func (s *identityHandlers) handleWhoami(w http.ResponseWriter, r *http.Request) (any, error) {
	u := userOf(r)
	return apiview.User(&u), nil
}

func (s *identityHandlers) handleCreateUser(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.CreateUserRequest
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	if !state.ValidName(req.Name) {
		return nil, codedf(http.StatusBadRequest, "invalid user name %q: use 1-63 letters, digits, '_', '.' or '-'", req.Name)
	}
	tok, err := clientToken(req.Token)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	// A user's first token is its own (revoking the admin's token does
	// not revoke it), but it does not outlive the admin's.
	res, err := s.apply(&state.CreateUser{Now: now.UnixNano(), Name: req.Name, Admin: req.Admin, TokenHash: token.Hash(tok),
		Expires: capExpiry(now.Add(s.cfg.DefaultTokenTTL).UnixNano(), tokenOf(r).Expires)})
	if err != nil {
		return nil, err
	}
	ur := res.(*state.CreateUserResult)
	// ur.Existing: a retry, answered with the user its first try made.
	return withStatus(createdStatus(ur.Existing), api.User{Name: req.Name, Admin: req.Admin, Token: tok, TimeCreated: time.Unix(0, ur.Created).UTC()}), nil
}

// clientToken returns the token a client made for itself, checked to be as
// strong as one the server makes, or a new one when it sent none.
func clientToken(tok string) (string, error) {
	if tok == "" {
		t, err := token.New()
		if err != nil {
			return "", codedErr(http.StatusInternalServerError, err)
		}
		return t, nil
	}
	if !token.Valid(tok) {
		return "", coded(http.StatusBadRequest, "token must be 64 hex digits (32 random bytes), or empty for the server to make one")
	}
	return tok, nil
}

func (s *identityHandlers) handleRotateToken(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.RotateTokenRequest
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	tok, err := clientToken(req.Token)
	if err != nil {
		return nil, err
	}
	name := r.PathValue("name")
	now := time.Now()
	if _, err := s.apply(&state.RotateToken{Now: now.UnixNano(), User: name, TokenHash: token.Hash(tok),
		Expires: capExpiry(now.Add(s.cfg.DefaultTokenTTL).UnixNano(), tokenOf(r).Expires)}); err != nil {
		return nil, err
	}
	u, _ := s.reads.User(name)
	u.Token = tok
	return u, nil
}

func (s *identityHandlers) handleListUsers(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.reads.Users(), nil
}

func (s *identityHandlers) handleDeleteUser(w http.ResponseWriter, r *http.Request) (any, error) {
	name := r.PathValue("name")
	if _, err := s.apply(&state.DeleteUser{Now: time.Now().UnixNano(), Name: name}); err != nil {
		return nil, err
	}
	return map[string]string{"deleted": name}, nil
}
