#!/bin/sh
# test-watchdog.sh: the time bound every test program runs under
# (build-aux/test-watchdog.sh).
#
#   1. a program that ends in time: its status and output pass through
#   2. one that outlives TALLY_TEST_TIMEOUT: killed with the processes it
#      started, status 124, a line naming it and the bound, and (gdb
#      installed) a heading for each process's stacks
#   3. TALLY_TEST_TIMEOUT=0: no bound; a value that is not a number of
#      seconds: status 2 and the reason, nothing run
# Prints TAP.
S=${TALLY_SRCDIR:-.}
W="$S/build-aux/test-watchdog.sh"
echo "1..3"
tmp=$(mktemp -d /tmp/tally-watchdog-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
n=0
check() {
  n=$((n + 1)); name=$1; shift
  if "$@" >"$tmp/out.$n" 2>&1; then echo "ok $n - $name"; else
    echo "not ok $n - $name"; sed 's/^/# /' "$tmp/out.$n"; fi
}

passes_through() {
  out=$(TALLY_TEST_TIMEOUT=30 sh "$W" sh -c 'echo said; echo warned >&2; exit 7' 2>"$tmp/err1")
  rc=$?
  [ "$rc" -eq 7 ] || { echo "status $rc, not 7"; return 1; }
  [ "$out" = said ] || { echo "stdout '$out'"; return 1; }
  grep -qx warned "$tmp/err1" || { echo "stderr:"; cat "$tmp/err1"; return 1; }
  ! grep -q test-watchdog "$tmp/err1" || { echo "a watchdog line for a program in time"; return 1; }
}
check "a program that ends in time keeps its status, stdout and stderr" passes_through

kills_a_hang() {
  start=$(date +%s)
  TALLY_TEST_TIMEOUT=2 sh "$W" sh -c 'sleep 300 & echo $! >"$1"; sleep 300' sh "$tmp/child" \
    2>"$tmp/err2"
  rc=$?
  took=$(($(date +%s) - start))
  [ "$rc" -eq 124 ] || { echo "status $rc, not 124"; return 1; }
  [ "$took" -lt 120 ] || { echo "took $took s"; return 1; }
  grep -q "still running after 2 s (TALLY_TEST_TIMEOUT); killed" "$tmp/err2" ||
    { echo "no reason:"; cat "$tmp/err2"; return 1; }
  child=$(cat "$tmp/child")
  i=0
  while kill -0 "$child" 2>/dev/null && [ $i -lt 50 ]; do i=$((i + 1)); sleep 0.1; done
  ! kill -0 "$child" 2>/dev/null || { echo "the program's child $child still runs"; return 1; }
  if command -v gdb >/dev/null 2>&1; then # the frames need gdb to be allowed to attach
    grep -q "^test-watchdog: stacks of pid " "$tmp/err2" || { echo "no stacks:"; cat "$tmp/err2"; return 1; }
  fi
}
check "a hang is killed with its children after TALLY_TEST_TIMEOUT, status 124, and named" kills_a_hang

settings() {
  TALLY_TEST_TIMEOUT=0 sh "$W" sh -c 'exit 3'
  [ $? -eq 3 ] || { echo "TALLY_TEST_TIMEOUT=0 did not pass the status through"; return 1; }
  TALLY_TEST_TIMEOUT=soon sh "$W" sh -c "touch '$tmp/ran'" 2>"$tmp/err3"
  rc=$?
  [ "$rc" -eq 2 ] || { echo "TALLY_TEST_TIMEOUT=soon: status $rc, not 2"; return 1; }
  [ ! -e "$tmp/ran" ] || { echo "TALLY_TEST_TIMEOUT=soon ran the program"; return 1; }
  grep -q "TALLY_TEST_TIMEOUT=soon is not a number of seconds" "$tmp/err3" ||
    { echo "no reason:"; cat "$tmp/err3"; return 1; }
}
check "TALLY_TEST_TIMEOUT=0 sets no bound; a value that is not seconds is refused with the reason" settings
