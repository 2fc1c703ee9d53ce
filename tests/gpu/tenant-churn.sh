#!/bin/bash
# tenant-churn: N framework tenants in a row through one tallyd on the GPU, none may hang.
# (generated from tests/gpu/tenant-churn.sh by `make`.)
#
# Starts one tallyd, then runs N short PyTorch tenants through tally-run, J at a time
# (each: import torch, one tensor on the GPU, one reduction read back), then a CUDA C
# tenant (tests/gpu/rt-launch-static) the same way, each under a 120 s timeout.  Prints
# how many completed, the slowest connect (each tenant runs with TALLY_LOG=debug, under
# which the guest logs how long its connect to tallyd took), the slowest tenant's wall time
# (its whole life: start, connect, one kernel, exit; a connect that hung would show here
# or time out) and how many connects tallyd logged.  Exit 0 when every tenant printed its
# result, 1 otherwise, 77 without a GPU or PyTorch.
#
# usage: tenant-churn [-n N] [-j J] [-t shm|tcp]     (default 200, 1 at a time, shm)
set -u
# tallyd-lib.sh is in the source tree: TALLY_SRCDIR, where `make` said, or, when the tree was
# moved since (copied to another machine), the build tree (two levels above this script) or its
# parent.  The library sets and exports TALLY_BUILDDIR and TALLY_SRCDIR.
: "${TALLY_BUILDDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
for d in ${TALLY_SRCDIR:+"$TALLY_SRCDIR"} "@abs_top_srcdir@" "$TALLY_BUILDDIR"{,/..}; do
  [ -f "$d/tests/gpu/tallyd-lib.sh" ] && break; done
. "$d/tests/gpu/tallyd-lib.sh" || exit 2

n=200
jobs=1
transport=shm
while [ $# -gt 0 ]; do
  case $1 in
    -n) n=$2; shift ;;
    -j) jobs=$2; shift ;;
    -t) transport=$2; shift ;;
    *) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
  esac
  shift
done
tl_have_gpu || { echo "skip: no GPU"; exit 77; }
python3 -c 'import torch' 2>/dev/null || { echo "skip: no PyTorch"; exit 77; }

LOGS=$TALLY_BUILDDIR/tests/gpu/tenant-churn-logs
tl_workdir tenant-churn "$LOGS"
tl_start || { echo "tenant-churn: tallyd unavailable: $TL_ERR"; exit 1; }

# One tenant: its wall time in ms, its exit status and its output line into $LOGS/I.res.
one() {
  local i=$1 t0 out rc
  t0=$(date +%s%N)
  out=$(TALLY_LOG=debug tl_run "$transport" 120 best-effort "churn-$i" -- python3 -c \
    'import torch; print("sum", torch.ones(1, device="cuda").sum().item())' 2>"$LOGS/$i.err")
  rc=$?
  echo "$((($(date +%s%N) - t0) / 1000000)) $rc $out" >"$LOGS/$i.res"
  echo "tenant $i: exit $rc after $((($(date +%s%N) - t0) / 1000000)) ms" # progress
}
ok=0; bad=0; slow=0; slow_i=-1; conn=0; conn_i=-1
t_all=$(date +%s%N)
# At most J tenants at once.  Their own pids: a bare `wait` would also wait for tallyd.
pids=()
for i in $(seq 1 "$n"); do
  while :; do
    alive=()
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive+=("$p"); done
    pids=("${alive[@]}")
    [ ${#pids[@]} -lt "$jobs" ] && break
    sleep 0.1
  done
  one "$i" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for i in $(seq 1 "$n"); do
  read -r ms rc out <"$LOGS/$i.res" 2>/dev/null || { ms=0; rc=noresult; out=; }
  if [ "$rc" = 0 ] && [ "$out" = "sum 1.0" ]; then ok=$((ok + 1)); else
    bad=$((bad + 1)); echo "tenant $i: rc $rc after $ms ms: $(tail -n 1 "$LOGS/$i.err")"; fi
  [ "$ms" -gt $slow ] && { slow=$ms; slow_i=$i; }
  c=$(sed -n 's/.*connected to tallyd at .* in \([0-9]*\) ms.*/\1/p' "$LOGS/$i.err" | head -n 1)
  [ -n "$c" ] && [ "$c" -gt $conn ] && { conn=$c; conn_i=$i; }
done
t0=$(date +%s%N)
if [ -x "$TL_BUILDDIR/tests/gpu/rt-launch-static" ] &&
  tl_run "$transport" 120 latency-critical "churn-cuda-c" -- "$TL_BUILDDIR/tests/gpu/rt-launch-static" \
    >"$LOGS/cuda-c.out" 2>&1; then
  echo "CUDA C tenant after the churn: ok in $((($(date +%s%N) - t0) / 1000000)) ms"
else
  echo "CUDA C tenant after the churn: FAILED (rc $?; $LOGS/cuda-c.out)"; bad=$((bad + 1))
fi
connects=$(grep -c "connected (" "$TL_LOG" 2>/dev/null)
echo "tenant-churn: $ok of $n PyTorch tenants over $transport, $jobs at a time, in" \
  "$((($(date +%s%N) - t_all) / 1000000000)) s; slowest connect $conn ms (tenant $conn_i);" \
  "slowest tenant $slow ms (tenant $slow_i); tallyd logged $connects connects; $bad failed"
[ $bad = 0 ]
