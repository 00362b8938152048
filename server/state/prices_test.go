package state

import (
	"bytes"
	"testing"

	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/money"
)

// TestCloudPrices: a config that takes the cloud's price gets each price
// read with a rate version from then on, keeps it when the placement is
// applied again, and loses it when its machine changes; a config with a
// fixed price, or gone, is passed over; a price of 0 or past the bound
// is refused whole; a resource at billing.MaxVersions drops its oldest
// superseded version instead of refusing the price.
func TestCloudPrices(t *testing.T) {
	h := newHarness(t)
	placement := func(machineType string) *ApplyPlacement {
		return &ApplyPlacement{Now: h.Tick(), Clusters: []Cluster{{Name: "a", Region: "r"}}, Autoscaler: &Autoscaler{Enabled: true},
			LaunchConfigs: []LaunchConfig{
				{Name: "cloud", Cluster: "a", MachineType: machineType, Zone: "r-a", CPUMilli: 8000, Memory: 32 << 30, PriceFromCloud: true},
				{Name: "fixed", Cluster: "a", MachineType: "n2-standard-8", Zone: "r-a", CPUMilli: 8000, Memory: 32 << 30, PricePerHour: 400_000_000}}}
	}
	config := func(name string) LaunchConfig {
		_, cfgs, _ := h.S.AutoscalerSettings()
		for _, c := range cfgs {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no launch config %s", name)
		return LaunchConfig{}
	}
	h.Must(placement("n2-standard-8"))
	if c := config("cloud"); c.PricePerHour != 0 || c.PriceAt != 0 {
		t.Fatalf("before any price: %+v", c)
	}
	at := h.Tick()
	res := h.Must(&SetCloudPrices{Now: at, Prices: []CloudPrice{{"cloud", 388_472_000}, {"fixed", 1}, {"gone", 5}}}).(*SetCloudPricesResult)
	if c, f := config("cloud"), config("fixed"); res.Changed != 1 || c.PricePerHour != 388_472_000 || c.PriceAt != at || f.PricePerHour != 400_000_000 {
		t.Fatalf("after a price: %+v; cloud %+v, fixed %+v", res, c, f)
	}
	rate, ok := billing.Book(h.S.rates).At("compute/default/cloud", at)
	if !ok || rate.PerHour == 0 || rate.ValidFrom != at {
		t.Fatalf("the config's core rate: %+v %v", rate, ok)
	}
	// Applied again as it was, the cloud's price stays; with another
	// machine type, it waits for the cloud's price of that one.
	h.Must(placement("n2-standard-8"))
	if c := config("cloud"); c.PricePerHour != 388_472_000 || c.PriceAt != at {
		t.Fatalf("after the placement again: %+v", c)
	}
	h.Must(placement("n2-highmem-8"))
	if c := config("cloud"); c.PricePerHour != 0 || c.PriceAt != 0 {
		t.Fatalf("after another machine type: %+v", c)
	}
	h.MustFail(&SetCloudPrices{Now: h.Tick(), Prices: []CloudPrice{{"cloud", 0}}}, ErrInvalid)
	h.MustFail(&SetCloudPrices{Now: h.Tick(), Prices: []CloudPrice{{"cloud", MaxPricePerHour + 1}}}, ErrInvalid)
	// A price that changes every time, past the versions kept.
	for i := range billing.MaxVersions + 20 {
		h.Must(&SetCloudPrices{Now: h.Tick(), Prices: []CloudPrice{{"cloud", money.Rate(500_000_000 + i)}}})
	}
	vs := h.S.rates["compute/default/cloud"]
	if c := config("cloud"); len(vs) != billing.MaxVersions || vs[len(vs)-1].PerHour == 0 || c.PricePerHour != money.Rate(500_000_000+billing.MaxVersions+19) {
		t.Fatalf("%d versions kept (want %d), config %+v", len(vs), billing.MaxVersions, c)
	}
	// The prices and when they were read survive a snapshot.
	fresh := New()
	if err := fresh.Restore(bytes.NewReader(SnapshotBytes(t, h.S))); err != nil {
		t.Fatal(err)
	}
	_, cfgs, _ := fresh.AutoscalerSettings()
	for _, c := range cfgs {
		if c.Name == "cloud" && (c.PricePerHour != config("cloud").PricePerHour || c.PriceAt != config("cloud").PriceAt || !c.PriceFromCloud) {
			t.Fatalf("restored %+v, want %+v", c, config("cloud"))
		}
	}
}
