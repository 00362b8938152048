package server

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time the calling OS thread has used; the
// scheduler's goroutine is locked to its thread, so the difference across
// a round is what the round itself cost, whatever else runs on the
// machine. ok is false where the clock cannot be read.
func threadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

// threadID returns the calling OS thread's id (the scheduler's goroutine
// is locked to its thread, so its lock waits can be told apart).
func threadID() int64 { return int64(unix.Gettid()) }
