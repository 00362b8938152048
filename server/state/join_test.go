package state

import (
	"strings"
	"testing"
	"time"
)

// TestJoinTokenJoinsItsMachineOnce: a machine's join token lets one worker
// join that machine, once, before it expires; a second mint for the
// machine changes nothing; a token bound to one machine does not join
// another; a restarted worker rejoins with its previous instance token,
// and nothing else does. Every refusal is ErrUnauthorized.
func TestJoinTokenJoinsItsMachineOnce(t *testing.T) {
	h := autoscaled(t)
	res := h.Must(&Scale{Now: h.Tick(), Launches: []ScaleLaunch{{Config: "small", Count: 3}}}).(*ScaleResult)
	a, b, c := res.Requests[0].Machines[0], res.Requests[0].Machines[1], res.Requests[0].Machines[2]
	expires := h.Now + int64(10*time.Minute)
	h.Must(&JoinTokens{Now: h.Tick(), Tokens: []JoinToken{{Machine: a, Hash: "hash-a", Expires: expires}, {Machine: b, Hash: "hash-b", Expires: expires},
		{Machine: c, Hash: "hash-c", Expires: h.Now + 5}, {Machine: "no-such-machine", Hash: "x", Expires: expires}}})
	// A leader that minted again (another secret): the first token stays.
	h.Must(&JoinTokens{Now: h.Tick(), Tokens: []JoinToken{{Machine: a, Hash: "hash-a2", Expires: expires + 1}}})
	if m := machineByID(h, a); m.JoinHash != "hash-a" || m.JoinExpires != expires {
		t.Fatalf("machine %s holds %q until %d after a second mint; want the first", a, m.JoinHash, m.JoinExpires)
	}
	join := func(name, machine, tok, joinHash, prev string) *Activate {
		return &Activate{Now: h.Tick(), Name: name, NodeID: name, CPUMilli: 8000, Memory: 32 << 30, TokenHash: tok, Region: "east", Cluster: "a",
			Machine: machine, JoinHash: joinHash, PreviousHash: prev}
	}
	refused := func(cmd *Activate, want string) {
		t.Helper()
		if err := h.S.CheckJoin(cmd.Machine, cmd.JoinHash, cmd.PreviousHash, cmd.Now); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("CheckJoin: %v, want %q", err, want)
		}
		if err := h.MustFail(cmd, ErrUnauthorized); !strings.Contains(err.Msg, want) {
			t.Fatalf("apply refused with %q, want %q", err.Msg, want)
		}
	}
	// Machine b's token on machine a; a made-up token; no token at all
	// (which apply takes for the worker secret, checked by the API).
	refused(join("w", a, "t-x", "hash-b", ""), "not machine "+a+"'s")
	refused(join("w", a, "t-x", "made-up", ""), "not machine "+a+"'s")
	if err := h.S.CheckJoin(a, "", "", h.Now); err == nil {
		t.Fatal("CheckJoin without a token accepted")
	}
	refused(join("w", "no-such-machine", "t-x", "x", ""), "not one the autoscaler has live")
	// Expired (machine c's token ended 5 ns after its mint).
	refused(join("wc", c, "t-c", "hash-c", ""), "expired at")

	// a's worker joins: the token is spent, and the activation repeated
	// (the worker's retry racing its first try) finds the same instance.
	first := join("wa", a, "t-a", "hash-a", "")
	inst := h.Must(first).(*ActivateResult).Instance
	again := *first
	again.Now = h.Tick()
	if got := h.Must(&again).(*ActivateResult).Instance; got != inst {
		t.Fatalf("the repeated activation made instance %d; want %d again", got, inst)
	}
	if m := machineByID(h, a); m.State != MachineActive || m.Instance != inst || m.JoinUsed == 0 {
		t.Fatalf("machine %+v: want active on instance %d with its token spent", m, inst)
	}
	// A job that read the token after the worker joined: spent.
	refused(join("fake", a, "t-fake", "hash-a", ""), "spent at")
	// The worker restarted with its data dir: its previous instance
	// token rejoins (the token spent or not), a new instance replaces the
	// old. Another machine's worker's token does not.
	refused(join("fake", a, "t-fake", "hash-a", "t-other"), "spent at")
	inst2 := h.Must(join("wa", a, "t-a2", "hash-a", "t-a")).(*ActivateResult).Instance
	if m := machineByID(h, a); m.Instance != inst2 || inst2 == inst {
		t.Fatalf("after the rejoin machine %s is on instance %d; want a new one, %d", a, m.Instance, inst2)
	}
	// Its instance before that no longer rejoins: only the last worker's.
	refused(join("wa", a, "t-a3", "", "t-a"), "not that of the machine's last worker")
	// b's worker joins with its own token.
	h.Must(join("wb", b, "t-b", "hash-b", ""))

	// A worker linked by the operator (the secret, no join hash) spends
	// the token too: a machine has one worker.
	res = h.Must(&Scale{Now: h.Tick(), Launches: []ScaleLaunch{{Config: "spot", Count: 1}}}).(*ScaleResult)
	d := res.Requests[0].Machines[0]
	h.Must(&JoinTokens{Now: h.Tick(), Tokens: []JoinToken{{Machine: d, Hash: "hash-d", Expires: expires}}})
	h.Must(join("wd", d, "t-d", "", ""))
	refused(join("fake", d, "t-fake2", "hash-d", ""), "spent at")
	// Tokens survive a snapshot and a replay of the log.
	if err := h.Restored().CheckJoin(a, "hash-a", "", h.Now); err == nil || !strings.Contains(err.Error(), "spent at") {
		t.Fatalf("after a restore, machine %s's spent token: %v", a, err)
	}
}

func machineByID(h *Harness, id string) MachineInfo {
	for _, m := range h.S.Machines() {
		if m.ID == id {
			return m
		}
	}
	h.T.Fatalf("no machine %s", id)
	return MachineInfo{}
}
