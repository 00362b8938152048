package bench

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"
)

// Floor starts argv n times from par goroutines of this process, each
// waiting for its process before starting the next, and returns how many
// it ran a second: what this machine can fork, exec and reap of the
// command with nothing else in the way, the floor `bench e2e -floor` holds
// drover's end-to-end rate against (a job is at least that: a process
// started and reaped).
func Floor(ctx context.Context, argv []string, par, n int) (float64, error) {
	if len(argv) == 0 || par < 1 || n < 1 {
		return 0, fmt.Errorf("floor: a command, at least one goroutine and one run")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return 0, fmt.Errorf("floor: %w", err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, par)
	start := time.Now()
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := ctx.Err(); err != nil {
					errs <- err
					return
				}
				cmd := exec.Command(path, argv[1:]...)
				cmd.Args[0] = argv[0]
				if err := cmd.Run(); err != nil {
					errs <- fmt.Errorf("floor: %s: %w", argv[0], err)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	return float64(n) / took.Seconds(), nil
}
