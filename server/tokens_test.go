package server

import (
	"context"
	"strings"
	"testing"

	"github.com/drover-sched/drover/api"
)

// TestTokenCannotOutliveItsMaker: a user holding a one-minute token asks
// it for a ten-year token and is refused (403 naming the expiry); the
// default lifetime is cut to the maker's; a rotation keeps the cut; and
// revoking the short token revokes everything it made.
func TestTokenCannotOutliveItsMaker(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	if _, err := tc.admin.CreateUser(ctx, &api.CreateUserRequest{Name: "mallory"}); err != nil {
		t.Fatal(err)
	}
	long, err := tc.admin.RotateToken(ctx, "mallory")
	if err != nil {
		t.Fatal(err)
	}
	short, err := api.NewClient(tc.url, long.Token).CreateToken(ctx, &api.CreateTokenRequest{Name: "short", TTL: "1m"})
	if err != nil {
		t.Fatal(err)
	}
	c := api.NewClient(tc.url, short.Token)
	_, err = c.CreateToken(ctx, &api.CreateTokenRequest{Name: "decade", TTL: "87600h"})
	if !api.IsStatus(err, 403) || !strings.Contains(err.Error(), "may not outlive") {
		t.Fatalf("a 10-year token from a 1-minute one: %v", err)
	}
	if _, err := c.CreateToken(ctx, &api.CreateTokenRequest{Name: "forever", TTL: "0"}); !api.IsStatus(err, 403) {
		t.Fatalf("a never-expiring token from a 1-minute one: %v", err)
	}
	child, err := c.CreateToken(ctx, &api.CreateTokenRequest{Name: "child"})
	if err != nil {
		t.Fatal(err)
	}
	if child.ExpiresAt == nil || child.ExpiresAt.After(*short.ExpiresAt) {
		t.Fatalf("a token with the default lifetime made by one expiring at %v expires at %v", short.ExpiresAt, child.ExpiresAt)
	}
	rotated, err := api.NewClient(tc.url, child.Token).RotateOwnToken(ctx, child.Accessor)
	if err != nil {
		t.Fatal(err)
	}
	if rotated.ExpiresAt == nil || rotated.ExpiresAt.After(*short.ExpiresAt) {
		t.Fatalf("the rotated child expires at %v, after its maker (%v)", rotated.ExpiresAt, short.ExpiresAt)
	}
	_, err = api.NewClient(tc.url, rotated.Token).CreateToken(ctx, &api.CreateTokenRequest{Name: "grandchild", TTL: "30s"})
	if !api.IsStatus(err, 400) {
		t.Fatalf("ttl 30s: %v", err) // below the 1m floor
	}
	grand, err := api.NewClient(tc.url, rotated.Token).CreateToken(ctx, &api.CreateTokenRequest{Name: "grandchild"})
	if err != nil {
		t.Fatal(err)
	}

	// Revoking the short token revokes its child (rotated) and grandchild.
	if err := c.RevokeToken(ctx, short.Accessor); err != nil {
		t.Fatal(err)
	}
	for what, tok := range map[string]string{"short": short.Token, "rotated child": rotated.Token, "grandchild": grand.Token} {
		if _, err := api.NewClient(tc.url, tok).Whoami(ctx); !api.IsStatus(err, 401) {
			t.Errorf("the %s token after its ancestor was revoked: %v", what, err)
		}
	}
	if _, err := api.NewClient(tc.url, long.Token).Whoami(ctx); err != nil {
		t.Errorf("the token that made the revoked one: %v", err)
	}
}
