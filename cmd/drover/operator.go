package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/secrets"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/server/cluster"
)

// opsCmds run drover (agent, server, worker) and operate it: operator,
// tls, bench, status and instance.
type opsCmds struct{ *Main }

func (m opsCmds) runOperator(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("drover operator needs raft, snapshot, history, gossip or secrets-key: raft list-peers | remove-peer [-permanent] ID | readmit ID | transfer-leader [ID], snapshot save FILE | restore FILE, history recheck, gossip keyring generate | list | install KEY | use KEY | remove KEY, secrets-key generate")
	}
	switch args[0] {
	case "raft":
		return m.sub(ctx, "operator raft", args[1:], map[string]func(context.Context, []string) error{
			"list-peers": m.runListPeers, "remove-peer": m.runRemovePeer, "transfer-leader": m.runTransferLeader,
			"readmit": m.runReadmitPeer,
		})
	case "snapshot":
		return m.sub(ctx, "operator snapshot", args[1:], map[string]func(context.Context, []string) error{
			"save": m.runSnapshotSave, "restore": m.runSnapshotRestore,
		})
	case "history":
		return m.sub(ctx, "operator history", args[1:], map[string]func(context.Context, []string) error{
			"recheck": m.runHistoryRecheck,
		})
	case "gossip":
		if len(args) < 2 || args[1] != "keyring" {
			return usagef("drover operator gossip needs keyring: gossip keyring generate | list | install KEY | use KEY | remove KEY")
		}
		return m.sub(ctx, "operator gossip keyring", args[2:], map[string]func(context.Context, []string) error{
			"generate": m.runKeyringGenerate, "list": m.runKeyringList,
			"install": m.keyringChange("install"), "use": m.keyringChange("use"), "remove": m.keyringChange("remove"),
		})
	case "secrets-key":
		return m.sub(ctx, "operator secrets-key", args[1:], map[string]func(context.Context, []string) error{
			"generate": m.runSecretsKeyGenerate,
		})
	}
	return usagef("unknown command 'drover operator %s'; use raft, snapshot, gossip or secrets-key", args[0])
}

// runKeyringGenerate prints a new gossip encryption key, for a
// -gossip-key-file.
func (m opsCmds) runKeyringGenerate(_ context.Context, args []string) error {
	fs := m.newFlags("operator gossip keyring generate", "")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	key, err := cluster.GenerateGossipKey()
	if err != nil {
		return err
	}
	safeln(m.Stdout, key)
	return nil
}

func (m opsCmds) runKeyringList(ctx context.Context, args []string) error {
	fs := m.newFlags("operator gossip keyring list", "[-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	k, err := m.Client().Operator().GossipKeyring(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(k)
	}
	return m.printKeyring(k)
}

// keyringChange runs install, use or remove: the leader commits the new
// keyring and answers once every live server holds it.
func (m opsCmds) keyringChange(op string) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		fs := m.newFlags("operator gossip keyring "+op, "KEY")
		pos, err := parse(fs, args, 1, 1)
		if err != nil {
			return err
		}
		k, err := m.Client().Operator().ChangeGossipKeyring(ctx, op, pos[0])
		if err != nil {
			return err
		}
		if err := m.printKeyring(k); err != nil {
			return err
		}
		if len(k.Pending) > 0 {
			return fmt.Errorf("committed, but servers %s do not hold the new keyring yet; check again with `drover operator gossip keyring list`", strings.Join(k.Pending, ", "))
		}
		return nil
	}
}

