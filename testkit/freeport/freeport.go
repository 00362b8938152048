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
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
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
// free now for TCP and UDP (gossip listens on both), and that no other
// pick hands out again while this process lives: not this process's
// (they are remembered) nor another's (each picked port is claimed with a
// lock file that this process holds; go test runs packages in processes
// of their own, side by side). A component that can be handed an open
// listener should be.
func Addr(ip string) (string, error) { return pick(ip, rand.IntN, claim) }

var (
	claimMu sync.Mutex
	claimed = map[int]*os.File{} // ports this process handed out, with their locks
)

// claim takes port for this process: false when this process or another
// has it.
func claim(port int) bool {
	claimMu.Lock()
	defer claimMu.Unlock()
	if _, ok := claimed[port]; ok {
		return false
	}
	dir := filepath.Join(os.TempDir(), "drover-freeport")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true // no lock files: the random pick alone
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		f.Close()
		return false // another process holds it
	}
	claimed[port] = f // held until the process ends
	return true
}

// pick is Addr with the randomness and the claim injected (intn(n) is in
// [0, n); take reports whether the port is this caller's now).
func pick(ip string, intn func(int) int, take func(int) bool) (string, error) {
	for range tries {
		port := RangeLow + intn(RangeHigh-RangeLow)
		addr := net.JoinHostPort(ip, strconv.Itoa(port))
		if !free(addr) || !take(port) {
			continue
		}
		return addr, nil
	}
	return "", fmt.Errorf("find a free port on %s: %d ports between %d and %d were taken", ip, tries, RangeLow, RangeHigh)
}

// free reports whether addr can be bound now for TCP and UDP.
func free(addr string) bool {
	{
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return false
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			return false
		}
		u.Close()
		return true
	}
}
