#!/usr/bin/env bash
# make demo: start a dev agent with two local workers in two regions, run
# every example, take a cluster out of service mid-batch, show what
# happened, stop the agent; then start one that autoscales, where one
# cluster's local "cloud" has less room than the autoscaler asks for.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-./bin/drover}
DATA=$(mktemp -d "${TMPDIR:-/tmp}/drover-demo-XXXXXX")
LOG="$DATA/agent.log"

cleanup() {
  if [[ -n "${AGENT_PID:-}" ]] && kill -0 "$AGENT_PID" 2>/dev/null; then
    kill -TERM "$AGENT_PID"
    wait "$AGENT_PID" 2>/dev/null || true
  fi
  rm -rf "$DATA"
}
trap cleanup EXIT

echo "==> starting a dev agent (data dir $DATA, agent log $LOG)"
BUCKET="$DATA/bucket"
mkdir -p "$BUCKET/in"
for i in 0 1 2; do seq 1 $((10 * (i + 1))) | tr '\n' ' ' >"$BUCKET/in/words-$i.txt"; done
"$BIN" agent -dev -data-dir "$DATA" -http-addr 127.0.0.1:0 -clusters us-east1/a:1x4,us-west1/b:1x4 -worker-memory 4GiB -file-url-roots "$BUCKET" -queue-sample-interval 1s -log-level warn >"$LOG" 2>&1 &
AGENT_PID=$!
for _ in $(seq 1 300); do
  [[ -s "$DATA/root.token" && -s "$DATA/api.addr" ]] && break
  if ! kill -0 "$AGENT_PID" 2>/dev/null; then cat "$LOG"; echo "agent failed to start" >&2; exit 1; fi
  sleep 0.1
done
export DROVER_ADDR DROVER_TOKEN
DROVER_ADDR=$(cat "$DATA/api.addr")
DROVER_TOKEN=$(cat "$DATA/root.token")
echo "    API at $DROVER_ADDR"
ui_link() {
  # The token travels in the URL's fragment (#token=...): browsers never
  # send a fragment to a server, so it reaches no server log; the login
  # page posts it and drops it from the address bar.
  echo "    Web UI at $DROVER_ADDR/ui/"
  echo "    Log in with one click (the admin token, in the link's fragment): $DROVER_ADDR/ui/login#token=$DROVER_TOKEN"
}
ui_link

run() {
  echo
  echo "==> drover $*"
  "$BIN" "$@"
}

run run -wait examples/hello.hcl
run job logs 1 1

run run -wait examples/scatter-gather.hcl
run job list 2
run job logs 2 5

echo
echo "==> drover run -wait examples/dag.hcl   (one branch fails on purpose: exit code 2)"
set +e
"$BIN" run -wait examples/dag.hcl
code=$?
set -e
echo "    exit code: $code"
run job list 3

run run -wait -var n=200 examples/array.hcl
run job logs 4 200

run region list
echo
echo "==> drover run examples/regions.hcl   (8 jobs for us-east1, 8 for us-west1, 16 anywhere; it returns at once)"
"$BIN" run examples/regions.hcl
sleep 1.5
run cluster disable b -reason "demo maintenance" -evacuate
run cluster list
sleep 0.5
run job why 5 16
sleep 2
run cluster enable b
run batch wait 5
run job list 5 -filter name=west

echo
echo "==> input and output files: each job copies its shard from a file:// bucket and its count back"
run run -wait -var bucket="$BUCKET" examples/files.hcl
run job status 6 1
echo
echo "==> ls $BUCKET/out; cat count-2.txt"
ls "$BUCKET/out"
cat "$BUCKET/out/count-2.txt"

run batch list

echo
echo "==> tiers (examples/placement/tiers.hcl): tier 3 (billing project default) fills both workers; tier 1's nightly run (billing project prod) waits 5 s below its fair share, preempts tier-3 attempts and meets its SLO"
run billing-project create prod
run placement apply examples/placement/tiers.hcl
echo
echo "==> drover run -var n=16 -var seconds=30 examples/long.hcl   (tier 3: 16 jobs of half a core, every core of both workers; it returns at once)"
"$BIN" run -var n=16 -var seconds=30 examples/long.hcl
sleep 2
run run -billing-project prod -wait examples/nightly.hcl
run queue tree
echo
echo "==> drover job list 7   (tier 3's jobs with 2 attempts were preempted for tier 1, and ran again)"
"$BIN" job list 7
run batch wait 7
run queue slo -days 1
run queue recommend -days 1
run queue report -by cluster -days 1
run queue auto-apply demo -dry-run
run queue history demo

echo
echo "==> stopping this agent; starting one that autoscales: no worker until jobs wait"
echo "    (-clusters us-east1/a:2x4/capacity=1,us-west1/b:1x4: up to 2 workers in a and 1 in b, but a's local \"cloud\" has room for 1)"
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null || true
DATA2="$DATA/autoscale"
mkdir -p "$DATA2"
"$BIN" agent -dev -autoscale -data-dir "$DATA2" -http-addr 127.0.0.1:0 -clusters us-east1/a:2x4/capacity=1,us-west1/b:1x4 -idle-timeout 5s -log-level warn >"$LOG" 2>&1 &
AGENT_PID=$!
for _ in $(seq 1 300); do
  [[ -s "$DATA2/root.token" && -s "$DATA2/api.addr" ]] && break
  if ! kill -0 "$AGENT_PID" 2>/dev/null; then cat "$LOG"; echo "agent failed to start" >&2; exit 1; fi
  sleep 0.1
done
DROVER_ADDR=$(cat "$DATA2/api.addr")
DROVER_TOKEN=$(cat "$DATA2/root.token")
ui_link
sleep 1
run autoscaler status
echo
echo "==> drover run -var n=24 -var seconds=4 examples/long.hcl   (24 jobs of half a core: the autoscaler asks for 2 workers in a, 1 in b; it returns at once)"
"$BIN" run -var n=24 -var seconds=4 examples/long.hcl
for _ in $(seq 1 40); do
  "$BIN" autoscaler status -json | grep -q '"capacity_limited": *true' && break
  sleep 0.5
done
echo
echo "==> a's cloud made 1 of the 2: local-a is capacity-limited, and the jobs left waiting say so"
run autoscaler status
run job why 1 24
run batch wait 1
echo
echo "==> waiting for the idle workers to be stopped (idle timeout 5s)"
sleep 9
run autoscaler status

if [[ "${DROVER_DEMO_KEEP:-}" == 1 ]]; then
  # Every page of the web UI with something on it: a queue tree, a
  # project with a spend limit, long jobs with live logs, a failing DAG,
  # the autoscaler launching for them.
  echo
  echo "==> DROVER_DEMO_KEEP=1: a queue tree, billing projects and long jobs on the autoscaling agent, kept up for the web UI"
  run billing-project create gen-prod
  run billing-project create physics
  run billing-project set-limit physics 0.001
  run placement apply examples/placement/demo-queues.hcl
  run run -billing-project gen-prod -var n=6 -var seconds=1800 examples/long.hcl
  run run -billing-project physics -var n=4 -var seconds=1800 examples/long.hcl
  set +e
  "$BIN" run examples/dag.hcl
  set -e
  echo
  echo "==> the agent stays up; open the web UI, then press Enter to stop it"
  ui_link
  read -r _
fi

echo
echo "==> demo done: every example ran on the embedded default (one Raft server, local worker processes in two regions), then on workers the autoscaler launched and stopped"
echo "    (DROVER_DEMO_KEEP=1 make demo keeps the autoscaling agent up at the end, with a queue tree, billing projects and long jobs, for the web UI, until you press Enter)"
