// Command drover is the drover CLI, server, worker and dev agent in one
// binary.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := NewMain()
	err := m.Run(ctx, os.Args[1:])
	os.Exit(m.exitCode(err))
}

// Main holds the CLI's streams so tests can run commands in process.
type Main struct {
	Stdout io.Writer
	Stderr io.Writer
	// Client builds the API client; tests may replace it.
	Client func() *api.Client
}

// NewMain returns a Main wired to the process's streams and environment.
func NewMain() *Main {
	return &Main{Stdout: os.Stdout, Stderr: os.Stderr, Client: api.ClientFromEnv}
}

// exitError carries a specific exit code (2: the batch did not fully
// succeed). Its message, if any, has been printed already.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// usageError is a mistake in how a command was invoked.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

func (m *Main) exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	// A local error (a config file's diagnostics) may run over lines; what
	// the server said may not.
	msg := err.Error()
	var ae *api.Error
	if errors.As(err, &ae) {
		msg = escape(msg)
	} else {
		msg = escapeLines(msg)
	}
	fmt.Fprintf(m.Stderr, "Error: %s\n", msg)
	return 1
}

const usage = `drover: a multi-tenant batch job scheduler

Usage: drover <command> [arguments]

Running drover:
  agent            run a dev agent: one server and local workers (agent -dev)
  server           run a control-plane server (3 or 5 make a cluster)
  worker           run a worker that joins a cluster

Batches and jobs:
  run FILE         submit a jobspec (-wait to wait for it)
  validate FILE    check a jobspec and print every problem as file:line:col
  batch list       list batches         batch status ID     show a batch
  batch cancel ID  cancel a batch       batch wait ID       wait for a batch
  batch retry ID [-state S] [-job N]    run its failed jobs again
  batch efficiency ID                   what its jobs used of what they asked, and what to ask
  job list BATCH   list a batch's jobs  job status BATCH JOB
  job logs BATCH JOB                    print a job's log
  job why BATCH JOB                     say why a job waits (or where it runs)
  job restart BATCH JOB                 stop a running attempt and run the job again

Placement:
  region list            regions with their clusters' capacity
  cluster list | status NAME | groups
  autoscaler status      machines, spend against the cap, the last decision and why
  autoscaler delete-config NAME   remove a launch config (its machines are deleted)
  cluster disable NAME -reason "..." [-evacuate] | enable NAME
  cluster delete NAME | delete-group NAME   remove a declared cluster or cluster group
  queue tree | list      the queue tree: weights, guarantees, caps and use
  queue show PATH        one queue's settings and use
  queue set PATH [-weight N] [-guarantee-cpu N] [-borrow-cpu N|none] [-max-jobs N] [-project P]...
  queue delete PATH      remove a queue without children
  queue route PATH -to C route a queue's new attempts to clusters (-clear: anywhere)
  queue recommend        guarantees, weights and max_running from recorded usage (-hcl: for placement apply)
  queue slo [-days 30]   SLO success per workflow, tier and queue; usage/capacity
  queue report -by cluster   usage/capacity of each cluster by tier and queue (instance, vcore, memory hours)
  queue rebalance [-apply]   move leaf queues from clusters above -high to clusters below -low
  queue auto-apply TREE  regenerate a tree's settings from history now, as its auto_apply does (-dry-run)
  queue history [TREE]   the versions of trees' regenerated settings
  queue rollback TREE N  put back a tree's settings from before version N
  placement apply FILE   declare clusters, pools, cluster groups, queues and launch configs (HCL)

Administration:
  user create NAME       create a user and print its token
  user list              list users
  user rotate-token NAME give a user a new token (its old ones stop working)
  user delete NAME       delete a user: its tokens stop working, its batches stay
  token create [-user U] [-name N] [-ttl 720h]   make a token (yours, or a user's as admin)
  token list [-user U | -all] | revoke ACCESSOR | rotate ACCESSOR
  audit [-since 1h] [-user U]   the mutating requests: who, what, when, from where, the result
  billing-project create NAME [-member USER]...
  billing-project list | add-member PROJECT USER [-role member|manager|viewer] | remove-member PROJECT USER | delete PROJECT
  billing-project set-limit PROJECT DOLLARS | show PROJECT   a spend limit: reached, its running batches are cancelled
  billing-project set-log-quota PROJECT SIZE   the job logs each server keeps of the project (admin; 0: none)
  billing-project storage add PROJECT URL_PREFIX [-gcs-key-file F | -s3-access-key-id ID -s3-secret-access-key-file F] [-s3-endpoint URL -s3-region R -s3-path-style]
  billing-project storage remove PROJECT URL_PREFIX | list PROJECT
                         where the project's jobs may read and write (admin), with the project's own credentials
  billing-project set PROJECT -allow-host-network=true|false   may its members run jobs on network "host" (admin)
  rate set RESOURCE PRICE [-from TIME]   price a resource per unit-hour (admin): compute[/POOL], memory[/POOL], gpu/TYPE, service-fee
  rate list [-all]       the rates in force and to come
  billing show -project P [-from DAY] [-to DAY] [-by day|user|batch]
                         a billing project's cost by day, user or batch
  billing efficiency [-project P] [-user U] [-from DAY] [-to DAY]
                         what a project's or a user's finished jobs used of what they asked, and what to ask
  instance list          list worker instances
  status                 show the cluster leader
  operator raft list-peers | remove-peer ID | transfer-leader [ID]
  operator snapshot save FILE | restore FILE
  operator gossip keyring generate | list | install KEY | use KEY | remove KEY
  operator secrets-key generate   a key for -secrets-key-file (seals storage credentials)
  tls ca create          make the cluster's CA (drover-agent-ca.pem and its key)
  tls cert create -server [-id ID] | -client | -worker   make a certificate signed by it
  bench sched | e2e | failover | catchup | autoscale   run drover-bench (beside drover): throughput, failover, catch-up, the autoscaler
  version                print the version

Environment: DROVER_ADDR (default http://127.0.0.1:4650, several separated by
commas), DROVER_TOKEN (default: the contents of ~/.config/drover/token),
DROVER_CACERT (the cluster CA: servers are reached over https and verified),
DROVER_CLIENT_CERT and DROVER_CLIENT_KEY (for servers run with -tls-ca),
DROVER_STALE=1 (as -stale).
'drover -stale <command>' has the server asked answer reads from its own
copy of the state (it may lag the leader's; reads work with no leader).
Run 'drover <command> -h' for a command's flags.
`

