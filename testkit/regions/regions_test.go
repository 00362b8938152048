package regions

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestPathsLatencyAndCuts lays out three regions and sends over a real
// path: region 1 reaches region 2's service through the proxy with the
// latency set, an isolated region 2 is out of reach while the host still
// reaches it, a one-way cut stops what 1 sends to 2, and a heal brings
// the path back.
func TestPathsLatencyAndCuts(t *testing.T) {
	if why := Available(); why != "" {
		t.Skip(why)
	}
	cfg := DefaultConfig()
	cfg.Prefix, cfg.Subnet, cfg.Ports, cfg.ProxyBase = "drvt", netip.MustParsePrefix("10.78.0.0/24"), []uint16{7001}, 32000
	n, err := Up(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	r1, r2 := n.Regions[0], n.Regions[1]
	var ln net.Listener
	if err := r2.Do(func() (err error) { ln, err = net.Listen("tcp", r2.IPs[0].String()+":7001"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	// roundTrip dials region 2 from region 1 and echoes a byte.
	roundTrip := func(limit time.Duration) (time.Duration, error) {
		var took time.Duration
		err := r1.Do(func() error {
			start := time.Now()
			c, err := net.DialTimeout("tcp", r2.IPs[0].String()+":7001", limit)
			if err != nil {
				return err
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(limit))
			if _, err := c.Write([]byte{1}); err != nil {
				return err
			}
			if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
				return err
			}
			took = time.Since(start)
			return nil
		})
		return took, err
	}
	if _, err := roundTrip(5 * time.Second); err != nil {
		t.Fatalf("region 1 to region 2: %v", err)
	}
	if err := n.Latency(0, 1, 40, 0); err != nil {
		t.Fatal(err)
	}
	took, err := roundTrip(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The echo crosses each way once (80 ms); the proxy's connect adds
	// no latency of its own.
	if took < 80*time.Millisecond {
		t.Fatalf("a round trip with 40 ms each way took %s", took)
	}
	if err := n.Isolate(1); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(time.Second); err == nil {
		t.Fatal("region 1 reached an isolated region 2")
	}
	c, err := net.DialTimeout("tcp", r2.IPs[0].String()+":7001", time.Second)
	if err != nil {
		t.Fatalf("the host cannot reach an isolated region: %v", err)
	}
	c.Close()
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(5 * time.Second); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
	if err := n.OneWay(0, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(time.Second); err == nil {
		t.Fatal("region 1 reached region 2 through a one-way cut")
	}
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := n.Loss(100); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(time.Second); err == nil {
		t.Fatal("region 1 reached region 2 with every packet lost")
	}
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(5 * time.Second); err != nil {
		t.Fatalf("after the last heal: %v", err)
	}
}
