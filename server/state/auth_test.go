package state

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/money"
)

// TestRolesTokensAndDeletion: a viewer reads but does not submit, a member
// owns what it submits, a manager may cancel the project's batches; tokens
// expire, are bounded per user and revoked; a deleted user loses its
// tokens and memberships, keeps its batches and its name.
func TestRolesTokensAndDeletion(t *testing.T) {
	h := newHarness(t)
	for _, u := range []string{"admin", "mem", "man", "view", "other"} {
		h.Must(&CreateUser{Now: h.Tick(), Name: u, TokenHash: u + "-hash", Admin: u == "admin"})
	}
	h.Must(&CreateBillingProject{Now: h.Tick(), Name: "p", Members: []string{"mem"}})
	h.Must(&SetMember{Project: "p", User: "man", Member: true, Role: RoleManager})
	h.Must(&SetMember{Project: "p", User: "view", Member: true, Role: RoleViewer})
	h.MustFail(&SetMember{Project: "p", User: "other", Member: true, Role: "owner"}, ErrInvalid)
	err := h.MustFail(&CreateBatch{Now: h.Tick(), User: "view", BillingProject: "p", Jobs: []JobEntry{entry(1, 1, spec("a", 1))}}, ErrForbidden)
	if !strings.Contains(err.Msg, "viewer") {
		t.Fatalf("a viewer submitting: %q", err.Msg)
	}
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "mem", BillingProject: "p", Jobs: []JobEntry{entry(1, 1, spec("a", 1))}}).(*UpdateResult).Batch
	for who, want := range map[string]BatchAccess{"mem": Owned, "man": Cancellable, "view": Visible, "other": Hidden} {
		if got := h.S.Access(b, Viewer{Name: who}); got != want {
			t.Errorf("%s: access %d, want %d", who, got, want)
		}
	}
	if p, _ := h.S.BillingProject("p"); len(p.Roles) != 2 || p.Role("man") != RoleManager || p.Role("view") != RoleViewer || len(p.Members) != 3 {
		t.Fatalf("project %+v", p)
	}

	// Tokens.
	now := time.Unix(0, h.Tick())
	h.Must(&CreateToken{Now: now.UnixNano(), User: "mem", Name: "laptop", TokenHash: "laptop-hash", Expires: now.Add(time.Hour).UnixNano()})
	if _, _, st := h.S.Authenticate("laptop-hash", now); st != TokenValid {
		t.Fatal("a fresh token is not valid")
	}
	if u, tok, st := h.S.Authenticate("laptop-hash", now.Add(2*time.Hour)); st != TokenExpired || u.Name != "mem" || tok.Name != "laptop" {
		t.Fatalf("an hour past its expiry: %v %v %v", u.Name, tok.Name, st)
	}
	if _, _, st := h.S.Authenticate("nope", now); st != TokenUnknown {
		t.Fatal("an unknown token")
	}
	h.MustFail(&CreateToken{Now: now.UnixNano(), User: "mem", Name: "bad name", TokenHash: "x"}, ErrInvalid)
	h.MustFail(&CreateToken{Now: now.UnixNano(), User: "mem", Name: "dup", TokenHash: "laptop-hash"}, ErrConflict)
	for i := len(h.S.Tokens("mem")); i < MaxTokensPerUser; i++ {
		h.Must(&CreateToken{Now: now.UnixNano(), User: "mem", Name: "t", TokenHash: "h" + string(rune('a'+i%26)) + strings.Repeat("x", i), Expires: now.Add(time.Hour).UnixNano()})
	}
	h.MustFail(&CreateToken{Now: now.UnixNano(), User: "mem", Name: "one-too-many", TokenHash: "too-many"}, ErrConflict)
	// Two hours on, the expired ones make room.
	later := now.Add(2 * time.Hour).UnixNano()
	h.Must(&CreateToken{Now: later, User: "mem", Name: "after", TokenHash: "after-hash"})
	if n := len(h.S.Tokens("mem")); n != 2 {
		t.Fatalf("after the expired tokens went: %d tokens, want the never-expiring default and the new one", n)
	}
	acc := TokenAccessor("after-hash")
	h.MustFail(&RevokeToken{Accessor: acc, User: "other"}, ErrNotFound)
	h.Must(&RevokeToken{Accessor: acc, User: "mem"})
	if _, _, st := h.S.Authenticate("after-hash", now); st != TokenUnknown {
		t.Fatal("a revoked token still works")
	}

	// Deleting a user.
	h.Must(&DeleteUser{Now: h.Tick(), Name: "admin"})
	h.MustFail(&DeleteUser{Now: h.Tick(), Name: "root"}, ErrConflict) // the last admin
	h.Must(&DeleteUser{Now: h.Tick(), Name: "mem"})
	if _, _, st := h.S.Authenticate("mem-hash", now); st != TokenUnknown {
		t.Fatal("a deleted user's token still works")
	}
	if _, ok := h.S.Batch(b); !ok || h.S.IsMember("p", "mem") || h.S.UserExists("mem") {
		t.Fatal("deleting a user must keep its batches and drop its memberships")
	}
	err = h.MustFail(&CreateUser{Now: h.Tick(), Name: "mem", TokenHash: "new-mem"}, ErrConflict)
	if !strings.Contains(err.Msg, "deleted") {
		t.Fatalf("re-creating a deleted user: %q", err.Msg)
	}
	h.MustFail(&SetSpendLimit{Project: "p", Limit: -1}, ErrInvalid)
	h.Must(&SetSpendLimit{Project: "p", Limit: 250 * money.Dollar})

	// Everything survives a snapshot and a replay of the log.
	snap := SnapshotBytes(t, h.S)
	restored := New()
	if err := restored.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(SnapshotBytes(t, restored), snap) || !bytes.Equal(SnapshotBytes(t, h.Replay()), snap) {
		t.Fatal("the restored or replayed state differs")
	}
	if p, _ := restored.BillingProject("p"); p.SpendLimit != 250*money.Dollar || p.Role("view") != RoleViewer {
		t.Fatalf("restored project %+v", p)
	}
}

