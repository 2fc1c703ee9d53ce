#!/bin/bash
# e2e-run: Tally's GPU end-to-end test (generated from tests/gpu/e2e-run.sh by `make`).
#
# Starts one tallyd on a private UNIX socket and a TCP loopback port, then runs every program
# of tests/gpu/ natively and as a Tally tenant over shared memory (shm) and TCP, and diffs
# each tenant run's stdout and exit status against the native run.  A tenant run passes only
# if its output is identical, its exit status is the same, the process really loaded the
# guest libcuda.so.1 (each program names the mapped driver on stderr), and tallyd is still
# alive afterwards.  Then: two tenants at once (latency-critical + best-effort), a tenant
# killed while it holds 4 GiB (memory must come back), an address with no daemon behind it,
# the sticky error programs, a health check after them, and tallyd's exit on SIGTERM.
#
# One line per (program, transport): PASS / FAIL / SKIP with the reason; then a total.
# Exit 0 when nothing failed, 1 when something failed, 77 when nothing could run.
# Logs and diffs: $TALLY_BUILDDIR/tests/gpu/e2e-logs/.  tallyd is stopped on every exit path.
#
# usage: e2e-run [-k REGEX] [-t shm|tcp|both|native] [-b BUDGET_S]
#   -k  run only programs whose name matches REGEX (grep -E)
#   -t  transports to test (default both; "native" runs the programs without Tally only,
#       which checks the programs themselves on a new machine)
#   -b  overall time budget in seconds (default 270: check-gpu kills a test at 300 s);
#       programs left when it is spent are reported as FAIL "not run"
set -u

# tallyd-lib.sh is in the source tree: TALLY_SRCDIR, where `make` said, or, when the tree was
# moved since (copied to another machine), the build tree (two levels above this script) or its
# parent.  The library sets and exports TALLY_BUILDDIR and TALLY_SRCDIR.
: "${TALLY_BUILDDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
for d in ${TALLY_SRCDIR:+"$TALLY_SRCDIR"} "@abs_top_srcdir@" "$TALLY_BUILDDIR"{,/..}; do
  [ -f "$d/tests/gpu/tallyd-lib.sh" ] && break; done
. "$d/tests/gpu/tallyd-lib.sh" || exit 2

pattern=
transports="shm tcp"
budget=270
while getopts "k:t:b:h" opt; do
  case $opt in
    k) pattern=$OPTARG ;;
    t) case $OPTARG in both) transports="shm tcp" ;; shm | tcp) transports=$OPTARG ;;
         native) transports= ;;
         *) echo "e2e-run: -t takes shm, tcp, both or native" >&2; exit 2 ;; esac ;;
    b) budget=$OPTARG ;;
    *) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
  esac
done

B=$TL_BUILDDIR
S=$TL_SRCDIR
LOGS=$B/tests/gpu/e2e-logs
C_TIMEOUT=${E2E_TIMEOUT:-30}     # one C program, one transport
PY_TIMEOUT=${E2E_PY_TIMEOUT:-120} # CuPy/numba import and JIT: tens of seconds when cold
PYTHON=${PYTHON3:-python3}

npass=0 nfail=0 nskip=0
failed_runs=() # "NAME.TRANSPORT" of each failed run, for the details at the end
result() { # STATUS NAME TRANSPORT REASON
  printf '%-4s %-22s %-6s %s\n' "$1" "$2" "$3" "$4"
  case $1 in
    PASS) npass=$((npass + 1)) ;;
    FAIL) nfail=$((nfail + 1)); failed_runs+=("$2.$3") ;;
    SKIP) nskip=$((nskip + 1)) ;;
  esac
}

