package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/money"
)

// adminCmds are the commands for who uses the cluster and what it costs:
// users, tokens, the audit log, billing projects (their members, spend
// limits, log quotas and storage), rates and billing.
type adminCmds struct{ *Main }

func (m adminCmds) runUserCreate(ctx context.Context, args []string) error {
	fs := m.newFlags("user create", "NAME [-admin]")
	admin := fs.Bool("admin", false, "make the user an admin")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	u, err := m.Client().CreateUser(ctx, &api.CreateUserRequest{Name: pos[0], Admin: *admin})
	if err != nil {
		return err
	}
	return m.printToken(u, *asJSON, fmt.Sprintf("Created user %s. Keep the token above: it is shown only once.", u.Name))
}

// printToken prints a user with its new token: the token alone on stdout,
// so DROVER_TOKEN=$(drover user create alice) works, and a note on stderr.
func (m adminCmds) printToken(u *api.User, asJSON bool, note string) error {
	if asJSON {
		return m.printJSON(u)
	}
	safeln(m.Stdout, u.Token)
	safeln(m.Stderr, note)
	return nil
}

func (m adminCmds) runUserRotateToken(ctx context.Context, args []string) error {
	fs := m.newFlags("user rotate-token", "NAME")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	u, err := m.Client().RotateToken(ctx, pos[0])
	if err != nil {
		return err
	}
	return m.printToken(u, *asJSON, fmt.Sprintf("New token for %s above; the old one no longer works.", u.Name))
}

func (m adminCmds) runUserList(ctx context.Context, args []string) error {
	fs := m.newFlags("user list", "")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	users, err := m.Client().ListUsers(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(users)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tADMIN\tCREATED")
	for _, u := range users {
		safef(tw, "%s\t%v\t%s\n", u.Name, u.Admin, ago(u.TimeCreated))
	}
	return tw.Flush()
}

func (m adminCmds) runBPCreate(ctx context.Context, args []string) error {
	fs := m.newFlags("billing-project create", "NAME [-member USER]...")
	var members multiFlag
	fs.Var(&members, "member", "user to add (repeatable, or comma-separated)")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	var names []string
	for _, m := range members {
		for _, n := range strings.Split(m, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
	}
	p, err := m.Client().CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: pos[0], Members: names})
	if err != nil {
		return err
	}
	safef(m.Stdout, "Created billing project %s (members: %s)\n", p.Name, strings.Join(p.Members, ", "))
	return nil
}

func (m adminCmds) runBPList(ctx context.Context, args []string) error {
	fs := m.newFlags("billing-project list", "")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	ps, err := m.Client().ListBillingProjects(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(ps)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMEMBERS\tCOST\tSPEND LIMIT")
	for _, p := range ps {
		limit := "-"
		if p.SpendLimit > 0 {
			limit = dollars(p.SpendLimit)
		}
		safef(tw, "%s\t%s\t%s\t%s\n", p.Name, strings.Join(p.Members, ", "), dollars(p.Cost), limit)
	}
	return tw.Flush()
}

func (m adminCmds) runBPAddMember(ctx context.Context, args []string) error {
	fs := m.newFlags("billing-project add-member", "PROJECT USER [-role member|manager|viewer]")
	role := fs.String("role", "member", "member (submits and sees the project's batches), manager (also manages members and the spend limit) or viewer (reads only)")
	pos, err := parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	if err := m.Client().SetRole(ctx, pos[0], pos[1], *role); err != nil {
		return err
	}
	safef(m.Stdout, "Added %s to billing project %s as %s\n", pos[1], pos[0], *role)
	return nil
}

func (m adminCmds) runBPSpendLimit(ctx context.Context, args []string) error {
	fs := m.newFlags("billing-project set-limit", "PROJECT DOLLARS")
	pos, err := parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	limit, err := money.ParseAmount(pos[1])
	if err != nil {
		return usagef("spend limit %q is not a number of dollars", pos[1])
	}
	p, err := m.Client().SetSpendLimit(ctx, pos[0], limit)
	if err != nil {
		return err
	}
	safef(m.Stdout, "Billing project %s: spend limit %s\n", p.Name, spendLimit(p.SpendLimit))
	return nil
}

func (m adminCmds) runBPLogQuota(ctx context.Context, args []string) error {
	fs := m.newFlags("billing-project set-log-quota", "PROJECT SIZE")
	pos, err := parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	n, err := units.ParseBytes(pos[1])
	if err != nil {
		return usagef("log quota %q: %v (e.g. 50GiB; 0: none)", pos[1], err)
	}
	p, err := m.Client().SetLogQuota(ctx, pos[0], n)
	if err != nil {
		return err
	}
	safef(m.Stdout, "Billing project %s: log quota %s per server\n", p.Name, logQuota(p.LogQuota))
	return nil
}

// spendLimit prints a spend limit ("none" for 0).
func spendLimit(a money.Amount) string {
	if a <= 0 {
		return "none"
	}
	return dollars(a)
}

// logQuota prints a log quota ("none" for 0).
func logQuota(n int64) string {
	if n == 0 {
		return "none"
	}
	return units.FormatBytes(n)
}

func (m adminCmds) runBPShow(ctx context.Context, args []string) error {
	fs := m.newFlags("billing-project show", "PROJECT")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	ps, err := m.Client().ListBillingProjects(ctx)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if p.Name != pos[0] {
			continue
		}
		if *asJSON {
			return m.printJSON(p)
		}
		limit := spendLimit(p.SpendLimit)
		tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
		safef(tw, "Name\t%s\nMembers\t%s\nManagers\t%s\nViewers\t%s\nCost\t%s\nSpend limit\t%s\nLog quota\t%s per server\nHost network\t%s\nMax priority\t%d (and its queue's)\n",
			p.Name, strings.Join(p.Members, ", "), strings.Join(p.Managers, ", "), strings.Join(p.Viewers, ", "), dollars(p.Cost), limit, logQuota(p.LogQuota), hostNetworkWord(p.AllowHostNetwork), p.MaxPriority)
		if len(p.Storage) == 0 {
			safef(tw, "Storage\tnone: its jobs can name no input or output URL\n")
		}
		for i, s := range p.Storage {
			label := ""
			if i == 0 {
				label = "Storage"
			}
			safef(tw, "%s\t%s (%s)\n", label, s.Prefix, s.Credentials)
		}
		return tw.Flush()
	}
	return fmt.Errorf("billing project %q does not exist or you are not in it", pos[0])
}

