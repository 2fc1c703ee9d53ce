#!/bin/sh
# test-hostd-log.sh: what tallyd's log says about a tenant's failed requests
# (CPU, tallyd-record).
#
#   1. --log-level debug: a request tallyd answers with an error gets a line
#      naming the tenant, the request and the CUDA error; the daemon goes on
#      serving (a second tenant is healthy)
#   2. --log-level info: no such line
#   3. --log-level debug: a memset outside the tenant's memory is named with
#      its address and size and the tenant's range below it
#   4. the start-up line says how long the loop and a worker poll, as given
#      or as resolved by default (none on a host of fewer than 4 CPUs)
#   5. --log-level debug: each module load is named with its size, its
#      function count and how long the load and the description took
#   6. the start-up line names policy tally's settings, given or by default,
#      and a shared block time above the threshold stops tallyd with the
#      policy's reason
# Prints TAP.  Tenants are guest-tenant-helper under tally-run; "fault"
# launches the recording device's faulting kernel, so its synchronisation
# is answered with an error.
B=${TALLY_BUILDDIR:-.}
echo "1..7"
tmp=$(mktemp -d /tmp/tally-log-XXXXXX)
daemon=
cleanup() {
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
helper() { # helper ACTION
  timeout -k 2 20 "$B/guestlib/tally-run" --host "unix:$tmp/sock" --priority best-effort -- \
    "$B/tests/guest-tenant-helper" "$1"
}
S=${TALLY_SRCDIR:-$(dirname "$0")/..}
. "$S/tests/record-daemon.sh"
. "${TALLY_SRCDIR:-$(dirname "$0")/..}/tests/tap.sh"

# run_fault LEVEL: the faulting tenant, then a healthy one; prints the log's
# "answered" lines
run_fault() {
  start_daemon --log-level "$1" || { echo "tallyd-record did not start"; cat "$tmp/daemon.log"; return 1; }
  out=$(helper fault 2>&1)
  case $out in *"sync 0"*|"") echo "the faulting tenant's sync did not fail: $out"; return 1 ;; esac
  out=$(helper healthy 2>&1)
  case $out in *"healthy 0"*) ;; *) echo "second tenant: $out"; return 1 ;; esac
  stop_daemon
  grep "answered" "$tmp/daemon.log" >"$tmp/answered"
  return 0
}
debug_names_failed_requests() {
  run_fault debug || return 1
  grep -Eq "tenant [0-9]+: [A-Z_]+ answered [1-9][0-9]*" "$tmp/answered" ||
    { echo "no 'answered' line:"; cat "$tmp/daemon.log"; return 1; }
}
info_is_quiet() {
  run_fault info || return 1
  [ ! -s "$tmp/answered" ] || { echo "answered lines at info:"; cat "$tmp/answered"; return 1; }
}
check "--log-level debug names each request answered with an error; the daemon serves on" \
  debug_names_failed_requests
check "--log-level info does not" info_is_quiet
debug_names_stray_ranges() {
  start_daemon --log-level debug || { echo "tallyd-record did not start"; cat "$tmp/daemon.log"; return 1; }
  out=$(helper stray-memset 2>&1)
  stop_daemon
  ptr=$(echo "$out" | sed -n 's/^ptr //p')
  case $out in *"memset 1"*) ;; *) echo "the stray memset was not refused: $out"; return 1 ;; esac
  grep -q "MEMSET dst .* (4 bytes) is not memory of this tenant (the range below it: $ptr, 4096 bytes" \
    "$tmp/daemon.log" || { echo "no line naming the range (ptr $ptr):"; cat "$tmp/daemon.log"; return 1; }
}
check "--log-level debug names a memset outside the tenant's memory and the range below it" \
  debug_names_stray_ranges
# startup_says PATTERN ARGS...: tallyd-record, started with ARGS and stopped,
# logged a line matching PATTERN (a grep basic regular expression)
startup_says() {
  want=$1
  shift
  start_daemon "$@" || { echo "tallyd-record did not start"; cat "$tmp/daemon.log"; return 1; }
  stop_daemon
  grep -q "$want" "$tmp/daemon.log" || { echo "not in the log: $want"; cat "$tmp/daemon.log"; return 1; }
}
polling_is_named() {
  startup_says "polling: the loop after traffic 200 us; a worker after its tenant's last request 300 us; a latency-critical tenant's loop and worker the same" \
    --spin-us 200 --worker-spin-us 300 --lc-poll no || return 1
  if [ "$(getconf _NPROCESSORS_ONLN)" -ge 4 ]; then
    want="the loop after traffic 1000 us; a worker after its tenant's last request 1000 us; a latency-critical tenant's loop and worker without end"
  else
    want="the loop after traffic never; a worker after its tenant's last request 0 us; a latency-critical tenant's loop and worker the same"
  fi
  [ -n "${TALLY_WIRE_SPIN_US:-}" ] && want="a worker after its tenant's last request"
  startup_says "polling: .*$want"
}
check "the start-up line names the loop's and a worker's polling, given or by default" \
  polling_is_named