# Prints, for the first few failed runs, the head of the diff and the tail of stderr, so the
# console output alone says what went wrong (the full files stay in $LOGS).
details() {
  local shown=0 f d
  [ ${#failed_runs[@]} -gt 0 ] || return
  for f in "${failed_runs[@]}"; do
    [ $shown -lt 10 ] || break
    [ -e "$LOGS/$f.out" ] || continue
    [ $shown = 0 ] && echo "---- details of failed runs (first 10; all files in $LOGS) ----"
    shown=$((shown + 1))
    echo "== $f"
    d=$LOGS/$f.diff
    [ "${f%.native}" != "$f" ] && d=$LOGS/${f%.native}.native2.diff
    [ -s "$d" ] && sed -n '3,12p' "$d" | sed 's/^/   diff: /'
    [ -s "$LOGS/$f.err" ] && tail -n 4 "$LOGS/$f.err" | cut -c1-200 | sed 's/^/   stderr: /'
  done
}

if ! tl_have_gpu; then
  echo "skip: no GPU (nvidia-smi lists none)"
  exit 77
fi

tl_workdir e2e-run "$LOGS"

echo "e2e-run: build tree $B"
# tallyd_broken: set after tallyd failed to start twice; tenant runs then fail at once with
# the reason instead of waiting for another start.  Native runs go on either way, so the
# programs themselves are checked even while tallyd cannot serve.
tallyd_broken=
tallyd_fails=0
if [ -n "$transports" ]; then
  echo "e2e-run: $(tl_describe)"
  if tl_start; then
    echo "e2e-run: tallyd pid $TL_PID on unix:$TL_SOCK and tcp://127.0.0.1:$TL_PORT (log $TL_LOG)"
  else
    result FAIL tallyd start "$TL_ERR"
    [ -n "$TL_LOG" ] && sed 's/^/  tallyd: /' "$TL_LOG" 2>/dev/null | tail -n 20
    tallyd_fails=1
  fi
fi

guest_real=$(readlink -f "$TL_GUESTDIR/libcuda.so.1" 2>/dev/null || echo "$TL_GUESTDIR/libcuda.so.1")

# Makes sure tallyd runs before a tenant run; restarts it if it died.  A death noticed only
# here (tallyd exited just after the previous run's check) is charged to that run.
last_run=
ensure_tallyd() {
  tl_alive && return 0
  if [ -n "$last_run" ] && [ -n "$TL_PID" ]; then
    result FAIL $last_run "tallyd was found dead after this run (log: $(tail -n 1 "$TL_LOG"))"
  fi
  last_run=
  if [ -n "$tallyd_broken" ]; then
    TL_ERR=$tallyd_broken
    return 1
  fi
  tl_start && return 0
  tallyd_fails=$((tallyd_fails + 1))
  [ $tallyd_fails -ge 2 ] && tallyd_broken="tallyd failed to start twice: $TL_ERR"
  return 1
}

# Why a tenant run failed, or "" when it matches the native run.
#   compare NAME TRANSPORT RC
compare() {
  local name=$1 tr=$2 rc=$3 base=$LOGS/$1
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "timed out"
    return
  fi
  if ! cmp -s "$base.native.out" "$base.$tr.out"; then
    diff -u "$base.native.out" "$base.$tr.out" >"$base.$tr.diff"
    local first
    first=$(grep -m1 '^[-+][^-+]' "$base.$tr.diff" | cut -c1-100)
    echo "output differs from native (exit $rc; first: $first; see $base.$tr.diff)"
    return
  fi
  if [ "$rc" != "$(cat "$base.native.rc")" ]; then
    echo "exit status $rc, native $(cat "$base.native.rc")"
    return
  fi
  local drv
  drv=$(sed -n 's/^e2e-driver: //p' "$base.$tr.err" | tail -n 1)
  if [ -z "$drv" ]; then
    echo "program did not report its driver (crashed at exit?)"
  elif [ "$(readlink -f "$drv" 2>/dev/null || echo "$drv")" != "$guest_real" ]; then
    echo "loaded $drv, not Tally's guest library"
  fi
}

deadline=$((SECONDS + budget))
over_budget() { [ $SECONDS -ge $deadline ]; }

# run_program NAME TIMEOUT CMD...: native run, then each transport.
run_program() {
  local name=$1 limit=$2
  shift 2
  [ -n "$pattern" ] && ! echo "$name" | grep -Eq -- "$pattern" && return
  local base=$LOGS/$name
  if over_budget; then
    for tr in native $transports; do result FAIL "$name" "$tr" "not run: time budget (${budget} s) spent"; done
    return
  fi
  tl_run native "$limit" "" "" -- "$@" >"$base.native.out" 2>"$base.native.err"
  local rc=$?
  echo "$rc" >"$base.native.rc"
  if [ $rc = 77 ]; then
    local why
    why=$(grep -m1 '^skip:' "$base.native.err" | sed 's/^skip: //')
    for tr in native $transports; do result SKIP "$name" "$tr" "${why:-program skipped}"; done
    return
  fi
  local ndrv
  ndrv=$(sed -n 's/^e2e-driver: //p' "$base.native.err" | tail -n 1)
  # A second native run proves the output is deterministic, so a difference under Tally
  # means something.  E2E_NATIVE_ONCE=1 skips it.
  local nondet=
  if [ $rc = 0 ] && [ "${E2E_NATIVE_ONCE:-0}" != 1 ]; then
    tl_run native "$limit" "" "" -- "$@" >"$base.native2.out" 2>"$base.native2.err"
    if ! cmp -s "$base.native.out" "$base.native2.out"; then
      diff -u "$base.native.out" "$base.native2.out" >"$base.native2.diff"
      nondet=yes
    fi
  fi
  if [ $rc != 0 ]; then
    result FAIL "$name" native "exit $rc without Tally (see $base.native.out/.err)"
  elif [ -n "$nondet" ]; then
    result FAIL "$name" native "two native runs differ: the program is not deterministic (see $base.native2.diff)"
  elif [ -n "$ndrv" ] && [ "$(readlink -f "$ndrv" 2>/dev/null)" = "$guest_real" ]; then
    result FAIL "$name" native "the native run loaded Tally's guest library (LD_LIBRARY_PATH?)"
  else
    result PASS "$name" native "$(wc -l <"$base.native.out") lines"
  fi
  for tr in $transports; do
    if over_budget; then
      result FAIL "$name" "$tr" "not run: time budget (${budget} s) spent"
      continue
    fi
    if ! ensure_tallyd; then
      result FAIL "$name" "$tr" "tallyd not running: $TL_ERR"
      continue
    fi
    tl_run "$tr" "$limit" "" "e2e-$name" -- "$@" >"$base.$tr.out" 2>"$base.$tr.err"
    local trc=$? why
    last_run="$name $tr"
    why=$(compare "$name" "$tr" $trc)
    if ! tl_alive; then
      why="tallyd died during this run${why:+; $why} (log: $(tail -n 1 "$TL_LOG"))"
      last_run=
    fi
    if [ -n "$why" ]; then
      result FAIL "$name" "$tr" "$why"
    else
      result PASS "$name" "$tr" "identical to native"
    fi
  done
}

# Skips a Python program whose module is missing, with the reason.
py_program() { # NAME MODULE SCRIPT
  [ -n "$pattern" ] && ! echo "$1" | grep -Eq -- "$pattern" && return
  if ! command -v "$PYTHON" >/dev/null 2>&1; then
    for tr in native $transports; do result SKIP "$1" "$tr" "$PYTHON not found"; done
    return
  fi
  if ! "$PYTHON" -c "import $2" >/dev/null 2>&1; then
    for tr in native $transports; do result SKIP "$1" "$tr" "python module $2 missing"; done
    return
  fi
  run_program "$1" "$PY_TIMEOUT" "$PYTHON" "$3"
}

# Two tenants at once: lc (latency-critical) and be (best-effort) on the same GPU.
two_tenants() {
  local name=two-tenants
  [ -n "$pattern" ] && ! echo "$name" | grep -Eq -- "$pattern" && return
  local prog=$B/tests/gpu/tenant-static base=$LOGS/$name
  for role in lc be; do
    tl_run native 120 "" "" -- "$prog" $role >"$base-$role.native.out" 2>"$base-$role.native.err"
    echo $? >"$base-$role.native.rc"
  done
  if [ "$(cat "$base-lc.native.rc")" != 0 ] || [ "$(cat "$base-be.native.rc")" != 0 ]; then
    result FAIL "$name" native "tenant failed without Tally (lc exit $(cat "$base-lc.native.rc"), be exit $(cat "$base-be.native.rc"))"
  else
    result PASS "$name" native "lc and be"
  fi
  for tr in $transports; do
    if over_budget || ! ensure_tallyd; then
      result FAIL "$name" "$tr" "not run: ${TL_ERR:-time budget spent}"
      continue
    fi
    local t0 lc_pid be_pid lc_rc be_rc why=
    t0=$(date +%s.%N)
    (
      tl_run "$tr" 120 best-effort e2e-be -- "$prog" be >"$base-be.$tr.out" 2>"$base-be.$tr.err"
      echo $? >"$base-be.$tr.rc"
      date +%s.%N >"$base-be.$tr.end"
    ) &
    be_pid=$!
    (
      tl_run "$tr" 120 latency-critical e2e-lc -- "$prog" lc >"$base-lc.$tr.out" 2>"$base-lc.$tr.err"
      echo $? >"$base-lc.$tr.rc"
      date +%s.%N >"$base-lc.$tr.end"
    ) &
    lc_pid=$!
    wait $lc_pid
    wait $be_pid
    lc_rc=$(cat "$base-lc.$tr.rc")
    be_rc=$(cat "$base-be.$tr.rc")
    local r
    r=$(compare "$name-lc" "$tr" "$lc_rc")
    [ -n "$r" ] && why="lc: $r"
    r=$(compare "$name-be" "$tr" "$be_rc")
    [ -n "$r" ] && why="${why:+$why; }be: $r"
    last_run="$name $tr"
    if ! tl_alive; then
      why="${why:+$why; }tallyd died (log: $(tail -n 1 "$TL_LOG"))"
      last_run=
    fi
    # Informational: did the two runs overlap in time?  (They were started together; lc is
    # short, so "no" means be had not even started its work when lc ended.)
    local overlap
    overlap=$(awk -v t0="$t0" -v a="$(cat "$base-lc.$tr.end")" -v b="$(cat "$base-be.$tr.end")" \
      'BEGIN { printf "lc %.2f s, be %.2f s after start", a - t0, b - t0 }')
    if [ -n "$why" ]; then
      result FAIL "$name" "$tr" "$why"
    else
      result PASS "$name" "$tr" "both identical to native ($overlap)"
    fi
  done
}

# GPU-wide used memory in MiB (empty when nvidia-smi cannot say).  The e2e runs are
# sequential, so a change while one tenant holds memory is that tenant's.
gpu_mem_used() {
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null |
    head -n 1 | tr -dc '0-9'
}

# A tenant killed with SIGKILL while it holds 4 GiB: its memory must come back (tallyd
# frees what a dead tenant owned) and the next tenant must still get correct answers.  The
# native line runs the same procedure against the real driver, which validates the method.
tenant_dies() {
  local name=tenant-dies prog=$B/tests/gpu/tenant-static tr
  [ -n "$pattern" ] && ! echo "$name" | grep -Eq -- "$pattern" && return
  for tr in native $transports; do
    local base=$LOGS/$name.$tr fifo=$TL_WORK/hold.$tr before peak after pid= why= hp note=
    if over_budget; then
      result FAIL "$name" "$tr" "not run: time budget (${budget} s) spent"
      continue
    fi
    if [ "$tr" != native ] && ! ensure_tallyd; then
      result FAIL "$name" "$tr" "tallyd not running: $TL_ERR"
      continue
    fi
    before=$(gpu_mem_used)
    rm -f "$fifo"
    mkfifo "$fifo"
    tl_run "$tr" 120 best-effort e2e-hold -- "$prog" hold <"$fifo" >"$base.out" 2>"$base.err" &
    hp=$!
    exec 7>"$fifo" # keeps the tenant's stdin open (no EOF) until it is killed
    local deadline=$((SECONDS + 60))
    while [ $SECONDS -lt $deadline ] && kill -0 $hp 2>/dev/null; do
      pid=$(sed -n 's/^holding 4096 MiB pid \([0-9]*\)$/\1/p' "$base.out")
      [ -n "$pid" ] && break
      sleep 0.1
    done
    peak=$(gpu_mem_used)
    if [ -n "$pid" ]; then
      kill -KILL "$pid" 2>/dev/null
    else
      why="the tenant never reported holding its memory ($(tail -n 1 "$base.err"))"
    fi
    exec 7>&-
    wait $hp 2>/dev/null
    if [ -z "$why" ]; then
      if [ -z "$before" ] || [ -z "$peak" ] || [ "$peak" -lt $((before + 3000)) ]; then
        note="GPU memory not measurable here (${before:-?} -> ${peak:-?} MiB)"
      else
        # 512 MiB of slack: module caches and pools may stay, a 4 GiB allocation may not.
        deadline=$((SECONDS + 20))
        after=$(gpu_mem_used)
        while [ "${after:-0}" -gt $((before + 512)) ] && [ $SECONDS -lt $deadline ]; do
          sleep 0.2
          after=$(gpu_mem_used)
        done
        if [ "${after:-0}" -gt $((before + 512)) ]; then
          why="GPU memory did not come back: $before MiB before, $peak holding, $after 20 s after the kill"
        else
          note="memory $before -> $peak -> $after MiB"
        fi
      fi
    fi
    if [ -z "$why" ]; then
      tl_run "$tr" "$C_TIMEOUT" latency-critical e2e-after-kill -- "$prog" lc \
        >"$base.next.out" 2>"$base.next.err"
      local nrc=$?
      if [ $nrc != 0 ] || ! grep -q 'mismatches: 0,' "$base.next.out"; then
        why="the next tenant failed after the kill (exit $nrc: $(grep -m1 'lc iterations' "$base.next.out"))"
      fi
    fi
    if [ "$tr" != native ] && ! tl_alive; then
      why="${why:+$why; }tallyd died (log: $(tail -n 1 "$TL_LOG"))"
    fi
    rm -f "$fifo"
    if [ -n "$why" ]; then
      result FAIL "$name" "$tr" "$why"
    else
      result PASS "$name" "$tr" "killed a tenant holding 4 GiB; $note; the next tenant is correct"
    fi
  done
}

# With no daemon at the address, cuInit fails with CUDA_ERROR_NO_DEVICE and the guest logs
# exactly one line naming the address it tried.
unreachable() {
  local name=unreachable tr addr
  [ -n "$pattern" ] && ! echo "$name" | grep -Eq -- "$pattern" && return
  for tr in $transports; do
    local base=$LOGS/$name.$tr why=
    case $tr in
      shm) addr=$TL_WORK/nobody.sock ;;
      tcp) addr=127.0.0.1:$(tl_free_port) ;;
    esac
    TL_SOCK=$TL_WORK/nobody.sock TL_PORT=${addr##*:} \
      tl_run "$tr" "$C_TIMEOUT" "" e2e-unreachable -- "$B/tests/gpu/drv-context" \
      >"$base.out" 2>"$base.err"
    local rc=$?
    if [ $rc = 124 ] || [ $rc = 137 ]; then
      why="timed out instead of failing"
    elif ! grep -q '^error CUDA_ERROR_NO_DEVICE at .*cuInit(0)$' "$base.out"; then
      why="cuInit did not return CUDA_ERROR_NO_DEVICE ($(grep -m1 'cuInit' "$base.out"))"
    elif [ "$(grep -c -F "$addr" "$base.err")" != 1 ]; then
      why="expected one log line naming $addr, found $(grep -c -F "$addr" "$base.err")"
    fi
    if [ -n "$why" ]; then
      result FAIL "$name" "$tr" "$why"
    else
      result PASS "$name" "$tr" "cuInit: CUDA_ERROR_NO_DEVICE; $(grep -F "$addr" "$base.err" | cut -c1-80)"
    fi
  done
}

# ---- the programs, cheapest and most basic first ----
for v in static shared; do
  run_program rt-device-$v "$C_TIMEOUT" "$B/tests/gpu/rt-device-$v"
done
run_program drv-context "$C_TIMEOUT" "$B/tests/gpu/drv-context"
run_program drv-graph "$C_TIMEOUT" "$B/tests/gpu/drv-graph"
run_program drv-graph-pinned "$C_TIMEOUT" "$B/tests/gpu/drv-graph" pinned
# A host node summing what a copy node of the same graph downloaded: over TCP that copy is
# staged and reaches the host only at the next synchronisation (guestlib/gstage.c).
case " $transports " in
  *" shm "*)
    transports=shm run_program rt-graph-static "$C_TIMEOUT" "$B/tests/gpu/rt-graph-static"
    ;;
