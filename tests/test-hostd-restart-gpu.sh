#!/bin/sh
# test-hostd-restart-gpu.sh: tallyd restarts itself after a tenant's GPU fault, on a GPU.
#
# GPU machine only (exit 77 elsewhere).  On the real driver an illegal address poisons
# tallyd's whole process, so tallyd must re-execute itself (hostd/restart.c).  This runs
# the path that tests/test-hostd-restart.sh runs on the recording device, with the real
# tallyd and real faulting kernels (tests/test-hostd-restart-gpu.cu, built here with
# nvcc): both live tenants get 700 (cudaErrorIllegalAddress), a tenant arriving meanwhile
# waits and is served after the restart (same pid), the GPU memory of the poisoned
# process comes back, TCP still works, the grace period closes a tenant that stays,
# SIGTERM exits 0.  Prints "PASS: ..." / "FAIL: ..." per check and a total; exit 0
# when all passed.  Waits are bounded polls of log files (60 s: cuInit on a cold GPU).
# usage: test-hostd-restart-gpu   (TALLY_BUILDDIR, TALLY_SRCDIR, NVCC from the env)
B=${TALLY_BUILDDIR:-$(pwd)}
S=${TALLY_SRCDIR:-@TALLY_SRCDIR@}
CUDA=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA/bin/nvcc}
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "skipped: no GPU"
  exit 77
fi
tmp=$(mktemp -d /tmp/tally-restart-gpu-XXXXXX)
pids=
pass=0
fail=0
cleanup() { for p in $pids; do kill -9 "$p" 2>/dev/null; done; }
trap cleanup EXIT
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
bad() { # NAME FILE...: FAIL, with the files' tails
  fail=$((fail + 1)); echo "FAIL: $1"; shift
  for f in "$@"; do [ -f "$f" ] && tail -8 "$f" | sed "s|^|  $(basename "$f"): |"; done
}
count() { c=$(grep -c -- "$2" "$1" 2>/dev/null); echo "${c:-0}"; }
wait_for() { # FILE PATTERN [N]: until PATTERN occurs N (1) times in FILE
  i=0
  while [ "$(count "$1" "$2")" -lt "${3:-1}" ] && [ $i -lt 600 ]; do i=$((i + 1)); sleep 0.1; done
  [ "$(count "$1" "$2")" -ge "${3:-1}" ]
}
mem_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | tr -d ' '; }
if ! "$NVCC" -o "$tmp/tenant" "$S/tests/test-hostd-restart-gpu.cu" >"$tmp/nvcc.log" 2>&1; then
  cat "$tmp/nvcc.log"
  echo "hostd-restart-gpu: cannot build the tenant program"
  exit 1
fi
export LD_LIBRARY_PATH="$CUDA/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
start_daemon() { # NAME GRACE_MS: sets dpid, dlog, sock, port
  dlog="$tmp/$1.log"
  sock="$tmp/$1.sock"
  "$B/hostd/tallyd" --listen-unix "$sock" --listen-tcp 127.0.0.1:0 --state-dir "$tmp/state" \
    --restart-grace-ms "$2" --log-level info 2>"$dlog" 7>&- &
  dpid=$!
  pids="$pids $dpid"
  wait_for "$dlog" serving
  port=$(sed -n 's/.*serving.*(port \([0-9]*\)).*/\1/p' "$dlog" | head -1)
}
run() { # NAME ACTION [HOST]: a tenant to completion, output in $tmp/NAME.{out,err}
  "$B/guestlib/tally-run" --host "${3:-unix:$sock}" --name "$1" -- "$tmp/tenant" "$2" \
    >"$tmp/$1.out" 2>"$tmp/$1.err" 7>&-
}
hold() { # NAME: a "hold" tenant whose stdin is a fifo held open on fd 7
  mkfifo "$tmp/$1.in"
  "$B/guestlib/tally-run" --host "unix:$sock" --name "$1" -- "$tmp/tenant" hold \
    <"$tmp/$1.in" >"$tmp/$1.out" 2>"$tmp/$1.err" &
  hpid=$!
  pids="$pids $hpid"
  exec 7>"$tmp/$1.in"
  wait_for "$tmp/$1.out" ready
}

# ---- a long grace period: the restart waits for the tenants ----
start_daemon d1 60000
pid1=$dpid
[ -n "$port" ] || { cat "$dlog"; echo "hostd-restart-gpu: tallyd did not start"; exit 1; }
mem0=$(mem_used)
hold holder
mem_hold=$(mem_used)
run faulter fault
if grep -qx "sync 700" "$tmp/faulter.out" && grep -qx "after 700" "$tmp/faulter.out"; then
  ok "the faulting tenant gets 700 at its sync, and after"
else bad "the faulting tenant gets 700 at its sync, and after" "$tmp/faulter.out" "$tmp/faulter.err" "$dlog"; fi
TALLY_CONNECT_WAIT_MS=60000 "$B/guestlib/tally-run" --host "unix:$sock" --name waiter -- \
  "$tmp/tenant" healthy >"$tmp/waiter.out" 2>"$tmp/waiter.err" 7>&- &
