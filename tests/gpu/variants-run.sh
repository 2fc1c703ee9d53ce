#!/bin/bash
# variants-run: tallyd's sliced and PTB variants of a best-effort tenant's PTX kernels compute
# exactly what the originals compute, on the GPU.
#
# usage: tests/gpu/variants-run [ROUNDS]     (make check-gpu runs it; TALLY_BUILDDIR as e2e-run)
#
# var-tenant (tests/gpu/var-tenant.cu, a PTX-only image) runs natively once ("be ROUNDS"), then
# through one tallyd --policy tally per --variants mode: off (control), slice, ptb, flush, all.  In each
# tallyd run the best-effort tenant runs next to a latency-critical var-tenant ("lc") that keeps
# the GPU busy in bursts, so the policy holds, slices and preempts the best-effort kernels.
# Checks, per mode:
#   - the BE tenant's stdout equals the native run's byte for byte, both tenants exit 0;
#   - the variants were really used, from tallyd's exit line ("N sliced and M PTB launches,
#     P preemptions, turnaround ...; F FLUSH launches (R redos), G blocks given up"): off:
#     none; slice: sliced > 0, PTB = 0; ptb: PTB > 0 and preemptions > 0; flush: FLUSH > 0,
#     sliced = PTB = 0 (the given-up blocks and redos are printed); all: sliced + PTB + FLUSH > 0;
#   - tallyctl metrics showed the tenant's variant launches while it ran (tally_tenant_variant_
#     launches_total) and the daemon's series (tally_sched_preemptions_total).
# Prints one PASS/FAIL line per check, the turnaround line of the ptb run, and a total; exit 0
# when everything passed, 77 without a GPU.  Logs: BUILDDIR/tests/gpu/variants-logs/.
set -u

# tallyd-lib.sh is in the source tree: TALLY_SRCDIR, where `make` said, or, when the tree was
# moved since (copied to another machine), the build tree (two levels above this script) or its
# parent.  The library sets and exports TALLY_BUILDDIR and TALLY_SRCDIR.
: "${TALLY_BUILDDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
for d in ${TALLY_SRCDIR:+"$TALLY_SRCDIR"} "@abs_top_srcdir@" "$TALLY_BUILDDIR"{,/..}; do
  [ -f "$d/tests/gpu/tallyd-lib.sh" ] && break; done
. "$d/tests/gpu/tallyd-lib.sh" || exit 2

ROUNDS=${1:-160}
B=$TL_BUILDDIR
PROG=$B/tests/gpu/var-tenant
LOGS=$B/tests/gpu/variants-logs
TIMEOUT=${VARIANTS_TIMEOUT:-40} # one tenant run
if ! tl_have_gpu; then
  echo "skipped: no GPU"
  exit 77
fi
if [ ! -x "$PROG" ]; then
  echo "FAIL: $PROG is not built (make tests/gpu/var-tenant)"
  exit 1
fi
rm -rf "$LOGS"
mkdir -p "$LOGS"
TL_WORK=$(mktemp -d /tmp/tally-variants-XXXXXX)
lcpid=
cleanup() {
  [ -n "$lcpid" ] && kill "$lcpid" 2>/dev/null
  tl_stop >/dev/null 2>&1
  rm -rf "$TL_WORK"
}
trap cleanup EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
bad() { # NAME FILE...: FAIL, with the files' tails
  fail=$((fail + 1)); echo "FAIL: $1"; shift
  for f in "$@"; do [ -f "$f" ] && tail -n 8 "$f" | sed "s|^|  $(basename "$f"): |"; done
}
# num_before WORDS LINE: the number just before WORDS in LINE ("12 sliced and" -> 12)
num_before() { sed -n "s/.* \([0-9][0-9]*\) $1.*/\1/p" <<<"$2" | head -n 1; }

t0=$SECONDS
tl_run native "$TIMEOUT" "" "" -- "$PROG" be "$ROUNDS" >"$LOGS/native.out" 2>"$LOGS/native.err"
rc=$?
if [ $rc -eq 0 ] && grep -q '^failures: 0$' "$LOGS/native.out"; then
  ok "native run ($ROUNDS rounds, $((SECONDS - t0)) s)"
else
  bad "native run (exit $rc)" "$LOGS/native.out" "$LOGS/native.err"
  exit 1
fi

