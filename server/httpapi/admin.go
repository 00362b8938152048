package httpapi

import (
	"net/http"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/state"
)

func (s *Server) handleCreateUser(w http.ResponseWriter, r *http.Request) (any, error) {
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

func (s *Server) handleRotateToken(w http.ResponseWriter, r *http.Request) (any, error) {
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

func (s *Server) handleListUsers(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.reads.Users(), nil
}

func (s *Server) handleCreateBillingProject(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.CreateBillingProjectRequest
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	_, existed := s.reads.BillingProject(req.Name)
	if _, err := s.apply(&state.CreateBillingProject{Now: time.Now().UnixNano(), Name: req.Name, Members: req.Members}); err != nil {
		return nil, err
	}
	p, _ := s.reads.BillingProject(req.Name)
	// existed: a retry; the project is there with those members.
	return withStatus(createdStatus(existed), p), nil
}

// handleDeleteBillingProject removes a billing project that never had a
// batch and that no queue names (the state's rule; the servers' default
// project stays).
func (s *Server) handleDeleteBillingProject(w http.ResponseWriter, r *http.Request) (any, error) {
	name := r.PathValue("name")
	if name == s.cfg.DefaultBillingProject {
		return nil, codedf(http.StatusConflict, "billing project %q is the servers' default (-default-billing-project): it stays", name)
	}
	if _, err := s.apply(&state.DeleteBillingProject{Name: name}); err != nil {
		return nil, err
	}
	return map[string]string{"deleted": name}, nil
}

func (s *Server) handleListBillingProjects(w http.ResponseWriter, r *http.Request) (any, error) {
	u := userOf(r)
	out := s.reads.BillingProjects(u)
	if out == nil {
		out = []api.BillingProject{}
	}
	return out, nil
}

func (s *Server) setMember(r *http.Request, project, user string, member bool, role string) (any, error) {
	if err := s.manages(r, project); err != nil {
		return nil, err
	}
	if _, err := s.apply(&state.SetMember{Project: project, User: user, Member: member, Role: role}); err != nil {
		return nil, err
	}
	p, _ := s.reads.BillingProject(project)
	return p, nil
}

func (s *Server) handleAddMember(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.MemberRequest
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	return s.setMember(r, r.PathValue("name"), req.User, true, req.Role)
}

func (s *Server) handleRemoveMember(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.setMember(r, r.PathValue("name"), r.PathValue("user"), false, "")
}

func (s *Server) handleListInstances(w http.ResponseWriter, r *http.Request) (any, error) {
	return apiview.Instances(s.state.Instances()), nil
}
