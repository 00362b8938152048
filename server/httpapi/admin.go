package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/server/state"
)

func (s *Server) handleCreateUser(w http.ResponseWriter, r *http.Request) {
	var req api.CreateUserRequest
	if !decode(w, r, &req) {
		return
	}
	if !state.ValidName(req.Name) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid user name %q: use 1-63 letters, digits, '_', '.' or '-'", req.Name))
		return
	}
	tok, ok := clientToken(w, req.Token)
	if !ok {
		return
	}
	now := time.Now()
	// A user's first token is its own (revoking the admin's token does
	// not revoke it), but it does not outlive the admin's.
	res, err := s.apply(&state.CreateUser{Now: now.UnixNano(), Name: req.Name, Admin: req.Admin, TokenHash: token.Hash(tok),
		Expires: capExpiry(now.Add(s.cfg.DefaultTokenTTL).UnixNano(), tokenOf(r).Expires)})
	if err != nil {
		s.writeErr(w, err)
		return
	}
	ur := res.(*state.CreateUserResult)
	code := http.StatusCreated
	if ur.Existing {
		code = http.StatusOK // a retry: the user its first try made
	}
	writeJSON(w, code, api.User{Name: req.Name, Admin: req.Admin, Token: tok, TimeCreated: time.Unix(0, ur.Created).UTC()})
}

// clientToken returns the token a client made for itself, checked to be as
// strong as one the server makes, or a new one when it sent none.
func clientToken(w http.ResponseWriter, tok string) (string, bool) {
	if tok == "" {
		t, err := token.New()
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return "", false
		}
		return t, true
	}
	if !token.Valid(tok) {
		writeError(w, http.StatusBadRequest, "token must be 64 hex digits (32 random bytes), or empty for the server to make one")
		return "", false
	}
	return tok, true
}

func (s *Server) handleRotateToken(w http.ResponseWriter, r *http.Request) {
	var req api.RotateTokenRequest
	if !decode(w, r, &req) {
		return
	}
	tok, ok := clientToken(w, req.Token)
	if !ok {
		return
	}
	name := r.PathValue("name")
	now := time.Now()
	if _, err := s.apply(&state.RotateToken{Now: now.UnixNano(), User: name, TokenHash: token.Hash(tok),
		Expires: capExpiry(now.Add(s.cfg.DefaultTokenTTL).UnixNano(), tokenOf(r).Expires)}); err != nil {
		s.writeErr(w, err)
		return
	}
	u, _ := s.state.User(name)
	u.Token = tok
	writeJSON(w, http.StatusOK, u)
}

func (s *Server) handleListUsers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.state.Users())
}

func (s *Server) handleCreateBillingProject(w http.ResponseWriter, r *http.Request) {
	var req api.CreateBillingProjectRequest
	if !decode(w, r, &req) {
		return
	}
	_, existed := s.state.BillingProject(req.Name)
	if _, err := s.apply(&state.CreateBillingProject{Now: time.Now().UnixNano(), Name: req.Name, Members: req.Members}); err != nil {
		s.writeErr(w, err)
		return
	}
	p, _ := s.state.BillingProject(req.Name)
	code := http.StatusCreated
	if existed {
		code = http.StatusOK // a retry: the project is there with those members
	}
	writeJSON(w, code, p)
}

func (s *Server) handleListBillingProjects(w http.ResponseWriter, r *http.Request) {
	u := userOf(r)
	out := s.state.BillingProjects(u)
	if out == nil {
		out = []api.BillingProject{}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) setMember(w http.ResponseWriter, r *http.Request, project, user string, member bool, role string) {
	if !s.manages(w, r, project) {
		return
	}
	if _, err := s.apply(&state.SetMember{Project: project, User: user, Member: member, Role: role}); err != nil {
		s.writeErr(w, err)
		return
	}
	p, _ := s.state.BillingProject(project)
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) handleAddMember(w http.ResponseWriter, r *http.Request) {
	var req api.MemberRequest
	if !decode(w, r, &req) {
		return
	}
	s.setMember(w, r, r.PathValue("name"), req.User, true, req.Role)
}

func (s *Server) handleRemoveMember(w http.ResponseWriter, r *http.Request) {
	s.setMember(w, r, r.PathValue("name"), r.PathValue("user"), false, "")
}

func (s *Server) handleListInstances(w http.ResponseWriter, r *http.Request) {
	out := []api.Instance{}
	for _, in := range s.state.Instances() {
		ij := api.Instance{
			ID: int64(in.ID), Name: in.Name, NodeID: in.NodeID, Active: in.Active, CPU: float64(in.CPUMilli) / 1000, Memory: in.Memory,
			FreeCPU: float64(in.FreeMilli) / 1000, FreeMemory: in.FreeMem, Running: in.Running,
			TimeActivated: time.Unix(0, in.Activated).UTC(), Reason: in.Reason,
			Region: in.Region, Cluster: in.Cluster, Pool: in.Pool,
			GPUType: in.GPUType, GPUs: int(in.GPUs), FreeGPUs: int(in.FreeGPUs),
		}
		if in.Retired != 0 {
			t := time.Unix(0, in.Retired).UTC()
			ij.TimeRetired = &t
		}
		out = append(out, ij)
	}
	writeJSON(w, http.StatusOK, out)
}
