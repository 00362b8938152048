package server

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/server/state"
)

// floatPricesFixture is what the server that wrote testdata/float-prices
// answered before it stopped (expected.json): float dollars, read here by
// today's types (each rounded once to the nearest nano-dollar).
type floatPricesFixture struct {
	Autoscaler api.AutoscalerStatus `json:"autoscaler"`
	Clusters   []api.Cluster        `json:"clusters"`
}

// wantPrices is the fixture's autoscaler as integers: what its
// placement configs said, exactly.
var wantPrices = struct {
	cap            money.Rate
	configs        map[string][2]money.Rate // price, cap
	machines       map[string]money.Rate    // by config and launch
	spend          money.Rate
	pools          map[string]money.Rate
	liveByConfig   map[string]int
	machinesByName int
}{
	cap:     2_500_000_000,
	configs: map[string][2]money.Rate{"c4": {100_000_000, 700_000_000}, "c8": {300_000_000, 1_600_000_000}},
	// Launched by the entry at index 8 (in the snapshot, at the first
	// prices) and 13 (in the log, after the second config).
	machines:       map[string]money.Rate{"8/c4": 100_000_000, "8/c8": 250_000_000, "13/c4": 100_000_000, "13/c8": 300_000_000},
	spend:          2_300_000_000, // the old server said 2.3000000000000003
	pools:          map[string]money.Rate{"default": 380_000_000, "cheap": 70_000_000},
	liveByConfig:   map[string]int{"c4": 7, "c8": 6},
	machinesByName: 13,
}

// checkFloatPrices checks an autoscaler status and the clusters against
// the fixture's integers and against what the old server answered.
func checkFloatPrices(t *testing.T, what string, st *api.AutoscalerStatus, clusters []api.Cluster, old *floatPricesFixture) {
	t.Helper()
	if st.Settings.MaxPerHour != wantPrices.cap || st.Settings.MaxPerHour != old.Autoscaler.Settings.MaxPerHour {
		t.Errorf("%s: the autoscaler's cap is %s (%d)", what, st.Settings.MaxPerHour, int64(st.Settings.MaxPerHour))
	}
	if len(st.LaunchConfigs) != len(wantPrices.configs) {
		t.Fatalf("%s: launch configs %+v", what, st.LaunchConfigs)
	}
	for i, c := range st.LaunchConfigs {
		w := wantPrices.configs[c.Name]
		o := old.Autoscaler.LaunchConfigs[i]
		if c.PricePerHour != w[0] || c.MaxPerHour != w[1] || c.PricePerHour != o.PricePerHour || c.MaxPerHour != o.MaxPerHour || c.Live != wantPrices.liveByConfig[c.Name] {
			t.Errorf("%s: launch config %s at %s an hour, cap %s, %d live; want %s, %s, %d", what, c.Name, c.PricePerHour, c.MaxPerHour, c.Live, w[0], w[1], wantPrices.liveByConfig[c.Name])
		}
	}
	if len(st.Machines) != wantPrices.machinesByName {
		t.Fatalf("%s: %d machines", what, len(st.Machines))
	}
	var sum money.Rate
	for _, m := range st.Machines {
		launch := strings.Split(m.ID, "-")[1] // drover-<index>-<seq>
		if want := wantPrices.machines[launch+"/"+m.Config]; m.PricePerHour != want {
			t.Errorf("%s: machine %s (%s) at %s an hour, want %s", what, m.ID, m.Config, m.PricePerHour, want)
		}
		sum = sum.Add(m.PricePerHour)
	}
	if st.SpendPerHour != wantPrices.spend || sum != wantPrices.spend || st.Nodes != wantPrices.machinesByName || st.SpendPerHour != old.Autoscaler.SpendPerHour {
		t.Errorf("%s: %d machines spend %s an hour (summed here %s), want %s", what, st.Nodes, st.SpendPerHour, sum, wantPrices.spend)
	}
	if len(clusters) != 1 || len(clusters[0].Pools) != 2 {
		t.Fatalf("%s: clusters %+v", what, clusters)
	}
	for i, p := range clusters[0].Pools {
		if p.PricePerHour != wantPrices.pools[p.Name] || p.PricePerHour != old.Clusters[0].Pools[i].PricePerHour {
			t.Errorf("%s: pool %s at %s an hour, want %s", what, p.Name, p.PricePerHour, wantPrices.pools[p.Name])
		}
	}
}

