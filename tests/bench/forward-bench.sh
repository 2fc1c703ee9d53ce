#!/bin/bash
# forward-bench: the forwarding benchmark, native vs Tally side by side in one run
# (generated from tests/bench/forward-bench.sh by `make`).
#
# Starts one tallyd (UNIX socket + TCP loopback), then for each round runs
# tests/bench/forward-bench-bin natively, through Tally over shared memory (tally-shm) and over
# TCP loopback (tally-tcp), one after the other, so drift hits every column alike.  Each
# metric is the median over rounds of the per-run figure (itself a median or p99 over many
# samples, see forward-bench.cu).  Prints a markdown table of native, tally-shm, tally-tcp,
# the ratios to native and whether tally-shm meets its target (forward-bench-table.awk makes
# it, and with several rounds each round's ratio below it, since a one-round ratio carries the
# host's own variation), plus the command that reproduces it.  Nothing is asserted: the exit status is 0 when every run completed with a
# correct result, 1 otherwise, 77 without a GPU.
#
# The open-loop request rows (8 x 25 us kernels then a sync, Poisson 2 ms gaps) are checked
# against the latency-critical path's targets below the table: over shm p50 <= native + 10 us
# and p99 <= 1.10x native, over TCP p50 <= native + the TCP loopback round trip of the same
# run, and the 1000-kernel chain's <= 1.05x over TCP as well (its ratio to three decimals); the
# idle rows are the CPU the guest and tallyd burn per second while the tenant idles.
# TALLYD_ARGS adds daemon flags (e.g. '--lc-poll no' to see the fallback).
#
# usage: forward-bench [-r ROUNDS] [-t shm|tcp|both] [--reply-sync] [--queued] [--null-stream]
#                      [--scale F] [--hops]
#   -r  rounds (default 3)   -t  Tally transports (default both)
#   --reply-sync  also a column "reply": shared memory with TALLY_LC_SYNC_WORD=0 (the stream
#            synchronisation answered by tallyd's reply instead of a word the GPU writes,
#            docs/lc-path.md)
#   --queued also a column "queued": shared memory through a second tallyd started with
#            --lc-direct no added (tallyd's loop thread reads the ring and queues each request
#            for the latency-critical worker, instead of the worker reading it itself), in
#            the same rounds, and with TCP among the transports "queued-tcp", TCP through
#            that tallyd (its loop reads the socket); the two daemons never serve a run at the
#            same time
#   --null-stream, --scale F  passed to forward-bench-bin (see forward-bench.cu)
#   --hops   record hand-off times (tallyd --hops, TALLY_HOPS) and print where the open-loop
#            requests' and the launch + sync row's time goes, per transport, and what the
#            worker spends between a burst's launches outside the driver (tests/bench/hops-report)
set -u

# tallyd-lib.sh is in the source tree: TALLY_SRCDIR, where `make` said, or, when the tree was
# moved since (copied to another machine), the build tree (two levels above this script) or its
# parent.  The library sets and exports TALLY_BUILDDIR and TALLY_SRCDIR.
: "${TALLY_BUILDDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
for d in ${TALLY_SRCDIR:+"$TALLY_SRCDIR"} "@abs_top_srcdir@" "$TALLY_BUILDDIR"{,/..}; do
  [ -f "$d/tests/gpu/tallyd-lib.sh" ] && break; done
. "$d/tests/gpu/tallyd-lib.sh" || exit 2

rounds=3
transports="shm tcp"
hops=0
reply=0
queued=0
scale=1
binargs=()
orig_args="$*"
while [ $# -gt 0 ]; do
  case $1 in
    -r) rounds=$2; shift ;;
    -t) case $2 in both) transports="shm tcp" ;; shm | tcp) transports=$2 ;;
          *) echo "forward-bench: -t takes shm, tcp or both" >&2; exit 2 ;; esac; shift ;;
    --reply-sync) reply=1 ;;
    --queued) queued=1 ;;
    --null-stream) binargs+=(--null-stream) ;;
    --scale) binargs+=(--scale "$2"); scale=$2; shift ;;
    --hops) hops=1 ;;
    *) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
  esac
  shift
