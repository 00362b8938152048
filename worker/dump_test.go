package worker

import (
	"errors"
	"testing"

	"github.com/vishvananda/netlink"
)

// A dump another change interrupted is asked again: CI saw a dev agent
// refuse to start ("list links: results may be incomplete or
// inconsistent") while other tests' namespaces came and went.
func TestInterruptedDumpsAreAskedAgain(t *testing.T) {
	calls := 0
	got, err := dumpAll(func() ([]int, error) {
		calls++
		if calls < 3 {
			return []int{1}, netlink.ErrDumpInterrupted
		}
		return []int{1, 2}, nil
	})
	if err != nil || len(got) != 2 || calls != 3 {
		t.Fatalf("got %v, %v after %d calls; want the complete [1 2] from the third", got, err, calls)
	}

	calls = 0
	_, err = dumpAll(func() ([]int, error) { calls++; return nil, netlink.ErrDumpInterrupted })
	if !errors.Is(err, netlink.ErrDumpInterrupted) || calls != dumpAttempts {
		t.Fatalf("a dump interrupted every time: %v after %d calls; want ErrDumpInterrupted after %d", err, calls, dumpAttempts)
	}

	other := errors.New("permission denied")
	calls = 0
	if _, err = dumpAll(func() ([]int, error) { calls++; return nil, other }); !errors.Is(err, other) || calls != 1 {
		t.Fatalf("another error: %v after %d calls; want it at once", err, calls)
	}
}