// TestOpensDataDirWithFloatPrices opens a data dir written by the drover
// that kept the autoscaler's prices and caps, and pools' prices, in
// float64 dollars (testdata/float-prices, README.md there): a Raft
// snapshot (version 2) whose state holds float launch configs, caps and
// machines, and log entries after it of the old ApplyPlacement type (new
// prices and caps) and the Scale that launched machines at them. The new
// server reports every price and cap as the decimal it was given, exactly,
// and the live machines' spend as $2.30 an hour where the old server
// summed 2.3000000000000003; a snapshot of it round-trips to the same
// bytes; and the old operator snapshot restores to the same prices.
func TestOpensDataDirWithFloatPrices(t *testing.T) {
	ctx := context.Background()
	data, err := os.ReadFile("testdata/float-prices/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var old floatPricesFixture
	if err := json.Unmarshal(data, &old); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"spend_per_hour": 2.3000000000000003`)) {
		t.Fatal("the fixture's old server summed its spend exactly: it shows nothing")
	}
	// The old server ran with -node-id fixture (it wrote no node-id file),
	// and with no autoscaler here nothing decides anew.
	tc := startServer(t, copyDir(t, "testdata/float-prices/datadir"), func(c *Config) { c.NodeID = "fixture" })
	st, err := tc.admin.AutoscalerStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clusters, err := tc.admin.ListClusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkFloatPrices(t, "the data dir", st, clusters, &old)

	// The state read back through a snapshot of today's version gives
	// the same bytes again.
	restored := restoreSameBytes(t, tc.srv.state)
	if err := restored.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	a, cfgs, _ := restored.AutoscalerSettings()
	if a.MaxPerHour != wantPrices.cap || !slices.ContainsFunc(cfgs, func(c state.LaunchConfig) bool { return c.Name == "c8" && c.MaxPerHour == 1_600_000_000 }) {
		t.Fatalf("restored: %+v %+v", a, cfgs)
	}

	// The old operator snapshot (version 2, the final state) restores to
	// the same prices.
	fresh := startServer(t, "", nil)
	op, err := os.ReadFile("testdata/float-prices/operator.snap")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.admin.Operator().SnapshotRestore(ctx, op); err != nil {
		t.Fatal(err)
	}
	// Its users are the old server's: its root token reads it.
	root, err := os.ReadFile("testdata/float-prices/datadir/root.token")
	if err != nil {
		t.Fatal(err)
	}
	oldAdmin := api.NewClient(fresh.url, strings.TrimSpace(string(root)))
	if st, err = oldAdmin.AutoscalerStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if clusters, err = oldAdmin.ListClusters(ctx); err != nil {
		t.Fatal(err)
	}
	checkFloatPrices(t, "the operator snapshot", st, clusters, &old)
}

// TestPlacementPricesAreBounded: a price or a spend cap that is negative,
// past $1e9 an hour, past what an integer of nano-dollars holds, or not
// a number is refused with 400 naming the bound before it reaches the
// log; the decimals a person writes are kept exactly, and a float's
// extra digits (0.30000000000000004) round once to the nano-dollar.
func TestPlacementPricesAreBounded(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	tok := tc.admin.Token()
	lc := func(price, cap string) string {
		return `{"clusters": [{"name": "a", "region": "r"}], "launch_configs": [{"name": "l", "cluster": "a", "cpu": 4, "memory": 1073741824, "price_per_hour": ` + price + `, "max_per_hour": ` + cap + `}]}`
	}
	for _, c := range []struct{ body, want string }{
		{lc("-0.1", "0"), "launch config l: price_per_hour: $-0.1 an hour is out of range (0 to 1000000000 dollars an hour)"},
		{lc("1000000000.000000001", "0"), "launch config l: price_per_hour: $1000000000.000000001 an hour is out of range"},
		{lc("0.1", "1e99"), "launch config l: max_per_hour: $9223372036.854775807 an hour is out of range (0 to 1000000000"},
		{lc("0.1", "-1e99"), "max_per_hour: $-9223372036.854775807 an hour is out of range"},
		{lc(`"0.1"`, "0"), "is not a number of dollars"},
		{lc("1e999999999", "0"), "is not a number of dollars"},
		{`{"autoscaler": {"enabled": true, "max_per_hour": -2.5}}`, "autoscaler: max_per_hour: $-2.5 an hour is out of range"},
		{`{"clusters": [{"name": "a", "region": "r", "pools": [{"name": "p", "price_per_hour": 5e9}]}]}`, "pool a/p: price_per_hour: $5000000000 an hour is out of range"},
	} {
		code, msg := tc.raw("POST", "/api/v1/placement", tok, c.body)
		if code != 400 || !strings.Contains(msg, c.want) {
			t.Errorf("POST %.120s: %d %q, want 400 naming %q", c.body, code, msg, c.want)
		}
	}
	if code, msg := tc.raw("POST", "/api/v1/placement", tok, lc("0.30000000000000004", "1000000000")); code != 200 {
		t.Fatalf("a float's price: %d %s", code, msg)
	}
	st, err := tc.admin.AutoscalerStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.LaunchConfigs) != 1 || st.LaunchConfigs[0].PricePerHour != 300_000_000 || st.LaunchConfigs[0].MaxPerHour != 1_000_000_000*money.DollarPerHour {
		t.Fatalf("launch configs %+v", st.LaunchConfigs)
	}
	// The wire says the decimals, exactly.
	data, err := json.Marshal(st.LaunchConfigs[0].LaunchConfig)
	if err != nil || !bytes.Contains(data, []byte(`"price_per_hour":0.3,`)) || !bytes.Contains(data, []byte(`"max_per_hour":1000000000`)) {
		t.Fatalf("JSON %s %v", data, err)
	}
}