esac
for v in static shared; do
  run_program rt-memory-$v "$C_TIMEOUT" "$B/tests/gpu/rt-memory-$v"
  run_program rt-stream-$v "$C_TIMEOUT" "$B/tests/gpu/rt-stream-$v"
  run_program rt-launch-$v "$C_TIMEOUT" "$B/tests/gpu/rt-launch-$v"
  run_program rt-errors-$v "$C_TIMEOUT" "$B/tests/gpu/rt-errors-$v"
done
run_program drv-module "$C_TIMEOUT" "$B/tests/gpu/drv-module"
py_program numba numba.cuda "$S/tests/gpu/numba-kernels.py"
py_program cupy cupy "$S/tests/gpu/cupy-ops.py"
two_tenants
tenant_dies
unreachable

# Sticky errors destroy the faulting process's context.  Under Tally they poison tallyd's shared
# context (the driver keeps the whole process poisoned), so tallyd re-executes itself once the
# tenants have gone (hostd/README.md), keeping its pid and listening sockets; the health check
# right after them shows that the next tenant is served by a clean GPU.
for v in static shared; do
  run_program rt-sticky-$v "$C_TIMEOUT" "$B/tests/gpu/rt-sticky-$v"
done
if [ -z "$pattern" ] || echo "rt-sticky after-sticky" | grep -Eq -- "$pattern"; then
  pattern='' run_program after-sticky "$C_TIMEOUT" "$B/tests/gpu/rt-launch-static"
fi

# tallyd must exit cleanly on SIGTERM.
if [ -z "$transports" ]; then
  : # native only: no tallyd was started
elif tl_alive; then
  tl_stop
  if [ "$TL_EXIT" = 0 ]; then
    result PASS tallyd sigterm "exit status 0"
  else
    result FAIL tallyd sigterm "exit status $TL_EXIT (log $LOGS/$(basename "$TL_LOG"))"
  fi
else
  result FAIL tallyd sigterm "tallyd was not running at the end"
fi

details
echo "e2e: $npass passed, $nfail failed, $nskip skipped"
if [ $nfail -gt 0 ]; then
  exit 1
fi
if [ $npass -eq 0 ]; then
  exit 77
fi
exit 0
