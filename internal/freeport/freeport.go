// Package freeport picks the ports that tests and benchmarks hand to
// servers which bind them later (a drover server started as a process, a
// dev agent that restarts on its address, mariadbd before and after an
// outage). It is the one rule for it, so every harness avoids the same
// trap: a port found by listening on port 0 and closing comes from the
// kernel's ephemeral range, which it also hands to outgoing connections,
// and on a busy machine one of those took such a port before the server
// bound it ("bind: address already in use").
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
)

// Range is where ports are picked: below Linux's ephemeral range (32768
// up by default), so no outgoing connection is given one.
const (
	RangeLow  = 20000
	RangeHigh = 32000
)

// tries bounds the picks before Addr gives up.
const tries = 200

// Addr returns host:port on ip with a port in [RangeLow, RangeHigh) that is
// free now for TCP and UDP (gossip listens on both). A component that can
// be handed an open listener should be: a port picked here can still be
// taken by another test's pick before it is bound, though picks at random
// over 12000 ports rarely meet.
func Addr(ip string) (string, error) { return pick(ip, rand.IntN) }

// pick is Addr with the randomness injected (intn(n) is in [0, n)).
func pick(ip string, intn func(int) int) (string, error) {
	for range tries {
		addr := net.JoinHostPort(ip, strconv.Itoa(RangeLow+intn(RangeHigh-RangeLow)))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		return addr, nil
	}
	return "", fmt.Errorf("find a free port on %s: %d ports between %d and %d were taken", ip, tries, RangeLow, RangeHigh)
}