// Run runs one command.
func (m *Main) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return &exitError{code: 1}
	}
	// Options before the command: -stale reads any server's own copy.
	for len(args) > 0 && (args[0] == "-stale" || args[0] == "--stale") {
		orig := m.Client
		m.Client = func() *api.Client { c := orig(); c.Stale = true; return c }
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return &exitError{code: 1}
	}
	cmd, rest := args[0], args[1:]
	batches, placement, admin, ops := batchCmds{m}, placementCmds{m}, adminCmds{m}, opsCmds{m}
	switch cmd {
	case "agent":
		return ops.runAgent(ctx, rest)
	case "worker":
		return ops.runWorker(ctx, rest)
	case "server":
		return ops.runServer(ctx, rest)
	case "operator":
		return ops.runOperator(ctx, rest)
	case "tls":
		return ops.runTLS(ctx, rest)
	case "bench":
		return ops.runBench(ctx, rest)
	case "run":
		return batches.runRun(ctx, rest)
	case "validate":
		return batches.runValidate(ctx, rest)
	case "batch":
		return m.sub(ctx, "batch", rest, map[string]func(context.Context, []string) error{
			"list": batches.runBatchList, "status": batches.runBatchStatus,
			"cancel": batches.runBatchCancel, "wait": batches.runBatchWait, "retry": batches.runBatchRetry,
			"efficiency": batches.runBatchEfficiency,
		})
	case "job":
		return m.sub(ctx, "job", rest, map[string]func(context.Context, []string) error{
			"list": batches.runJobList, "status": batches.runJobStatus,
			"logs": batches.runJobLogs, "why": batches.runJobWhy, "restart": batches.runJobRestart,
		})
	case "region":
		return m.sub(ctx, "region", rest, map[string]func(context.Context, []string) error{
			"list": placement.runRegionList,
		})
	case "autoscaler":
		return m.sub(ctx, "autoscaler", rest, map[string]func(context.Context, []string) error{
			"status": placement.runAutoscalerStatus, "delete-config": placement.runLaunchConfigDelete,
		})
	case "cluster":
		return m.sub(ctx, "cluster", rest, map[string]func(context.Context, []string) error{
			"list": placement.runClusterList, "status": placement.runClusterStatus,
			"disable": placement.runClusterDisable, "enable": placement.runClusterEnable,
			"groups": placement.runClusterGroups, "delete": placement.runClusterDelete, "delete-group": placement.runClusterGroupDelete,
		})
	case "queue":
		return m.sub(ctx, "queue", rest, map[string]func(context.Context, []string) error{
			"tree": placement.runQueueTree, "list": placement.runQueueList, "show": placement.runQueueShow,
			"set": placement.runQueueSet, "delete": placement.runQueueDelete,
			"route": placement.runQueueRoute, "recommend": placement.runQueueRecommend, "slo": placement.runQueueSLO,
			"report": placement.runQueueReport, "rebalance": placement.runQueueRebalance,
			"history": placement.runQueueHistory, "rollback": placement.runQueueRollback, "auto-apply": placement.runQueueAutoApply,
		})
	case "placement":
		return m.sub(ctx, "placement", rest, map[string]func(context.Context, []string) error{
			"apply": placement.runPlacementApply,
		})
	case "user":
		return m.sub(ctx, "user", rest, map[string]func(context.Context, []string) error{
			"create": admin.runUserCreate, "list": admin.runUserList,
			"rotate-token": admin.runUserRotateToken, "delete": admin.runUserDelete,
		})
	case "token":
		return m.sub(ctx, "token", rest, map[string]func(context.Context, []string) error{
			"create": admin.runTokenCreate, "list": admin.runTokenList,
			"revoke": admin.runTokenRevoke, "rotate": admin.runTokenRotate,
		})
	case "audit":
		return admin.runAudit(ctx, rest)
	case "billing":
		return m.sub(ctx, "billing", rest, map[string]func(context.Context, []string) error{
			"show": admin.runBillingShow, "efficiency": admin.runBillingEfficiency})
	case "rate":
		return m.sub(ctx, "rate", rest, map[string]func(context.Context, []string) error{
			"set": admin.runRateSet, "list": admin.runRateList,
		})
	case "billing-project":
		return m.sub(ctx, "billing-project", rest, map[string]func(context.Context, []string) error{
			"create": admin.runBPCreate, "list": admin.runBPList, "delete": admin.runBPDelete,
			"add-member": admin.runBPAddMember, "remove-member": admin.runBPRemoveMember,
			"set-spend-limit": admin.runBPSpendLimit, "set-limit": admin.runBPSpendLimit, "show": admin.runBPShow,
			"set-log-quota": admin.runBPLogQuota, "storage": admin.runBPStorage, "set": admin.runBPSet,
		})
	case "instance":
		return m.sub(ctx, "instance", rest, map[string]func(context.Context, []string) error{
			"list": ops.runInstanceList,
		})
	case "status":
		return ops.runStatus(ctx, rest)
	case "version", "-v", "--version":
		safef(m.Stdout, "drover %s\n", version.Get())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(m.Stdout, usage)
		return nil
	}
	return usagef("unknown command %q; run 'drover help' for the list", cmd)
}