func (m adminCmds) runUserDelete(ctx context.Context, args []string) error {
	fs := m.newFlags("user delete", "NAME")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if err := m.Client().DeleteUser(ctx, pos[0]); err != nil {
		return err
	}
	safef(m.Stdout, "Deleted user %s: its tokens no longer work; its batches stay\n", pos[0])
	return nil
}

func (m adminCmds) runTokenCreate(ctx context.Context, args []string) error {
	fs := m.newFlags("token create", "[-user U] [-name N] [-ttl 720h]")
	user := fs.String("user", "", "the user the token is for (default: yourself; another user: admins only)")
	name := fs.String("name", "token", "a name to tell the token by")
	ttl := fs.String("ttl", "", "how long the token is valid (default: the server's -token-ttl, 720h; 0: never, admins only)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	t, err := m.Client().CreateToken(ctx, &api.CreateTokenRequest{User: *user, Name: *name, TTL: *ttl})
	if err != nil {
		return err
	}
	return m.printNewToken(t, *asJSON, "Created")
}

func (m adminCmds) printNewToken(t *api.Token, asJSON bool, verb string) error {
	if asJSON {
		return m.printJSON(t)
	}
	safeln(m.Stdout, t.Token)
	exp := "never expires"
	if t.ExpiresAt != nil {
		exp = "expires " + t.ExpiresAt.Format(time.RFC3339)
	}
	safef(m.Stderr, "%s token %q (accessor %s) for %s; it %s. Keep the token above: it is shown only once.\n", verb, t.Name, t.Accessor, t.User, exp)
	return nil
}

func (m adminCmds) runTokenList(ctx context.Context, args []string) error {
	fs := m.newFlags("token list", "[-user U | -all]")
	user := fs.String("user", "", "another user's tokens (admins)")
	all := fs.Bool("all", false, "everyone's tokens (admins)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	ts, err := m.Client().ListTokens(ctx, *user, *all)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(ts)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCESSOR\tUSER\tNAME\tCREATED\tEXPIRES")
	for _, t := range ts {
		exp := "never"
		if t.ExpiresAt != nil {
			exp = t.ExpiresAt.Format(time.RFC3339)
			if t.Expired {
				exp += " (expired)"
			}
		}
		safef(tw, "%s\t%s\t%s\t%s\t%s\n", t.Accessor, t.User, t.Name, ago(t.TimeCreated), exp)
	}
	return tw.Flush()
}

func (m adminCmds) runTokenRevoke(ctx context.Context, args []string) error {
	fs := m.newFlags("token revoke", "ACCESSOR")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if err := m.Client().RevokeToken(ctx, pos[0]); err != nil {
		return err
	}
	safef(m.Stdout, "Revoked token %s\n", pos[0])
	return nil
}

func (m adminCmds) runTokenRotate(ctx context.Context, args []string) error {
	fs := m.newFlags("token rotate", "ACCESSOR")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	t, err := m.Client().RotateOwnToken(ctx, pos[0])
	if err != nil {
		return err
	}
	return m.printNewToken(t, *asJSON, "Rotated: the old one no longer works; new")
}

func (m adminCmds) runAudit(ctx context.Context, args []string) error {
	fs := m.newFlags("audit", "[-since 1h] [-user U] [-limit N]")
	since := fs.String("since", "24h", "entries since this long ago (1h) or this time (RFC 3339)")
	user := fs.String("user", "", "only this user's requests")
	limit := fs.Int("limit", 1000, "at most this many entries, newest first")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	es, err := m.Client().Audit(ctx, *since, *user, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(es)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tUSER\tFROM\tREQUEST\tSTATUS\tMESSAGE")
	for _, e := range es {
		who := e.User
		if who == "" {
			who = "-"
		}
		safef(tw, "%s\t%s\t%s\t%s %s\t%d\t%s\n", e.Time.Format(time.RFC3339), who, e.Remote, e.Method, e.Path, e.Status, e.Message)
	}
	return tw.Flush()
}

func (m adminCmds) runBPRemoveMember(ctx context.Context, args []string) error {
	fs := m.newFlags("billing-project remove-member", "PROJECT USER")
	pos, err := parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	if err := m.Client().RemoveMember(ctx, pos[0], pos[1]); err != nil {
		return err
	}
	safef(m.Stdout, "Removed %s from billing project %s\n", pos[1], pos[0])
	return nil
}

func (m adminCmds) runBPDelete(ctx context.Context, args []string) error {
	fs := m.newFlags("billing-project delete", "PROJECT")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if err := m.Client().DeleteBillingProject(ctx, pos[0]); err != nil {
		return err
	}
	safef(m.Stdout, "Deleted billing project %s\n", pos[0])
	return nil
}