// TestTokensOutliveNoParent: a token may not outlive the token that made
// it; revoking a token revokes what it made, and theirs; a rotation keeps
// the tree; deleting a user revokes the tokens its tokens made for others.
func TestTokensOutliveNoParent(t *testing.T) {
	h := newHarness(t)
	now := time.Unix(0, h.Tick())
	hour := now.Add(time.Hour).UnixNano()
	h.Must(&CreateUser{Now: now.UnixNano(), Name: "root", Admin: true, TokenHash: "root-hash"})
	h.Must(&CreateUser{Now: now.UnixNano(), Name: "mem", TokenHash: "mem-hash", Expires: hour})
	memAcc := TokenAccessor("mem-hash")

	// A token expiring in an hour makes no token that expires later, nor
	// one that never does; it makes one expiring with it.
	err := h.MustFail(&CreateToken{Now: now.UnixNano(), User: "mem", Name: "long", TokenHash: "long", Parent: memAcc, Expires: now.Add(10 * 365 * 24 * time.Hour).UnixNano()}, ErrForbidden)
	if !strings.Contains(err.Msg, "may not outlive") {
		t.Fatalf("a 10-year token from a 1-hour one: %q", err.Msg)
	}
	h.MustFail(&CreateToken{Now: now.UnixNano(), User: "mem", Name: "forever", TokenHash: "forever", Parent: memAcc}, ErrForbidden)
	h.Must(&CreateToken{Now: now.UnixNano(), User: "mem", Name: "child", TokenHash: "child", Parent: memAcc, Expires: hour})
	h.Must(&CreateToken{Now: now.UnixNano(), User: "mem", Name: "grandchild", TokenHash: "grandchild", Parent: TokenAccessor("child"), Expires: hour - 1})
	// The root token never expires: it makes what it likes, for others too.
	rootAcc := TokenAccessor("root-hash")
	h.Must(&CreateToken{Now: now.UnixNano(), User: "mem", Name: "from-root", TokenHash: "from-root", Parent: rootAcc})
	// A revoked or expired parent makes nothing.
	h.MustFail(&CreateToken{Now: hour, User: "mem", Name: "late", TokenHash: "late", Parent: memAcc, Expires: hour}, ErrForbidden)

	// Rotating the child: its replacement takes its place in the tree.
	h.Must(&CreateToken{Now: now.UnixNano(), User: "mem", Name: "child", TokenHash: "child2", Replaces: TokenAccessor("child"), Parent: memAcc, Expires: hour})
	if _, _, st := h.S.Authenticate("child", now); st != TokenUnknown {
		t.Fatal("a rotated token still works")
	}
	if tok, ok := h.S.Token(TokenAccessor("grandchild")); !ok || tok.Parent != TokenAccessor("child2") {
		t.Fatalf("after the rotation the grandchild's parent is %q, want the new token's", tok.Parent)
	}
	// Revoking mem's token revokes its child and grandchild, not the
	// root's token for mem.
	h.Must(&RevokeToken{Accessor: memAcc})
	for _, hash := range []string{"mem-hash", "child2", "grandchild"} {
		if _, _, st := h.S.Authenticate(hash, now); st != TokenUnknown {
			t.Errorf("token %s outlived the revocation of its ancestor", hash)
		}
	}
	if _, _, st := h.S.Authenticate("from-root", now); st != TokenValid {
		t.Error("revoking mem's token revoked a token the root token made")
	}
	// Deleting the root user revokes what its tokens made.
	h.Must(&CreateUser{Now: now.UnixNano(), Name: "root2", Admin: true, TokenHash: "root2-hash"})
	h.Must(&DeleteUser{Now: h.Tick(), Name: "root"})
	if _, _, st := h.S.Authenticate("from-root", now); st != TokenUnknown {
		t.Error("a token made by a deleted user's token still works")
	}
}
