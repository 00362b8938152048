package cluster

import (
	"context"
	"strings"
	"testing"

	"github.com/drover-sched/drover/testkit/fakeconsul"
)

func TestConsulDiscoveryWithOfficialClient(t *testing.T) {
	fc := fakeconsul.New()
	defer fc.Close()
	var ds []*consulDiscovery
	for i, id := range []string{"a", "b"} {
		d, err := newConsulDiscovery(fc.Addr())
		if err != nil {
			t.Fatal(err)
		}
		gossip := []string{"127.0.0.1:7001", "127.0.0.2:7001"}[i]
		if err := d.register(id, gossip, "raft-"+id, "127.0.0.1:465"+id, id == "b"); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	found, err := ds[0].discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(found, ",") != "127.0.0.1:7001,127.0.0.2:7001" {
		t.Fatalf("discovered %v", found)
	}
	if check := fc.Check("drover-server-a"); !strings.Contains(check, `"http://127.0.0.1:465a/api/v1/health"`) {
		t.Fatalf("health check %s", check)
	}
	// A server serving HTTPS is checked over HTTPS.
	if check := fc.Check("drover-server-b"); !strings.Contains(check, `"https://127.0.0.1:465b/api/v1/health"`) || !strings.Contains(check, `"TLSSkipVerify":true`) {
		t.Fatalf("health check of an HTTPS server %s", check)
	}
	if err := ds[1].deregister(); err != nil {
		t.Fatal(err)
	}
	if got := fc.Services(); len(got) != 1 || got[0] != "drover-server-a" {
		t.Fatalf("after deregister: %v", got)
	}
}
