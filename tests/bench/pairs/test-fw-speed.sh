#!/bin/sh
# test-fw-speed.sh: scripts/fw-speed end to end on the CPU.
#
# The workloads are tests/bench/pairs/stub-speed.py (fw-speed --stub), whose
# times depend on the transport it runs over (native 1.0 ms, shared memory
# 1.1 ms, TCP 1.2 ms, every tenth twice as long), and tallyd is
# tallyd-record: so the table's medians and ratios are known exactly, and
# the runs through tallyd are known to have gone through tally-run.  Never
# GPU coverage.  Prints TAP.
B=${TALLY_BUILDDIR:-.}
S=${TALLY_SRCDIR:-..}
echo "1..8"
if ! command -v python3 >/dev/null 2>&1; then
  for i in 1 2 3 4 5 6 7 8; do echo "ok $i # SKIP python3 not found"; done
  exit 0
fi
tmp=$(mktemp -d /tmp/tally-fw-speed-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
TALLYD=$B/hostd/tallyd-record
export TALLYD
. "${TALLY_SRCDIR:-$(dirname "$0")/../../..}/tests/tap.sh"
fs() { python3 "$S/scripts/fw-speed" --builddir "$B" "$@"; }

stub_run() {
  d=$tmp/run
  fs --stub --workloads gpt2-train,bert-graph --rounds 2 --seconds 1 --out "$d" \
    2>"$tmp/run.err" || return 1
  cat "$d/speed.md" "$tmp/run.err"
  tail='p99 2.400 ms, max 2.400 ms, 10 of 100 over 1.5x p50$'
  grep -q "round 2 bert-graph tcp: p50 1.200 ms, $tail" "$tmp/run.err" &&
    grep -q '^| gpt2-train | native | 2 of 2 | 1.000 | 2.000 | - | - |$' "$d/speed.md" &&
    grep -q '^| gpt2-train | shm | 2 of 2 | 1.100 | 2.200 | 1.100 (1.100-1.100) | 1.100 (1.100-1.100) |$' "$d/speed.md" &&
    grep -q '^| bert-graph | tcp | 2 of 2 | 1.200 | 2.400 | 1.200 (1.200-1.200) | 1.200 (1.200-1.200) |$' "$d/speed.md" &&
    [ "$(grep -c ',2,' "$d/speed.csv")" -eq 6 ] &&
    grep -q 'stub-speed: unix:' "$d/raw/round-2/bert-graph/shm/out.txt" &&
    grep -q 'stub-speed: tcp://127.0.0.1:' "$d/raw/round-1/gpt2-train/tcp/out.txt" &&
    grep -q 'stub-speed: native' "$d/raw/round-1/gpt2-train/native/out.txt" &&
    grep -q 'serving' "$d/tallyd.err"
}
check "--stub, 2 rounds: medians, ratios against native per round, each run's tail, every run through its transport" stub_run

nosplit_run() {
  d=$tmp/ns
  fs --stub --workloads gpt2-train --transports shm,shm+nosplit --against shm+nosplit \
    --no-native --rounds 2 --seconds 1 --out "$d" || return 1
  cat "$d/speed.md"
  grep -q '^| gpt2-train | shm | 2 of 2 | 1.100 | 2.200 | 1.100 (1.100-1.100) | 1.100 (1.100-1.100) |$' "$d/speed.md" &&
    grep -q '^| gpt2-train | shm+nosplit | 2 of 2 | 1.000 | 2.000 | - | - |$' "$d/speed.md" &&
    grep -q 'p50 vs shm+nosplit' "$d/speed.md" && ! grep -q '| native |' "$d/speed.md" &&
    [ ! -d "$d/raw/round-1/gpt2-train/native" ] &&
    grep -q 'stub-speed: unix:.* split 0 ' "$d/raw/round-1/gpt2-train/shm+nosplit/out.txt" &&
    grep -q 'stub-speed: unix:.* split default ' "$d/raw/round-2/gpt2-train/shm/out.txt"
}
check "+nosplit twins, --against and --no-native: the interposer's cost split against whole" nosplit_run

class_run() {
  d=$tmp/cls
  fs --stub --workloads bert-graph,gpt2-train --transports shm,shm+be,tcp+nosplit+lc \
    --no-native --against shm --rounds 1 --seconds 1 --out "$d" || return 1
  cat "$d/speed.md"
  grep -q 'class latency-critical' "$d/raw/round-1/bert-graph/shm/out.txt" &&
    grep -q 'class best-effort' "$d/raw/round-1/bert-graph/shm+be/out.txt" &&
    grep -q 'class best-effort' "$d/raw/round-1/gpt2-train/shm/out.txt" &&
    grep -q 'tcp://.* split 0 .* class latency-critical' \
      "$d/raw/round-1/gpt2-train/tcp+nosplit+lc/out.txt" &&
    grep -q '^| bert-graph | shm+be | 1 of 1 | 1.100 | 2.200 | 1.000 (1.000-1.000) |' "$d/speed.md"
}
check "+lc and +be run a workload's tenant in the other class, beside its own" class_run

hops_run() {
  d=$tmp/hops
  fs --stub --workloads bert-graph --transports shm --rounds 2 --seconds 1 --hops --out "$d" ||
    return 1
  cat "$d/hops.md"
  # tallyd and each tallyd run record (the stub makes no call, so nothing joins); native does not
  grep -q 'hops bert-graph-shm-r1.hops' "$d/raw/round-1/bert-graph/shm/out.txt" &&
    grep -q 'hops bert-graph-shm-r2.hops' "$d/raw/round-2/bert-graph/shm/out.txt" &&
    grep -q 'hops none' "$d/raw/round-1/bert-graph/native/out.txt" && [ -d "$d/hops" ] &&
    grep -q '^## bert-graph, shm, round 1$' "$d/hops.md" &&
    grep -q '^## bert-graph, shm, round 2$' "$d/hops.md" && ! grep -q 'native' "$d/hops.md" &&
    [ "$(grep -c 'No request of this run was recorded on both sides' "$d/hops.md")" = 2 ] &&
    grep -q '^| bert-graph | shm | 2 of 2 |' "$d/speed.md"
}
check "--hops: tallyd and each run through it record their hand-offs, hops.md per run" hops_run

failed_run() { # a failing run is named by Tally's line, its output's tail in the log, the rest go on
  d=$tmp/fail
  STUB_SPEED_FAIL=tcp fs --stub --workloads bert-graph --rounds 1 --seconds 1 --out "$d" \
    2>"$tmp/fail.err" && return 1
  cat "$tmp/fail.err"
  grep -q 'round 1 bert-graph tcp: failed: exit 3: tally\[[0-9]*\]: stub-speed: the channel' \
    "$tmp/fail.err" &&
    grep -q '^  | tally\[[0-9]*\]: stub-speed: the channel' "$tmp/fail.err" &&
    grep -q '^  | stub-speed: failing on purpose, line 11$' "$tmp/fail.err" &&
    grep -q '^  | stub-speed: failing on purpose, line 30$' "$tmp/fail.err" &&
    ! grep -q 'line 10$' "$tmp/fail.err" &&
    grep -q '^| bert-graph | shm | 1 of 1 |' "$d/speed.md" &&
    grep -q '^| bert-graph | tcp | 0 of 1 (failed: exit 3' "$d/speed.md"
}
check "a failing run: named with its exit and Tally's line, its output's tail in the log, the others kept" failed_run

stopped_run() { # a time limit's SIGTERM mid-run: that run killed, the table of the others written
  d=$tmp/stop
  hang=$d/raw/round-1/bert-graph/tcp/out.txt
  STUB_SPEED_HANG=tcp python3 "$S/scripts/fw-speed" --builddir "$B" --stub \
    --workloads bert-graph --rounds 2 --seconds 1 --out "$d" 2>"$tmp/stop.err" &
  fspid=$!
  # The signal comes once the TCP run hangs (its pid written), however slow the machine: at
  # most 60 s.
  pid=
  for _ in $(seq 600); do
    pid=$(sed -n 's/^stub-speed: hanging, pid \([0-9]*\)$/\1/p' "$hang" 2>/dev/null)
    [ -n "$pid" ] && break
    sleep 0.1
  done
  kill -TERM "$fspid"
  wait "$fspid"
  rc=$?
  cat "$tmp/stop.err"
  [ "$rc" = 143 ] && [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null &&
    grep -q 'stopped by SIGTERM in round 1; the table has the runs that finished' "$tmp/stop.err" &&
    grep -q '^| bert-graph | native | 1 of 2 | 1.000 |' "$d/speed.md" &&
    grep -q '^| bert-graph | shm | 1 of 2 | 1.100 |' "$d/speed.md" &&
    grep -q '^| bert-graph | tcp | 0 of 2 | - |' "$d/speed.md" && grep -q 'serving' "$d/tallyd.err"
}
check "stopped by SIGTERM mid-run: the run in progress killed, the others' table written" \
  stopped_run

no_daemon() { # tallyd refusing its flags: its own words in the message, its output kept
  d=$tmp/nod
  TALLYD_ARGS=--no-such-flag fs --stub --workloads bert-graph --rounds 1 --seconds 1 \
    --out "$d" 2>"$tmp/nod.err" && return 1
  cat "$tmp/nod.err"
  grep -q 'tallyd exited at start (status 2): .*no-such-flag' "$tmp/nod.err" &&
    grep -q "tallyd's output in $d/tallyd.err" "$tmp/nod.err" &&
    grep -q 'no-such-flag' "$d/tallyd.err"
}
check "tallyd that does not start: why, in the message, its output kept with the results" \
  no_daemon

bad_args() {
  ! fs --stub --workloads nope --out "$tmp/b1" 2>"$tmp/b1.err" &&
    grep -q 'unknown workload or transport nope' "$tmp/b1.err" && [ ! -d "$tmp/b1" ] &&
    ! fs --stub --rounds 0 --out "$tmp/b2" 2>/dev/null && [ ! -d "$tmp/b2" ] &&
    ! fs --stub --transports shm+lc+be --out "$tmp/b4" 2>"$tmp/b4.err" &&
    grep -q 'unknown workload or transport shm+lc+be' "$tmp/b4.err" && [ ! -d "$tmp/b4" ] &&
    ! fs --stub --transports shm+nosplit+nosplit,udp --out "$tmp/b5" 2>/dev/null &&
    [ ! -d "$tmp/b5" ] &&
    ! fs --stub --no-native --out "$tmp/b3" 2>"$tmp/b3.err" &&
    grep -q -- '--against native: not among the runs' "$tmp/b3.err" && [ ! -d "$tmp/b3" ] &&
    fs --help | grep -q -- '--transports' && fs --version | grep -q '^fw-speed (tally) '
}
check "bad workloads and rounds are refused before anything runs; --help, --version" bad_args
