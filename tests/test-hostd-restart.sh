#!/bin/sh
# test-hostd-restart.sh: tallyd restarts itself after a tenant's GPU fault.
#
# A context-corrupting error poisons tallyd's whole process on the real
# driver, so tallyd marks every tenant lost, refuses new ones with "come back
# later" and re-executes itself (same pid, same listening sockets) once they
# have gone or after --restart-grace-ms (hostd/restart.c).  This runs that
# path on tallyd-record, the recording device (its "fault" kernel makes every
# later synchronisation fail with CUDA_ERROR_ILLEGAL_ADDRESS = 700, sticky):
# CPU coverage of hostd and the guest's connect retry, never GPU coverage.
# Tenants are tests/guest-tenant-helper.  Waits are bounded polls of
# log files (10 s), never fixed sleeps.  Prints TAP.  KEEP=1 keeps the logs
# (daemon logs d1.log, d2.log; each tenant's NAME.out/.err) in /tmp/tally-restart-*.
B=${TALLY_BUILDDIR:-.}
T="$B/tests/guest-tenant-helper"
echo "1..14"
tmp=$(mktemp -d /tmp/tally-restart-XXXXXX)
pids=
cleanup() {
  for p in $pids; do kill -9 "$p" 2>/dev/null; done
  [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
fail() { # NAME FILE...: not ok, with the files' tails as TAP comments
  n=$((n + 1)); echo "not ok $n - $1"; shift
  for f in "$@"; do [ -f "$f" ] && tail -8 "$f" | sed "s|^|# $(basename "$f"): |"; done
}
count() { c=$(grep -c -- "$2" "$1" 2>/dev/null); echo "${c:-0}"; }
wait_for() { # FILE PATTERN [N]: until PATTERN occurs N (1) times in FILE
  i=0
  while [ "$(count "$1" "$2")" -lt "${3:-1}" ] && [ $i -lt 200 ]; do i=$((i + 1)); sleep 0.05; done
  [ "$(count "$1" "$2")" -ge "${3:-1}" ]
}
nfds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
start_daemon() { # NAME GRACE_MS: starts tallyd-record; sets dpid, dlog, sock, port
  dlog="$tmp/$1.log"
  sock="$tmp/$1.sock"
  "$B/hostd/tallyd-record" --listen-unix "$sock" --listen-tcp 127.0.0.1:0 \
    --state-dir "$tmp/state" --restart-grace-ms "$2" --log-level info 2>"$dlog" &
  dpid=$!
  pids="$pids $dpid"
  wait_for "$dlog" serving
  port=$(sed -n 's/.*serving.*(port \([0-9]*\)).*/\1/p' "$dlog" | head -1)
}
tenant() { # NAME ACTION [TALLY_HOST]: runs a tenant to completion, output in $tmp/NAME.{out,err}
  TALLY_HOST=${3:-unix:$sock} TALLY_NAME=$1 "$T" "$2" >"$tmp/$1.out" 2>"$tmp/$1.err" 7>&-
}
# Every other child runs with 7>&-: an inherited copy would keep the fifo open.
hold() { # NAME: starts a tenant that allocates, prints "ptr", then waits for its
  # stdin (a fifo held open on fd 7) to close, synchronises and allocates again
  mkfifo "$tmp/$1.in"
  TALLY_HOST=unix:$sock TALLY_NAME=$1 "$T" alloc-wait-sync <"$tmp/$1.in" >"$tmp/$1.out" \
    2>"$tmp/$1.err" &
  hpid=$!
  pids="$pids $hpid"
  exec 7>"$tmp/$1.in"
  wait_for "$tmp/$1.out" "^ptr"
}

# ---- daemon 1: a long grace period, so only tenants leaving end the wait ----
start_daemon d1 30000
pid1=$dpid
hold holder
hold_pid=$hpid
tenant faulter fault
if grep -qx "sync 700" "$tmp/faulter.out" && grep -qx "after 700" "$tmp/faulter.out"; then
  ok "the faulting tenant gets CUDA_ERROR_ILLEGAL_ADDRESS at its sync, and after"
else fail "the faulting tenant gets CUDA_ERROR_ILLEGAL_ADDRESS at its sync, and after" \
  "$tmp/faulter.out" "$tmp/faulter.err" "$dlog"; fi
# A tenant connecting now is told to come back later, and waits.
TALLY_HOST=unix:$sock TALLY_NAME=waiter TALLY_CONNECT_WAIT_MS=20000 "$T" healthy \
  >"$tmp/waiter.out" 2>"$tmp/waiter.err" 7>&- &
wpid=$!
TALLY_HOST=tcp://127.0.0.1:$port TALLY_NAME=tcpwaiter TALLY_CONNECT_WAIT_MS=20000 "$T" healthy \
  >"$tmp/tcpwaiter.out" 2>"$tmp/tcpwaiter.err" 7>&- &
twpid=$!
pids="$pids $wpid $twpid"
if wait_for "$tmp/waiter.err" "come back later" && wait_for "$tmp/tcpwaiter.err" "come back later" &&
  [ "$(count "$dlog" re-executing)" -eq 0 ]; then
  ok "tenants connecting while the restart is pending are told to retry (shm, tcp)"
else fail "tenants connecting while the restart is pending are told to retry (shm, tcp)" \
  "$tmp/waiter.err" "$tmp/tcpwaiter.err" "$dlog"; fi
exec 7>&- # the holder synchronises, allocates and exits
wait "$hold_pid"
if grep -qx "after 700 700" "$tmp/holder.out"; then
  ok "the other live tenant gets CUDA_ERROR_ILLEGAL_ADDRESS too"
else fail "the other live tenant gets CUDA_ERROR_ILLEGAL_ADDRESS too" "$tmp/holder.out" \
  "$tmp/holder.err" "$dlog"; fi
if wait_for "$dlog" serving 2 && grep -q "re-executing.*pid $pid1" "$dlog" &&
  grep -q "tallyd pid $pid1 restarted" "$dlog" && kill -0 "$pid1" 2>/dev/null; then
  ok "tallyd re-executes itself once every tenant has left (same pid, log line)"
else fail "tallyd re-executes itself once every tenant has left (same pid, log line)" "$dlog"; fi
wait "$wpid"
wait "$twpid"
if grep -qx "healthy 0" "$tmp/waiter.out" && [ "$(count "$tmp/waiter.err" "come back later")" -eq 1 ] &&
  grep -qx "healthy 0" "$tmp/tcpwaiter.out"; then
  ok "the tenants that waited are served after the restart (one log line each)"
else fail "the tenants that waited are served after the restart (one log line each)" \
  "$tmp/waiter.out" "$tmp/waiter.err" "$tmp/tcpwaiter.out" "$tmp/tcpwaiter.err" "$dlog"; fi
tenant fresh healthy
# Fresh state: tenant ids start at 1 again (1 was the holder before), and the
# first tenant served gets the device's first address, as the holder did.
first=$(grep -m1 "^ptr" "$tmp/holder.out")
if grep -qx "healthy 0" "$tmp/fresh.out" && grep -Eq "tenant 1 '(tcp)?waiter' connected" "$dlog" &&
  grep -qx "$first" "$tmp/waiter.out" "$tmp/tcpwaiter.out"; then
  ok "a new tenant is served with fresh state (ids from 1, device addresses from $first)"
else fail "a new tenant is served with fresh state (ids from 1, device addresses from $first)" "$tmp/fresh.out" "$dlog"; fi
tenant overtcp healthy "tcp://127.0.0.1:$port"
if grep -qx "healthy 0" "$tmp/overtcp.out" && [ "$(sed -n 's/.*serving.*(port \([0-9]*\)).*/\1/p' "$dlog" | sort -u | wc -l)" -eq 1 ]; then
  ok "the TCP listening socket survives the exec (same port)"
else fail "the TCP listening socket survives the exec (same port)" "$tmp/overtcp.out" \
  "$tmp/overtcp.err" "$dlog"; fi
# SIGTERM while a restart is pending: a clean exit 0, no exec.
hold holder2
tenant faulter2 fault
wait_for "$dlog" "restart pending" 2
kill -TERM "$pid1"
wait "$pid1"
rc=$?
exec 7>&-
wait "$hpid"
if [ $rc -eq 0 ] && [ "$(count "$dlog" re-executing)" -eq 1 ]; then
  ok "SIGTERM during a pending restart exits 0"
else fail "SIGTERM during a pending restart exits 0 (rc $rc)" "$dlog"; fi

# ---- daemon 2: a short grace period for a tenant that never leaves ----
start_daemon d2 300
pid2=$dpid
hold stuck
stuck_pid=$hpid
tenant faulter3 fault
if wait_for "$dlog" "closing 1 tenant" && wait_for "$dlog" serving 2 && kill -0 "$pid2" 2>/dev/null; then
  fds1=$(nfds "$pid2") # no tenant yet
  ok "after the grace period the remaining tenant is closed and tallyd restarts"
else fail "after the grace period the remaining tenant is closed and tallyd restarts" "$dlog"; fi
exec 7>&-
wait "$stuck_pid"
if grep -q "lost the channel.*tenant 2 'faulter3' hit CUDA_ERROR_ILLEGAL_ADDRESS" "$tmp/stuck.err" &&
  grep -q "^after " "$tmp/stuck.out" && ! grep -qx "after 0 0" "$tmp/stuck.out"; then
  ok "the closed tenant is told which tenant's fault ended it"
else fail "the closed tenant is told which tenant's fault ended it" "$tmp/stuck.out" \
  "$tmp/stuck.err" "$dlog"; fi
tenant fresh2 healthy
if grep -qx "healthy 0" "$tmp/fresh2.out"; then
  ok "a new tenant is served after the grace-period restart"
else fail "a new tenant is served after the grace-period restart" "$tmp/fresh2.out" \
  "$tmp/fresh2.err" "$dlog"; fi
# Nothing but the listening sockets crosses an exec: a second restart
# starts with exactly as many descriptors as the first.  (Compared between
# two restarts, not with the first start, which may have inherited
# descriptors from whoever ran this test: the exec closes those.)
tenant faulter4 fault
if wait_for "$dlog" serving 3 && [ "$(nfds "$pid2")" -eq "${fds1:-x}" ]; then
  ok "no descriptor leaks across the exec ($fds1 open after each restart)"
else fail "no descriptor leaks across the exec (${fds1:-?} then $(nfds "$pid2"))" "$dlog"
  ls -l "/proc/$pid2/fd" | sed 's/^/# /'; fi
kill -TERM "$pid2"
wait "$pid2"
rc=$?
if [ $rc -eq 0 ] && [ ! -e "$sock" ]; then ok "the restarted tallyd exits 0 on SIGTERM, removing its socket"
else fail "the restarted tallyd exits 0 on SIGTERM, removing its socket (rc $rc)" "$dlog"; fi

# An unreachable daemon still fails at once, however long the wait allowed.
TALLY_CONNECT_WAIT_MS=600000 TALLY_HOST=unix:$tmp/nobody.sock "$T" init >"$tmp/nobody.out" 2>&1
if grep -qx "init 100" "$tmp/nobody.out"; then
  ok "an unreachable daemon gives CUDA_ERROR_NO_DEVICE without waiting"
else fail "an unreachable daemon gives CUDA_ERROR_NO_DEVICE without waiting" "$tmp/nobody.out"; fi
