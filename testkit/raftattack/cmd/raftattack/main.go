// Command raftattack is the hostile job of the Raft tests: it attacks the
// Raft and gossip addresses it is given (see package raftattack) and
// prints one JSON line per try, for the test to read from the job's log.
//
//	raftattack -raft ADDR,... -gossip ADDR,... -user NAME -token HEX
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/drover-sched/drover/testkit/raftattack"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "raftattack:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("raftattack", flag.ContinueOnError)
	raftAddrs := fs.String("raft", "", "comma-separated addresses to send forged Raft entries to")
	gossipAddrs := fs.String("gossip", "", "comma-separated gossip addresses to join as a server")
	var opts raftattack.Options
	fs.StringVar(&opts.User, "user", "mallory", "the user the forged CreateUser makes an admin")
	fs.StringVar(&opts.Token, "token", "", "that user's token (64 hex digits; default: a new one)")
	fs.DurationVar(&opts.Timeout, "timeout", 3*time.Second, "bound of each connection and RPC")
	fs.DurationVar(&opts.Dwell, "dwell", 5*time.Second, "how long a gossip intruder waits to be made a voter")
	entries := fs.String("entries", raftattack.EntryCreateUser+","+raftattack.EntryGarbage, "the forged entries to send, in order")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts.Entries = split(*entries)
	out := json.NewEncoder(os.Stdout)
	for _, addr := range split(*raftAddrs) {
		res, err := raftattack.Raft(addr, opts)
		if err != nil {
			return err
		}
		for _, r := range res {
			if err := out.Encode(map[string]any{"raft": r}); err != nil {
				return err
			}
		}
	}
	// The gossip intruders wait side by side.
	addrs := split(*gossipAddrs)
	results := make([]raftattack.GossipResult, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Add(1)
		go func() { defer wg.Done(); results[i], errs[i] = raftattack.Gossip(addr, opts) }()
	}
	wg.Wait()
	for i := range addrs {
		if errs[i] != nil {
			return errs[i]
		}
		if err := out.Encode(map[string]any{"gossip": results[i]}); err != nil {
			return err
		}
	}
	return nil
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
