package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// runBench runs drover-bench, the benchmarks' own binary, with the same
// arguments: the harnesses the benchmarks are made of (clusters of
// processes, simulated workers, a registry, MariaDB, network namespaces)
// are linked into it, never into drover. It is looked for beside this
// binary, then on PATH, and starts this binary for its servers, agents
// and workers.
func (m opsCmds) runBench(ctx context.Context, args []string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	path := filepath.Join(filepath.Dir(self), "drover-bench")
	if _, err := os.Stat(path); err != nil {
		if path, err = exec.LookPath("drover-bench"); err != nil {
			return fmt.Errorf("drover bench runs drover-bench, which is neither beside %s nor on PATH: build it (make build, or go build ./cmd/drover-bench)", self)
		}
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, m.Stdout, m.Stderr
	cmd.Env = append(os.Environ(), "DROVER_BINARY="+self)
	// Interrupted, it stops its clusters itself.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 {
		return &exitError{code: ee.ExitCode()}
	}
	return err
}