module_loads_are_timed() {
  run_fault debug || return 1
  grep -Eq "tenant [0-9]+: module [0-9a-f]{16} \(23 bytes\): 1 functions; loaded in [0-9]+ us, described in [0-9]+ us" \
    "$tmp/daemon.log" || { echo "no module load line:"; cat "$tmp/daemon.log"; return 1; }
}
check "--log-level debug times each module load (load, description, function count)" \
  module_loads_are_timed
scheduler_settings_are_named() {
  startup_says "scheduler: policy tally (threshold 40.0 us, resume after 50.0 us idle, depth 4; best-effort work kept running while the LC is active: blocks up to 20.0 us)" \
    --threshold-us 40 --be-depth 4 --share-block-us 20 || return 1
  startup_says "scheduler: policy tally (threshold 31.6 us, resume after 50.0 us idle, depth 8; best-effort work kept running while the LC is active: none)" ||
    return 1
  if timeout 10 "$B/hostd/tallyd-record" --listen-unix "$tmp/bad.sock" --state-dir "$tmp/bad-state" \
    --share-block-us 40 >"$tmp/bad.log" 2>&1; then
    echo "tallyd started with a shared block time above the threshold"; return 1
  fi
  grep -q "shared block time must not exceed the threshold" "$tmp/bad.log" ||
    { echo "no reason given:"; cat "$tmp/bad.log"; return 1; }
}
check "the start-up line names policy tally's settings; a shared block above the threshold is refused" \
  scheduler_settings_are_named
partition_instead_of_holding() {
  startup_says "best-effort work kept running while the LC is active: all of it, in a partition of 16 SMs (--be-sms-hold 0), up to 2000.0 us of device time in flight" \
    --be-sms 16 --be-sms-hold 0 || return 1
  startup_says "best-effort work kept running while the LC is active: all of it, in a partition of 16 SMs (--be-sms-hold 0), up to 2000.0 us of device time in flight" \
    --be-sms 12% --be-sms-hold 0 || return 1
  startup_says "all of it, in a partition of 16 SMs (--be-sms-hold 0), up to 32 launches in flight" \
    --be-sms 16 --be-sms-hold 0 --be-sms-inflight-us 0 || return 1
  startup_says "up to 500.0 us of device time in flight" \
    --be-sms 16 --be-sms-hold 0 --be-sms-inflight-us 500 || return 1
  grep -q "scheduler: 0 best-effort launches waited for the partition's in-flight bound (500.0 us of device time)" \
    "$tmp/daemon.log" || { echo "no in-flight bound line at exit:"; cat "$tmp/daemon.log"; return 1; }
  if timeout 10 "$B/hostd/tallyd-record" --listen-unix "$tmp/bad2.sock" --state-dir "$tmp/bad2-state" \
    --be-sms-hold 0 >"$tmp/bad2.log" 2>&1; then
    echo "tallyd started with --be-sms-hold 0 and no partition"; return 1
  fi
  grep -q -- "--be-sms-hold 0 needs --be-sms N" "$tmp/bad2.log" ||
    { echo "no reason given:"; cat "$tmp/bad2.log"; return 1; }
  startup_says "best-effort work kept running while the LC is active: blocks up to 200.0 us, in a partition of 16 SMs (--be-sms-hold 0), up to 2000.0 us of device time in flight" \
    --be-sms 16 --be-sms-hold 0 --be-sms-block-us 200 || return 1
  if timeout 10 "$B/hostd/tallyd-record" --listen-unix "$tmp/bad3.sock" --state-dir "$tmp/bad3-state" \
    --be-sms 16 --be-sms-block-us 200 >"$tmp/bad3.log" 2>&1; then
    echo "tallyd started with --be-sms-block-us and the partition held"; return 1
  fi
  grep -q -- "--be-sms-block-us needs --be-sms-hold 0" "$tmp/bad3.log" ||
    { echo "no reason given:"; cat "$tmp/bad3.log"; return 1; }
  if timeout 10 "$B/hostd/tallyd-record" --listen-unix "$tmp/bad4.sock" --state-dir "$tmp/bad4-state" \
    --be-sms 16 --be-sms-inflight-us 500 >"$tmp/bad4.log" 2>&1; then
    echo "tallyd started with --be-sms-inflight-us and the partition held"; return 1
  fi
  grep -q -- "--be-sms-inflight-us needs --be-sms-hold 0" "$tmp/bad4.log" ||
    { echo "no reason given:"; cat "$tmp/bad4.log"; return 1; }
}
check "--be-sms-hold 0 (and --be-sms-block-us, --be-sms-inflight-us) say so at start, --be-sms 12% of 132 SMs is 16; without --be-sms (--be-sms-hold 0) they are refused with the reason" \
  partition_instead_of_holding
