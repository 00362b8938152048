package server

import (
	"testing"
	"time"
)

func TestTimingsFor(t *testing.T) {
	lan, err := TimingsFor(1)
	if err != nil || lan.ElectionTimeout != 500*time.Millisecond || lan.LeaderLeaseTimeout != 250*time.Millisecond ||
		lan.GossipInterval != time.Second || lan.LostTimeout != 60*time.Second {
		t.Fatalf("LAN: %+v %v", lan, err)
	}
	wan, err := TimingsFor(5)
	if err != nil || wan.HeartbeatTimeout != 2500*time.Millisecond || wan.GossipInterval != 5*time.Second || wan.LostTimeout != 60*time.Second {
		t.Fatalf("WAN: %+v %v", wan, err)
	}
	if far, _ := TimingsFor(10); far.LostTimeout != 100*time.Second || far.GossipInterval != 5*time.Second {
		t.Fatalf("10: %+v", far)
	}
	for _, m := range []int{0, 11, -1} {
		if _, err := TimingsFor(m); err == nil {
			t.Errorf("multiplier %d accepted", m)
		}
	}
}
