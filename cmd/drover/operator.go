package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/cluster"
)

func (m *Main) runOperator(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("drover operator needs raft, snapshot or gossip: raft list-peers | remove-peer ID | transfer-leader [ID], snapshot save FILE | restore FILE, gossip keyring generate")
	}
	switch args[0] {
	case "raft":
		return m.sub(ctx, "operator raft", args[1:], map[string]func(context.Context, []string) error{
			"list-peers": m.runListPeers, "remove-peer": m.runRemovePeer, "transfer-leader": m.runTransferLeader,
		})
	case "snapshot":
		return m.sub(ctx, "operator snapshot", args[1:], map[string]func(context.Context, []string) error{
			"save": m.runSnapshotSave, "restore": m.runSnapshotRestore,
		})
	case "gossip":
		if len(args) < 2 || args[1] != "keyring" {
			return usagef("drover operator gossip needs keyring: gossip keyring generate")
		}
		return m.sub(ctx, "operator gossip keyring", args[2:], map[string]func(context.Context, []string) error{
			"generate": m.runKeyringGenerate,
		})
	}
	return usagef("unknown command 'drover operator %s'; use raft, snapshot or gossip", args[0])
}

// runKeyringGenerate prints a new gossip encryption key, for a
// -gossip-key-file.
func (m *Main) runKeyringGenerate(_ context.Context, args []string) error {
	fs := m.newFlags("operator gossip keyring generate", "")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	key, err := cluster.GenerateGossipKey()
	if err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, key)
	return nil
}

func (m *Main) runListPeers(ctx context.Context, args []string) error {
	fs := m.newFlags("operator raft list-peers", "[-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	p, err := m.Client().Peers(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(p)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRAFT ADDRESS\tHTTP ADDRESS\tSTATE\tVOTER\tREACHABLE")
	for _, s := range p.Servers {
		st := "follower"
		if s.Leader {
			st = "leader"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%v\n", s.ID, s.Address, s.HTTP, st, s.Voter, s.Alive)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "Term %d, commit index %d, applied %d (as seen by %s)\n", p.Term, p.CommitIndex, p.AppliedIndex, reporter(p.Servers))
	return nil
}

func reporter(servers []api.Peer) string {
	for _, s := range servers {
		return s.Reported
	}
	return "?"
}

func (m *Main) runRemovePeer(ctx context.Context, args []string) error {
	fs := m.newFlags("operator raft remove-peer", "ID")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if err := m.Client().RemovePeer(ctx, pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "Removed server %s from the raft configuration\n", pos[0])
	return nil
}

func (m *Main) runTransferLeader(ctx context.Context, args []string) error {
	fs := m.newFlags("operator raft transfer-leader", "[ID]")
	pos, err := parse(fs, args, 0, 1)
	if err != nil {
		return err
	}
	id := ""
	if len(pos) == 1 {
		id = pos[0]
	}
	s, err := m.Client().TransferLeader(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "Leadership transferred; the leader is now %s (%s)\n", s.LeaderID, s.Leader)
	return nil
}

func (m *Main) runSnapshotSave(ctx context.Context, args []string) error {
	fs := m.newFlags("operator snapshot save", "FILE")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	tmp := pos[0] + ".part"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	n, err := m.Client().SnapshotSave(ctx, f)
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
	fmt.Fprintf(m.Stdout, "Saved snapshot to %s (%d bytes)\n", pos[0], n)
	return nil
}

func (m *Main) runSnapshotRestore(ctx context.Context, args []string) error {
	fs := m.newFlags("operator snapshot restore", "FILE")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(pos[0])
	if err != nil {
		return err
	}
	if err := m.Client().SnapshotRestore(ctx, data); err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	fmt.Fprintf(m.Stdout, "Restored the cluster's state from %s\n", pos[0])
	return nil
}