wpid=$!
pids="$pids $wpid"
if wait_for "$tmp/waiter.err" "come back later"; then ok "a tenant arriving meanwhile is told to retry"
else bad "a tenant arriving meanwhile is told to retry" "$tmp/waiter.err" "$dlog"; fi
exec 7>&-
wait "$hpid"
if grep -qx "after 700 700" "$tmp/holder.out"; then ok "the other live tenant gets 700 too"
else bad "the other live tenant gets 700 too" "$tmp/holder.out" "$tmp/holder.err" "$dlog"; fi
if wait_for "$dlog" serving 2 && grep -q "tallyd pid $pid1 restarted" "$dlog" && kill -0 "$pid1" 2>/dev/null; then
  ok "tallyd re-executed itself (pid $pid1)"
else bad "tallyd re-executed itself (pid $pid1)" "$dlog"; fi
wait "$wpid"
if grep -qx "healthy 0" "$tmp/waiter.out"; then ok "the waiting tenant is served after the restart"
else bad "the waiting tenant is served after the restart" "$tmp/waiter.out" "$tmp/waiter.err" "$dlog"; fi
run fresh healthy
if grep -qx "healthy 0" "$tmp/fresh.out"; then ok "a new tenant is served (shm)"
else bad "a new tenant is served (shm)" "$tmp/fresh.out" "$tmp/fresh.err" "$dlog"; fi
run overtcp healthy "tcp://127.0.0.1:$port"
if grep -qx "healthy 0" "$tmp/overtcp.out"; then ok "a new tenant is served over TCP (socket kept across exec)"
else bad "a new tenant is served over TCP (socket kept across exec)" "$tmp/overtcp.out" "$tmp/overtcp.err" "$dlog"; fi
# The poisoned process's GPU memory (the holder's 1 GiB with it) is gone.
mem1=$(mem_used)
if [ "$mem_hold" -ge $((mem0 + 900)) ] && [ "$mem1" -le $((mem0 + 256)) ]; then
  ok "GPU memory back after the restart (MiB: $mem0 idle, $mem_hold holding 1 GiB, $mem1 after)"
else bad "GPU memory back after the restart (MiB: $mem0 idle, $mem_hold holding 1 GiB, $mem1 after)" "$dlog"; fi
# Twice in a row (the e2e runner's rt-sticky static, then shared).
run faulter2 fault
run fresh2 healthy
if grep -qx "sync 700" "$tmp/faulter2.out" && grep -qx "healthy 0" "$tmp/fresh2.out" && wait_for "$dlog" serving 3; then
  ok "a second fault restarts it again and the next tenant is served"
else bad "a second fault restarts it again and the next tenant is served" "$tmp/faulter2.out" "$tmp/fresh2.out" "$tmp/fresh2.err" "$dlog"; fi
# SIGTERM while a restart is pending: a clean exit.
hold holder4
run faulter4 fault
wait_for "$dlog" "restart pending" 3
kill -TERM "$pid1"
wait "$pid1"
rc=$?
exec 7>&-
wait "$hpid"
if [ $rc -eq 0 ]; then ok "SIGTERM during a pending restart exits 0"
else bad "SIGTERM during a pending restart exits 0 (status $rc)" "$dlog"; fi

# ---- a short grace period: a tenant that stays is closed ----
start_daemon d2 1000
pid2=$dpid
hold stuck
run faulter3 fault
if wait_for "$dlog" "closing 1 tenant" && wait_for "$dlog" serving 2; then
  ok "after the grace period the remaining tenant is closed and tallyd restarts"
else bad "after the grace period the remaining tenant is closed and tallyd restarts" "$dlog"; fi
exec 7>&-
wait "$hpid"
if grep -q "lost the channel.*'faulter3' hit CUDA_ERROR_ILLEGAL_ADDRESS" "$tmp/stuck.err"; then
  ok "the closed tenant is told whose fault ended it"
else bad "the closed tenant is told whose fault ended it" "$tmp/stuck.out" "$tmp/stuck.err" "$dlog"; fi
run fresh3 healthy
if grep -qx "healthy 0" "$tmp/fresh3.out"; then ok "a new tenant is served after the grace-period restart"
else bad "a new tenant is served after the grace-period restart" "$tmp/fresh3.out" "$tmp/fresh3.err" "$dlog"; fi
kill -TERM "$pid2"
wait "$pid2"
rc=$?
if [ $rc -eq 0 ]; then ok "the restarted tallyd exits 0 on SIGTERM"
else bad "the restarted tallyd exits 0 on SIGTERM (status $rc)" "$dlog"; fi

echo "hostd-restart-gpu: $pass passed, $fail failed (logs in $tmp)"
[ $fail -eq 0 ]
