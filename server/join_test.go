package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/api/option"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/autoscaler/provider"
	"github.com/drover-sched/drover/autoscaler/provider/gce"
	"github.com/drover-sched/drover/autoscaler/provider/gce/gcefake"
	"github.com/drover-sched/drover/autoscaler/provider/nomad"
	"github.com/drover-sched/drover/autoscaler/provider/nomad/nomadfake"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/server/state"
)

// joinCloud is a provider as a test sees it from the machines: where a
// machine finds its join token (what its worker, and every job on it,
// reads), and everything the provider gave the machine, to search for the
// worker secret.
type joinCloud struct {
	provider.Provider
	config api.LaunchConfig
	// token is what the machine reads its join token from; given the
	// whole of what the machine was given.
	token func(name string) string
	given func(name string) string
}

// TestJoinTokensThroughGCE: the autoscaler's GCE machines (the provider
// against the fake Compute API, driven by the official client) carry a
// one-time join token in their metadata, never the worker secret; a
// machine's worker joins with it; the same token read again after the
// worker joined (as a job on the machine reads the metadata) is refused
// 401, as is a token presented for another machine and one past the
// machine's boot timeout.
func TestJoinTokensThroughGCE(t *testing.T) {
	fake := gcefake.New("proj", "zone-a")
	defer fake.Close()
	g, err := gce.New(context.Background(), gce.Options{Project: "proj", Deployment: "test", Image: "projects/drover/global/images/worker",
		ClientOptions: []option.ClientOption{option.WithEndpoint(fake.URL), option.WithoutAuthentication(), option.WithHTTPClient(fake.Client())}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	testJoinTokens(t, joinCloud{Provider: g,
		config: api.LaunchConfig{Name: "n8", Cluster: "a", MachineType: "n2-standard-8", Zone: "zone-a", CPU: 8, Memory: 32 << 30, PricePerHour: 390_000_000},
		token: func(name string) string {
			tok, _ := fake.Metadata(name, gce.MetadataJoinToken)
			return tok
		},
		given: func(name string) string {
			var all []string
			for _, key := range []string{"startup-script", gce.MetadataJoinToken, "drover-worker-secret"} {
				v, _ := fake.Metadata(name, key)
				all = append(all, key+"="+v)
			}
			return strings.Join(all, "\n")
		}})
}

// TestJoinTokensThroughNomad: the same with the Nomad provider (against
// the fake Nomad API, driven by the official client): the token is in the
// machine's job's environment, the secret nowhere in the job.
func TestJoinTokensThroughNomad(t *testing.T) {
	fake := nomadfake.New(4, 16000, 64<<10)
	defer fake.Close()
	n, err := nomad.New(nomad.Options{Address: fake.URL, Deployment: "test", Datacenters: []string{"dc1"}})
	if err != nil {
		t.Fatal(err)
	}
	testJoinTokens(t, joinCloud{Provider: n,
		config: api.LaunchConfig{Name: "c8", Cluster: "a", CPU: 8, Memory: 16 << 30, PricePerHour: 300_000_000},
		token: func(name string) string {
			if j := fake.Job(name); j != nil {
				return j.TaskGroups[0].Tasks[0].Env[provider.JoinTokenEnv]
			}
			return ""
		},
		given: func(name string) string {
			b, err := json.Marshal(fake.Job(name))
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}})
}

func testJoinTokens(t *testing.T, cloud joinCloud) {
	// The autoscaler decides when the test says (autoscaleOnce), at the
	// test's times: nothing retires a machine behind its back.
	tc := startServer(t, "", func(cfg *Config) {
		cfg.Autoscale = DefaultAutoscaleConfig()
		cfg.Autoscale.Provider = cloud.Provider
		cfg.Autoscale.Interval = time.Hour
	})
	srv := tc.srv
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitFor(t, "the leader's autoscaler to start", func() bool {
		return srv.autoscaleStarted.Load()
	})
	placement := func(boot string) {
		t.Helper()
		if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "a", Region: "r"}},
			Autoscaler:    &api.AutoscalerSettings{Enabled: true, MaxNodes: 3, BootTimeout: boot, IdleTimeout: "1h"},
			LaunchConfigs: []api.LaunchConfig{cloud.config}}); err != nil {
			t.Fatal(err)
		}
	}
	placement("10m")
	if _, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "w", Jobs: []api.JobSpec{{JobID: 1, Count: 16, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.autoscaleOnce(ctx); err != nil {
		t.Fatal(err)
	}
	machines := map[string]state.MachineInfo{}
	var names []string
	for _, m := range srv.State().Machines() {
		machines[m.ID] = m
		names = append(names, m.ID)
	}
	if len(names) != 2 {
		t.Fatalf("machines %v; want 2 of 8 cores for 16 jobs of 1", names)
	}
	a, b := names[0], names[1]
	tokens := map[string]string{}
	for _, name := range names {
		m := machines[name]
		tok := cloud.token(name)
		if m.State != state.MachineLaunching || !token.Valid(tok) || m.JoinHash != token.Hash(tok) {
			t.Fatalf("machine %s (%s) was given join token %q; the state holds hash %q", name, state.MachineStateName(m.State), tok, m.JoinHash)
		}
		if given := cloud.given(name); strings.Contains(given, "test-secret") {
			t.Fatalf("machine %s was given the worker secret:\n%s", name, given)
		}
		tokens[name] = tok
	}
	if tokens[a] == tokens[b] {
		t.Fatal("two machines were given the same join token")
	}

	activate := func(machine, joinToken, instToken string) (*api.ActivateResponse, error) {
		return api.NewClient(tc.url, "").Workers().Activate(ctx, &api.ActivateRequest{Name: machine, NodeID: fmt.Sprintf("node-%s-%s", machine, instToken[:8]),
			Machine: machine, JoinToken: joinToken, Token: instToken, CPU: 8, Memory: 16 << 30, Region: "r", Cluster: "a"})
	}
	refused := func(what, machine, joinToken, want string) {
		t.Helper()
		active := srv.State().ActiveCount()
		_, err := activate(machine, joinToken, api.NewToken())
		if !api.IsStatus(err, http.StatusUnauthorized) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %v; want 401 saying %q", what, err, want)
		}
		if n := srv.State().ActiveCount(); n != active {
			t.Fatalf("%s: %d active workers, %d before", what, n, active)
		}
	}
	// Machine b's token presented for machine a.
	refused("b's token for machine a", a, tokens[b], "not machine "+a+"'s")
	// a's worker joins with a's token.
	instTok := api.NewToken()
	res, err := activate(a, tokens[a], instTok)
	if err != nil {
		t.Fatalf("machine %s's worker with its join token: %v", a, err)
	}
	if m := machineInfo(t, srv, a); m.State != state.MachineActive || int64(m.Instance) != res.InstanceID || m.JoinUsed == 0 {
		t.Fatalf("machine %s after its worker joined: %+v", a, m.Machine)
	}
	// The worker's retry of that activation (its answer lost) finds the
	// same instance.
	if again, err := activate(a, tokens[a], instTok); err != nil || again.InstanceID != res.InstanceID {
		t.Fatalf("the retried activation: %+v %v; want instance %d again", again, err, res.InstanceID)
	}
	// A job on machine a reads the token from where the provider put it,
	// after the worker joined: spent.
	if got := cloud.token(a); got != tokens[a] {
		t.Fatalf("machine %s now reads token %q", a, got)
	}
	refused("a's token used again", a, tokens[a], "spent at")
	// b joins with its own.
	if _, err := activate(b, tokens[b], api.NewToken()); err != nil {
		t.Fatalf("machine %s's worker with its join token: %v", b, err)
	}
	// What a caller sends is bounded before anything else.
	for _, bad := range []struct {
		req  *api.ActivateRequest
		want string
	}{
		{&api.ActivateRequest{Name: a, Machine: a, JoinToken: strings.Repeat("a", 65), CPU: 1, Memory: 1}, "join_token must be 64 hex digits"},
		{&api.ActivateRequest{Name: a, Machine: a, JoinToken: tokens[a], PreviousToken: "x", CPU: 1, Memory: 1}, "previous_token must be 64 hex digits"},
		{&api.ActivateRequest{Name: a, JoinToken: tokens[a], CPU: 1, Memory: 1}, "name the machine"},
		{&api.ActivateRequest{Name: a, Machine: a, JoinToken: tokens[a], Secret: "test-secret", CPU: 1, Memory: 1}, "not both"},
	} {
		_, err := api.NewClient(tc.url, "").Workers().Activate(ctx, bad.req)
		if !api.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("activation %+v: %v; want 400 saying %q", bad.req, err, bad.want)
		}
	}

	// A third machine, whose token lives one second (its boot timeout).
	placement("1s")
	if _, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "more", Jobs: []api.JobSpec{{JobID: 1, Count: 8, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.autoscaleOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var c string
	for _, m := range srv.State().Machines() {
		if m.ID != a && m.ID != b {
			c = m.ID
		}
	}
	if c == "" || cloud.token(c) == "" {
		t.Fatalf("no third machine with a token: %+v", srv.State().Machines())
	}
	m := machineInfo(t, srv, c)
	time.Sleep(time.Until(time.Unix(0, m.JoinExpires)) + 10*time.Millisecond)
	refused("c's token past its boot timeout", c, cloud.token(c), "expired at")
	if m := machineInfo(t, srv, c); m.State != state.MachineLaunching {
		t.Fatalf("machine %s is %s; the test wants it live with its token expired", c, state.MachineStateName(m.State))
	}
}

func machineInfo(t *testing.T, srv *Server, id string) state.MachineInfo {
	t.Helper()
	for _, m := range srv.State().Machines() {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("no machine %s", id)
	return state.MachineInfo{}
}