done

[ $reply = 1 ] && transports="$transports reply"
if [ $queued = 1 ]; then
  transports="$transports queued"
  case " $transports " in *" tcp "*) transports="$transports queued-tcp" ;; esac
fi
B=$TL_BUILDDIR
# FORWARD_BENCH_BIN: another program in its place (tests/bench/test-forward-bench.sh's stand-in)
BIN=${FORWARD_BENCH_BIN:-$B/tests/bench/forward-bench-bin}
if ! tl_have_gpu; then
  echo "skip: no GPU (nvidia-smi lists none)"
  exit 77
fi
[ -x "$BIN" ] || { echo "forward-bench: $BIN not built (make tests/bench/forward-bench)"; exit 1; }

LOGS=${FORWARD_BENCH_LOGS:-$B/tests/bench/forward-bench-logs}
tl_workdir forward-bench "$LOGS"

main_args=${TALLYD_ARGS:-}
queued_args="$main_args --lc-direct no"
if [ $hops = 1 ]; then
  main_args="$main_args --hops $LOGS/hops.daemon"
  queued_args="$queued_args --hops $LOGS/hops.daemon-queued"
fi
TALLYD_ARGS=$main_args
# use_daemon main|queued: the tl_* functions act on one tallyd's variables; this swaps the
# other's in (--queued's daemon: its own socket and state, --lc-direct no added to its flags).
cur=main tally_ok=1
Q_PID= Q_SOCK= Q_PORT= Q_LOG= Q_OK=0
use_daemon() {
  [ "$1" = "$cur" ] && return 0
  local p=$TL_PID s=$TL_SOCK o=$TL_PORT l=$TL_LOG k=$tally_ok
  TL_PID=$Q_PID TL_SOCK=$Q_SOCK TL_PORT=$Q_PORT TL_LOG=$Q_LOG tally_ok=$Q_OK
  Q_PID=$p Q_SOCK=$s Q_PORT=$o Q_LOG=$l Q_OK=$k
  cur=$1
  if [ "$cur" = queued ]; then
    TL_TAG=-queued TALLYD_ARGS=$queued_args
  else
    TL_TAG= TALLYD_ARGS=$main_args
  fi
}
trap 'use_daemon queued; tl_stop >/dev/null 2>&1; use_daemon main; tl_cleanup' EXIT
if ! tl_start; then
  echo "forward-bench: tallyd unavailable: $TL_ERR (Tally columns will read 'failed')"
  tally_ok=0
fi
if [ $queued = 1 ]; then
  use_daemon queued
  tally_ok=1
  if ! tl_start; then
    echo "forward-bench: the queued column's tallyd unavailable: $TL_ERR (it will read 'failed')"
    tally_ok=0
  fi
  use_daemon main
fi

