package gce

import (
	"context"
	"fmt"
	"testing"
	"time"

	cloudbilling "google.golang.org/api/cloudbilling/v1"

	"github.com/drover-sched/drover/autoscaler"
	"github.com/drover-sched/drover/autoscaler/provider/gce/gcefake"
	"github.com/drover-sched/drover/money"
)

// catalog is a Compute Engine catalog in the Catalog API's shape: N2 and
// E2 cores and RAM on demand and spot in us-central1, N2 in
// europe-west1, and SKUs that must not be read as a machine's (custom
// cores, a commitment, a GPU, a licence, N2 cores billed per month).
func catalog() []*cloudbilling.Sku {
	return []*cloudbilling.Sku{
		gcefake.SKU("0001-N2CO-RECE", "N2 Instance Core running in Americas", "N2Standard", "OnDemand", "us-central1", "h", 0.031611),
		gcefake.SKU("0002-N2RA-MUCE", "N2 Instance Ram running in Americas", "N2Standard", "OnDemand", "us-central1", "GiBy.h", 0.004237),
		gcefake.SKU("0003-N2SP-COCE", "Spot Preemptible N2 Instance Core running in Americas", "N2Standard", "Preemptible", "us-central1", "h", 0.007681),
		gcefake.SKU("0004-N2SP-RACE", "Spot Preemptible N2 Instance Ram running in Americas", "N2Standard", "Preemptible", "us-central1", "GiBy.h", 0.001029),
		gcefake.SKU("0005-E2CO-RECE", "E2 Instance Core running in Americas", "CPU", "OnDemand", "us-central1", "h", 0.021811),
		gcefake.SKU("0006-E2RA-MUCE", "E2 Instance Ram running in Americas", "RAM", "OnDemand", "us-central1", "GiBy.h", 0.002923),
		gcefake.SKU("0007-N2CO-REEU", "N2 Instance Core running in EMEA", "N2Standard", "OnDemand", "europe-west1", "h", 0.034806),
		gcefake.SKU("0008-N2RA-MUEU", "N2 Instance Ram running in EMEA", "N2Standard", "OnDemand", "europe-west1", "GiBy.h", 0.004664),
		gcefake.SKU("0009-N2CU-STCE", "N2 Custom Instance Core running in Americas", "N2Standard", "OnDemand", "us-central1", "h", 0.033191),
		gcefake.SKU("0010-N2CM-1YCE", "Commitment v1: N2 Cpu in Americas for 1 Year", "CPU", "Commit1Yr", "us-central1", "h", 0.019915),
		gcefake.SKU("0011-T4GP-UCE0", "Nvidia Tesla T4 GPU running in Americas", "GPU", "OnDemand", "us-central1", "h", 0.35),
		gcefake.SKU("0012-N2MO-NTHL", "N2 Instance Core running in Americas", "N2Standard", "OnDemand", "us-east1", "h.mo", 23.1),
		gcefake.SKU("0013-N2DS-PCOR", "Spot Preemptible N2D AMD Instance Core running in Americas", "CPU", "Preemptible", "us-central1", "h", 0.006662),
		gcefake.SKU("0014-N2DS-PRAM", "Spot Preemptible N2D AMD Instance Ram running in Americas", "RAM", "Preemptible", "us-central1", "GiBy.h", 0.000893),
		gcefake.SKU("0015-M3CO-RECE", "M3 Memory-optimized Instance Core running in Americas", "CPU", "OnDemand", "us-central1", "h", 0.0463),
		gcefake.SKU("0016-M3RA-MUCE", "M3 Memory-optimized Instance Ram running in Americas", "RAM", "OnDemand", "us-central1", "GiBy.h", 0.0062),
	}
}

// TestPricesFromTheBillingCatalog: the provider prices configs from the
// Catalog's SKU list, read through Google's official client from a fake
// of its wire format (several pages): cores and memory at their family's
// regional rates, spot at the Preemptible ones; a config of a family,
// region or shape the Catalog does not price gets 0.
func TestPricesFromTheBillingCatalog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, fake := newGCE(t)
	// Many SKUs of other services' families first, so the ones that
	// matter are on a later page.
	var skus []*cloudbilling.Sku
	for i := range 7000 {
		skus = append(skus, gcefake.SKU(fmt.Sprintf("F%03d-0000-0000", i), fmt.Sprintf("Z%d Instance Core running in Americas", i), "CPU", "OnDemand", "us-west9", "h", 0.01))
	}
	fake.SetSKUs(append(skus, catalog()...))
	configs := []autoscaler.LaunchConfig{
		{Name: "n2-8", MachineType: "n2-standard-8", Zone: "us-central1-a", CPUMilli: 8000, Memory: 32 << 30},
		{Name: "n2-8-spot", MachineType: "n2-standard-8", Zone: "us-central1-b", Spot: true, CPUMilli: 8000, Memory: 32 << 30},
		{Name: "e2-4", MachineType: "e2-highmem-4", Zone: "us-central1-c", CPUMilli: 4000, Memory: 32 << 30},
		{Name: "n2-eu", MachineType: "n2-standard-8", Zone: "europe-west1-b", CPUMilli: 8000, Memory: 32 << 30},
		{Name: "c2", MachineType: "c2-standard-8", Zone: "us-central1-a", CPUMilli: 8000, Memory: 32 << 30},
		{Name: "e2-spot", MachineType: "e2-standard-4", Zone: "us-central1-a", Spot: true, CPUMilli: 4000, Memory: 16 << 30},
		{Name: "n2-east", MachineType: "n2-standard-8", Zone: "us-east1-b", CPUMilli: 8000, Memory: 32 << 30},
		{Name: "gpu", MachineType: "n1-standard-8", Zone: "us-central1-a", CPUMilli: 8000, Memory: 30 << 30, GPUType: "nvidia-tesla-t4", GPUs: 1},
		{Name: "n2d-spot", MachineType: "n2d-standard-4", Zone: "us-central1-f", Spot: true, CPUMilli: 4000, Memory: 16 << 30},
		{Name: "m3", MachineType: "m3-ultramem-32", Zone: "us-central1-c", CPUMilli: 32000, Memory: 976 << 30},
	}
	prices, err := g.Prices(ctx, configs)
	if err != nil {
		t.Fatal(err)
	}
	want := []money.Rate{
		8*31_611_000 + 32*4_237_000, // $0.388472 an hour: GCE's list price of n2-standard-8
		8*7_681_000 + 32*1_029_000,
		4*21_811_000 + 32*2_923_000,
		8*34_806_000 + 32*4_664_000,
		0, // C2 is not "C2 Instance Core" in the Catalog
		0, // no E2 spot SKUs in this catalog
		0, // us-east1's N2 SKU is per month
		0, // a GPU's price is not read
		4*6_662_000 + 16*893_000,
		32*46_300_000 + 976*6_200_000,
	}
	for i := range configs {
		if prices[i] != want[i] {
			t.Errorf("%s: %s an hour, want %s", configs[i].Name, prices[i], want[i])
		}
	}
	if n := fake.SKULists(); n != 2 {
		t.Errorf("%d pages listed, want 2 (5,000 SKUs a page)", n)
	}
}