func (m *Main) sub(ctx context.Context, name string, args []string, cmds map[string]func(context.Context, []string) error) error {
	names := strings.Join(slices.Sorted(maps.Keys(cmds)), ", ")
	if len(args) == 0 {
		return usagef("drover %s needs a subcommand: one of %s", name, names)
	}
	f, ok := cmds[args[0]]
	if !ok {
		return usagef("unknown command 'drover %s %s'; use one of %s", name, args[0], names)
	}
	return f(ctx, args[1:])
}

// newFlags makes a flag set that reports errors instead of exiting.
func (m *Main) newFlags(name, argsUsage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		safef(m.Stderr, "Usage: drover %s %s\n", name, argsUsage)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags that may come before, between or after positional
// arguments ("drover batch status 1 -json") and checks how many positional
// arguments there are.
func parse(fs *flag.FlagSet, args []string, minPos, maxPos int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if len(pos) < minPos || (maxPos >= 0 && len(pos) > maxPos) {
		fs.Usage()
		switch {
		case maxPos == 0:
			return nil, usagef("drover %s takes no arguments", fs.Name())
		case len(pos) < minPos:
			return nil, usagef("drover %s needs %d argument(s), got %d", fs.Name(), minPos, len(pos))
		default:
			return nil, usagef("drover %s takes at most %d argument(s), got %d: %s", fs.Name(), maxPos, len(pos), strings.Join(pos, " "))
		}
	}
	return pos, nil
}

func (m *Main) printJSON(v any) error {
	enc := json.NewEncoder(m.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// multiFlag collects a repeatable flag.
type multiFlag []string

func (f *multiFlag) String() string     { return strings.Join(*f, ",") }
func (f *multiFlag) Set(v string) error { *f = append(*f, v); return nil }

func newLogger(w io.Writer, level string, json bool) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("-log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	if json {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}