guest_real=$(readlink -f "$TL_GUESTDIR/libcuda.so.1" 2>/dev/null)
status=0
for r in $(seq 1 "$rounds"); do
  for cfg in native $transports; do
    out=$LOGS/$cfg.$r.out
    case $cfg in queued*) use_daemon queued ;; *) use_daemon main ;; esac
    if [ "$cfg" != native ]; then
      if [ $tally_ok = 0 ] || ! { tl_alive || tl_start; }; then
        echo "rc 1" >"$out"
        status=1
        continue
      fi
    fi
    # latency-critical: the tenant's kernels are launched as they are (no best-effort
    # slicing or holding), so the table shows the cost of forwarding alone.
    # One name per run, so that hops-report can tell the runs apart.
    hopsfile=
    [ $hops = 1 ] && [ "$cfg" != native ] && hopsfile=$LOGS/hops.$cfg.$r
    via=$cfg syncword=
    [ "$cfg" = reply ] && via=shm syncword=0
    [ "$cfg" = queued ] && via=shm
    [ "$cfg" = queued-tcp ] && via=tcp
    FB_TALLYD_PID=$([ "$cfg" != native ] && echo "$TL_PID") TALLY_HOPS=$hopsfile \
      TALLY_LC_SYNC_WORD=$syncword \
      tl_run "$via" 300 latency-critical "fb-$cfg-$r" -- "$BIN" "${binargs[@]}" \
      >"$out" 2>"$LOGS/$cfg.$r.err"
    rc=$?
    if [ $rc = 0 ] && [ "$cfg" != native ]; then
      # A Tally column is only valid if the run really loaded the guest library.
      drv=$(sed -n 's/^e2e-driver: //p' "$LOGS/$cfg.$r.err" | tail -n 1)
      if [ "$(readlink -f "$drv" 2>/dev/null)" != "$guest_real" ]; then
        echo "forward-bench: $cfg round $r loaded '$drv', not Tally's guest library" >&2
        rc=99
      fi
    fi
    echo "rc $rc" >>"$out"
    if [ $rc != 0 ]; then
      echo "forward-bench: $cfg round $r exited $rc: $(tail -n 1 "$LOGS/$cfg.$r.err")" >&2
      status=1
    fi
  done
done

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
echo
echo "forward-bench: $gpu; $rounds rounds; stream ${binargs[*]:-created}; $(tl_describe)"
echo "reproduce: cd $B && tests/bench/forward-bench $orig_args   (or: make forward-bench)"
echo

# Aggregate (forward-bench-table.awk): per config and key, the median over the rounds that
# completed (rc 0), and each round's ratio to native for the rows with a target.
for cfg in native $transports; do
  for r in $(seq 1 "$rounds"); do
    f=$LOGS/$cfg.$r.out
    grep -q '^rc 0$' "$f" 2>/dev/null || continue
    awk -v c="$cfg" -v r="$r" '$1 != "rc" && $1 != "stream" { print c, $1, $2, r }' "$f"
  done
done | awk -v transports="$transports" -f "$TALLY_SRCDIR/tests/bench/forward-bench-table.awk"
if grep -qs '^chain_ok 0\|^copy_ok 0' "$LOGS"/*.out; then
  status=1
fi
if [ $hops = 1 ] && [ -x "$B/tests/bench/hops-report" ]; then
  # The open-loop phase is each run's last REQ_N (1500) x scale calls, plus the stream's destroy.
  # Over shared memory a latency-critical tenant's synchronisations are answered by the GPU's
  # word (docs/lc-path.md), no call: hops-report gives them their own rows, counted apart.
  last=$(awk -v s="$scale" 'BEGIN { printf "%d", 1500 * s + 2 }')
  for cfg in $transports; do
    echo
    echo "where an open-loop request's time goes over $cfg (hops-report --last $last):"
    daemon_hops=$LOGS/hops.daemon
    case $cfg in queued*) daemon_hops=$LOGS/hops.daemon-queued ;; esac
    "$B/tests/bench/hops-report" --last "$last" "$LOGS"/hops.$cfg.* "$daemon_hops"
    # Before it, the launch + sync row's 5000 stream synchronisations outnumber every other.
    echo
    echo "where a launch + sync's time goes over $cfg (hops-report --op stream_sync --skip-last $last):"
    "$B/tests/bench/hops-report" --op stream_sync --skip-last "$last" "$LOGS"/hops.$cfg.* \
      "$daemon_hops"
    # The bursts (the launch row's, the chain's, a request's 8 launches): daemon records only,
    # this transport's tenants only (the daemon's file has every run's).
    echo
    echo "the worker between back-to-back launches over $cfg (hops-report --gaps --op launch):"
    grep "^D fb-$cfg-[0-9]* " "$daemon_hops" >"$LOGS/hops.daemon.$cfg"
    "$B/tests/bench/hops-report" --gaps --op launch "$LOGS/hops.daemon.$cfg" |
      sed -n '/^| worker between/,$p'
  done
fi
echo
echo "per-run outputs: $LOGS"
exit $status
