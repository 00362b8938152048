// Command drover-bench runs drover's benchmarks: `sched` (the control
// plane on real servers and simulated workers), `e2e` (the dev agent with
// real jobs), `failover`, `catchup` and `autoscale` (the simulator). It
// starts the drover binary beside it (or $DROVER_BINARY) for every server,
// agent and worker it needs, so the harnesses it is made of
// (testkit/bench, testcluster, simworker, testimage, mariadbtest, regions)
// are linked here and never into drover itself. `drover bench ...` runs
// it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/drover-sched/drover/testkit/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := &Main{Stdout: os.Stdout, Stderr: os.Stderr}
	err := m.Run(ctx, os.Args[1:])
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, new(*usageError)):
		fmt.Fprintln(os.Stderr, "drover-bench:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "drover-bench:", err)
		os.Exit(1)
	}
}

// Main is the command with its output streams.
type Main struct {
	Stdout, Stderr io.Writer
}

// Run runs one benchmark.
func (m *Main) Run(ctx context.Context, args []string) error {
	cmds := map[string]func(context.Context, []string) error{
		"failover": m.runBenchFailover, "catchup": m.runBenchCatchup, "sched": m.runBenchSched, "e2e": m.runBenchE2E,
		"autoscale": m.runBenchAutoscale, "nomad": m.runBenchNomad,
	}
	names := strings.Join(slices.Sorted(maps.Keys(cmds)), ", ")
	if len(args) == 0 {
		return usagef("drover-bench needs a benchmark: one of %s", names)
	}
	f, ok := cmds[args[0]]
	if !ok {
		return usagef("unknown benchmark %q; use one of %s", args[0], names)
	}
	return f(ctx, args[1:])
}

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// newFlags makes a flag set that reports errors instead of exiting.
func (m *Main) newFlags(name, argsUsage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(m.Stderr, "Usage: drover-bench %s %s\n", name, argsUsage)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses a benchmark's flags; it takes no other arguments.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return usagef("drover-bench %s takes no arguments: %s", fs.Name(), strings.Join(fs.Args(), " "))
	}
	return nil
}

// linesTo prints lines to stdout or stderr (nil when quiet: nowhere).
func (m *Main) linesTo(stdout, quiet bool) bench.Printf {
	if quiet {
		return nil
	}
	w := m.Stderr
	if stdout {
		w = m.Stdout
	}
	return func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
}

// droverBinary is the drover binary the benchmarks start: $DROVER_BINARY,
// or drover beside this program (make build puts both in bin/).
func droverBinary() (string, error) {
	if p := os.Getenv("DROVER_BINARY"); p != "" {
		return p, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(self), "drover")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("drover-bench starts the drover binary beside it (%s) or $DROVER_BINARY: %w", p, err)
	}
	return p, nil
}