for mode in off slice ptb flush all; do
  # --be-depth 1: one BE launch in flight, so the policy cuts the BE kernels it issues while
  # the LC bursts; at the default depth it issues short-block kernels whole while the LC is
  # idle (their blocks already fit the budget) and uses no variant at all.
  TALLYD_ARGS="--policy tally --be-depth 1 --variants $mode --trace $LOGS/$mode.trace"
  export TALLYD_ARGS
  if ! tl_start; then
    bad "$mode: tallyd starts: $TL_ERR"
    continue
  fi
  stop=$TL_WORK/stop.$mode
  rm -f "$stop"
  tl_run shm $((TIMEOUT + 10)) latency-critical lc -- "$PROG" lc "$stop" "$TIMEOUT" \
    >"$LOGS/$mode.lc.out" 2>"$LOGS/$mode.lc.err" &
  lcpid=$!
  sleep 1 # the LC tenant is connected and bursting before the BE one starts
  tl_run shm "$TIMEOUT" best-effort be -- "$PROG" be "$ROUNDS" \
    >"$LOGS/$mode.out" 2>"$LOGS/$mode.err" &
  bepid=$!
  metrics=
  while kill -0 "$bepid" 2>/dev/null; do # the tenant's own counters, while it is connected
    m=$("$B/hostd/tallyctl" --socket "$TL_SOCK.ctl" metrics 2>/dev/null)
    if grep -q '^tally_tenant_variant_launches_total{tenant="be"' <<<"$m"; then
      metrics=$m
    fi
    sleep 0.5
  done
  wait "$bepid"
  berc=$?
  touch "$stop"
  wait "$lcpid"
  lcrc=$?
  lcpid=
  tl_stop
  cp "$TL_LOG" "$LOGS/$mode.tallyd.log"
  line=$(grep 'scheduler: .* launches (' "$LOGS/$mode.tallyd.log" | tail -n 1)
  sliced=$(num_before 'sliced and' "$line")
  ptb=$(num_before 'PTB launches' "$line")
  pre=$(num_before 'preemptions' "$line")
  flush=$(num_before 'FLUSH launches' "$line")
  flush=${flush:-0}
  if [ $berc -eq 0 ] && cmp -s "$LOGS/native.out" "$LOGS/$mode.out"; then
    ok "$mode: best-effort output identical to native"
  else
    diff "$LOGS/native.out" "$LOGS/$mode.out" >"$LOGS/$mode.diff" 2>&1
    bad "$mode: best-effort output identical to native (exit $berc)" "$LOGS/$mode.diff" \
      "$LOGS/$mode.err"
  fi
  if [ $lcrc -eq 0 ] && grep -q '^failures: 0$' "$LOGS/$mode.lc.out"; then
    ok "$mode: latency-critical tenant correct ($(grep -o '[0-9]* bursts' "$LOGS/$mode.lc.err"))"
  else
    bad "$mode: latency-critical tenant correct (exit $lcrc)" "$LOGS/$mode.lc.out" \
      "$LOGS/$mode.lc.err"
  fi
  if [ "$TL_EXIT" != 0 ] || [ -z "$line" ]; then
    bad "$mode: tallyd exits 0 with its scheduler line (exit $TL_EXIT)" "$LOGS/$mode.tallyd.log"
    continue
  fi
  echo "  $mode: ${line#*scheduler: }"
  case $mode in
    off) want=$([ "$sliced" -eq 0 ] && [ "$ptb" -eq 0 ] && echo y) ;;
    slice) want=$([ "$sliced" -gt 0 ] && [ "$ptb" -eq 0 ] && echo y) ;;
    ptb) want=$([ "$ptb" -gt 0 ] && [ "$pre" -gt 0 ] && echo y) ;;
    flush) want=$([ "$flush" -gt 0 ] && [ $((sliced + ptb)) -eq 0 ] && echo y) ;;
    all) want=$([ $((sliced + ptb + flush)) -gt 0 ] && echo y) ;;
  esac
  if [ "$want" = y ]; then
    ok "$mode: forms used as configured (sliced $sliced, PTB $ptb, FLUSH $flush, preemptions $pre)"
  else
    bad "$mode: forms used as configured (sliced $sliced, PTB $ptb, FLUSH $flush, preemptions $pre)" \
      "$LOGS/$mode.tallyd.log"
  fi
  if [ "$mode" != off ]; then
    re='^tally_tenant_variant_launches_total\{tenant="be",id="[0-9]+",form="(sliced|ptb|flush)"\} [1-9]'
    if grep -Eq "$re" <<<"$metrics"; then
      ok "$mode: tallyctl metrics shows the tenant's variant launches"
    else
      printf '%s\n' "$metrics" >"$LOGS/$mode.metrics"
      bad "$mode: tallyctl metrics shows the tenant's variant launches" "$LOGS/$mode.metrics"
    fi
  fi
  if [ "$mode" = ptb ]; then
    echo "TURNAROUND ${line#*preemptions, }"
  fi
done
echo "variants: $pass passed, $fail failed ($((SECONDS - t0)) s)"
[ $fail -eq 0 ]
