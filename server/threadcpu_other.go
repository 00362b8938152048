//go:build !linux

package server

import "time"

// threadCPU is not measured off Linux.
func threadCPU() (time.Duration, bool) { return 0, false }

// threadID is not known off Linux: no wait is counted as the round's.
func threadID() int64 { return -2 }