func (m opsCmds) printKeyring(k *api.GossipKeyring) error {
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tFINGERPRINT\tPRIMARY\tINSTALLED")
	for _, key := range k.Keys {
		safef(tw, "%s\t%s\t%v\t%d/%d\n", key.Key, key.Fingerprint, key.Primary, key.Installed, key.Servers)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, srv := range k.Servers {
		safef(m.Stdout, "server %s encrypts with %s, holds %s\n", srv.ID, first(srv.Keys), strings.Join(srv.Keys, " "))
	}
	if len(k.Pending) > 0 {
		safef(m.Stdout, "pending: %s (live, not holding the cluster's keyring yet)\n", strings.Join(k.Pending, ", "))
	}
	if len(k.Unreachable) > 0 {
		safef(m.Stdout, "unreachable: %s (the leader's heartbeats do not reach them; each takes the keyring through Raft when it is back)\n", strings.Join(k.Unreachable, ", "))
	}
	return nil
}

func first(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return s[0]
}

func (m opsCmds) runListPeers(ctx context.Context, args []string) error {
	fs := m.newFlags("operator raft list-peers", "[-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	p, err := m.Client().Operator().Peers(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(p)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRAFT ADDRESS\tHTTP ADDRESS\tSTATE\tVOTER\tREACHABLE\tAPPLIED\tVERSION")
	for _, s := range p.Servers {
		st := "follower"
		if s.Leader {
			st = "leader"
		}
		applied := "-"
		if s.AppliedIndex > 0 {
			applied = fmt.Sprint(s.AppliedIndex)
		}
		safef(tw, "%s\t%s\t%s\t%s\t%v\t%v\t%s\t%s\n", s.ID, s.Address, s.HTTP, st, s.Voter, s.Alive, applied, orDash(s.Version))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	safef(m.Stdout, "Term %d, commit index %d, applied %d (as seen by %s)\n", p.Term, p.CommitIndex, p.AppliedIndex, reporter(p.Servers))
	for _, d := range p.Decommissioned {
		safef(m.Stdout, "Decommissioned: %s (by %s, %s)\n", d.ID, orDash(d.By), d.At.Local().Format(time.DateTime))
	}
	return nil
}

func reporter(servers []api.Peer) string {
	for _, s := range servers {
		return s.Reported
	}
	return "?"
}

func (m opsCmds) runRemovePeer(ctx context.Context, args []string) error {
	fs := m.newFlags("operator raft remove-peer", "[-permanent] ID")
	permanent := fs.Bool("permanent", false, "decommission it: it is not made a voter again when it restarts with its data dir (drover operator raft readmit ID undoes it)")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if err := m.Client().Operator().RemovePeer(ctx, pos[0], *permanent); err != nil {
		return err
	}
	if *permanent {
		safef(m.Stdout, "Decommissioned server %s: removed from the raft configuration, and kept out if it comes back\n", pos[0])
		return nil
	}
	safef(m.Stdout, "Removed server %s from the raft configuration (if it runs again with its data dir it is added back; -permanent keeps it out)\n", pos[0])
	return nil
}

func (m opsCmds) runReadmitPeer(ctx context.Context, args []string) error {
	fs := m.newFlags("operator raft readmit", "ID")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if err := m.Client().Operator().ReadmitPeer(ctx, pos[0]); err != nil {
		return err
	}
	safef(m.Stdout, "Server %s may join again\n", pos[0])
	return nil
}

func (m opsCmds) runTransferLeader(ctx context.Context, args []string) error {
	fs := m.newFlags("operator raft transfer-leader", "[ID]")
	pos, err := parse(fs, args, 0, 1)
	if err != nil {
		return err
	}
	id := ""
	if len(pos) == 1 {
		id = pos[0]
	}
	s, err := m.Client().Operator().TransferLeader(ctx, id)
	if err != nil {
		return err
	}
	safef(m.Stdout, "Leadership transferred; the leader is now %s (%s)\n", s.LeaderID, s.Leader)
	return nil
}

func (m opsCmds) runSnapshotSave(ctx context.Context, args []string) error {
	fs := m.newFlags("operator snapshot save", "FILE")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	// A snapshot holds the gossip keyring and every token's hash: only
	// its owner may read it, like the servers' data dirs.
	tmp := pos[0] + ".part"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		err = f.Chmod(0o600) // a .part left by a crash keeps its mode
	}
	if err != nil {
		return err
	}
	n, err := m.Client().Operator().SnapshotSave(ctx, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save snapshot: %w", err)
	}
	if err := os.Rename(tmp, pos[0]); err != nil {
		return err
	}
	safef(m.Stdout, "Saved snapshot to %s (%d bytes, mode 0600: it holds the gossip key and token hashes; store it as you store the servers' data dirs)\n", pos[0], n)
	return nil
}

func (m opsCmds) runHistoryRecheck(ctx context.Context, args []string) error {
	fs := m.newFlags("operator history recheck", "")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	res, err := m.Client().Operator().HistoryRecheck(ctx)
	if err != nil {
		return fmt.Errorf("recheck the history store: %w", err)
	}
	safef(m.Stdout, "%d finished batches in memory are checked against history store %s again, and written to it if missing, before they leave memory.\n", res.Batches, res.Store)
	return nil
}

func (m opsCmds) runSnapshotRestore(ctx context.Context, args []string) error {
	fs := m.newFlags("operator snapshot restore", "FILE")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(pos[0])
	if err != nil {
		return err
	}
	res, err := m.Client().Operator().SnapshotRestore(ctx, data)
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	safef(m.Stdout, "Restored the cluster's state from %s: index %d, taken %s on %s; %d batches in memory, %d users.\n",
		pos[0], res.RestoredIndex, res.Taken.Local().Format(time.DateTime), orDash(res.FromServer), res.Batches, res.Users)
	safef(m.Stdout, "Kept from before: %d audit entries made since the snapshot", res.AuditKept)
	if res.KeyringKept {
		safef(m.Stdout, "; the gossip keyring in use (the snapshot's differed)")
	}
	safef(m.Stdout, ".\nEverything else is as it was when the snapshot was taken: users, tokens, batches, queues and rates made since are gone.\n")
	if res.ResumeBatchID > res.DiscardedFromBatchID {
		safef(m.Stdout, "Batch IDs %d to %d belonged to the discarded timeline: they are not used again, and the history store's rows under them are hidden. New batches start at %d.\n",
			res.DiscardedFromBatchID, res.ResumeBatchID-1, res.ResumeBatchID)
	}
	if res.Reexport > 0 {
		safef(m.Stdout, "%d finished batches are checked against the history store again (and written to it if missing) before they leave memory.\n", res.Reexport)
	}
	if res.HistoryNote != "" {
		safef(m.Stdout, "Note: %s.\n", res.HistoryNote)
	}
	return nil
}

// runSecretsKeyGenerate prints a new secrets key, for a -secrets-key-file.
func (m opsCmds) runSecretsKeyGenerate(_ context.Context, args []string) error {
	fs := m.newFlags("operator secrets-key generate", "")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	key, err := secrets.GenerateKey()
	if err != nil {
		return err
	}
	safeln(m.Stdout, secrets.FormatKey(key))
	return nil
}

func (m opsCmds) runInstanceList(ctx context.Context, args []string) error {
	fs := m.newFlags("instance list", "")
	asJSON := fs.Bool("json", false, "print JSON")
	all := fs.Bool("all", false, "include retired instances")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	rows, err := m.Client().ListInstances(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(rows)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSTATE\tVERSION\tCPU\tFREE CPU\tMEMORY\tFREE MEMORY\tRUNNING\tREASON")
	for _, r := range rows {
		if !r.Active && !*all {
			continue
		}
		st := "active"
		if !r.Active {
			st = "retired"
		}
		safef(tw, "%d\t%s\t%s\t%s\t%g\t%g\t%s\t%s\t%d\t%s\n", r.ID, r.Name, st, orDash(r.Version), r.CPU, r.FreeCPU,
			units.FormatBytes(r.Memory), units.FormatBytes(r.FreeMemory), r.Running, r.Reason)
	}
	return tw.Flush()
}

func (m opsCmds) runStatus(ctx context.Context, args []string) error {
	fs := m.newFlags("status", "")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	s, err := m.Client().Leader(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(s)
	}
	safef(m.Stdout, "Server %s (leader: %v), drover %s\nLeader %s at %s\nTerm %d, last index %d, applied index %d\n",
		s.ServerID, s.IsLeader, orDash(s.Version), s.LeaderID, s.Leader, s.Term, s.LastIndex, s.AppliedIdx)
	if h := s.History; h != nil {
		state := "up"
		if !h.Up {
			state = "DOWN"
			if h.DownSince != nil {
				state += " since " + h.DownSince.Local().Format(time.DateTime)
			}
			if h.Error != "" {
				state += ": " + h.Error
			}
		}
		safef(m.Stdout, "History store %s: %s\n", h.Store, state)
		if s.IsLeader {
			safef(m.Stdout, "  %d finished batches waiting for export; %d batches (%d jobs) exported and %d left memory while this server led\n",
				h.WaitingBatches, h.ExportedBatches, h.ExportedJobs, h.ForgottenBatches)
		}
		if h.Note != "" {
			safef(m.Stdout, "  %s\n", h.Note)
		}
	}
	return nil
}
