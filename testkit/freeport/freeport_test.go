package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestAddrIsBelowTheEphemeralRangeAndFree: every pick is in the range,
// outside the kernel's ephemeral ports, and can be bound for TCP and UDP.
func TestAddrIsBelowTheEphemeralRangeAndFree(t *testing.T) {
	for range 50 {
		addr, err := Addr("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if port < RangeLow || port >= RangeHigh {
			t.Fatalf("picked %s, outside [%d, %d)", addr, RangeLow, RangeHigh)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("picked %s, which TCP cannot bind: %v", addr, err)
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			t.Fatalf("picked %s, which UDP cannot bind: %v", addr, err)
		}
		u.Close()
	}
}

// TestPickSkipsTakenPorts: a port held for TCP, and one held for UDP
// only (a gossip port), are passed over for the next free one; and the
// pick gives up with an error naming the range when nothing is free.
func TestPickSkipsTakenPorts(t *testing.T) {
	tcpAddr, err := Addr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", tcpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	udpAddr, err := Addr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	u, err := net.ListenPacket("udp", udpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	offset := func(addr string) int {
		_, p, _ := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(p)
		return n - RangeLow
	}
	// A third port, free and claimed for this test (so no other test
	// process, running side by side, takes it meanwhile). pick is handed a
	// claim that grants every port: the first two must be passed over for
	// being bound, not for being claimed.
	freeAddr, err := Addr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	grantAll := func(int) bool { return true }
	seq := []int{offset(tcpAddr), offset(udpAddr), offset(freeAddr)}
	i := 0
	got, err := pick("127.0.0.1", func(int) int {
		if i == len(seq) {
			t.Fatalf("pick asked for a fourth port after %v", seq)
		}
		i++
		return seq[i-1]
	}, grantAll)
	if err != nil || got != freeAddr {
		t.Fatalf("pick over %s (TCP taken), %s (UDP taken), %s: %q, %v; want the last", tcpAddr, udpAddr, freeAddr, got, err)
	}
	if _, err := pick("127.0.0.1", func(int) int { return offset(tcpAddr) }, grantAll); err == nil {
		t.Fatalf("pick found a port with only %s, taken, to pick", tcpAddr)
	}
}

// TestAPortIsHandedOutOnce: a port this process picked is not picked
// again, though nothing binds it yet.
func TestAPortIsHandedOutOnce(t *testing.T) {
	first, err := Addr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	_, p, _ := net.SplitHostPort(first)
	n, _ := strconv.Atoi(p)
	if _, err := pick("127.0.0.1", func(int) int { return n - RangeLow }, claim); err == nil {
		t.Fatalf("%s was handed out twice", first)
	}
}
