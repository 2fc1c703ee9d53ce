#!/bin/sh
# test-watchdog.sh: run one test program under a time bound.
#
# Every unit test runs through this (LOG_COMPILER in Makefile.am), so a test
# that hangs becomes one failed test with a reason instead of a test suite
# that never ends.  When the program outlives TALLY_TEST_TIMEOUT seconds
# (default 900; 0 turns the bound off), this prints to stderr, which the
# harness keeps in the test's .log:
#   - one line naming the program and the bound,
#   - every thread's stack of the program and of each process it started
#     (gdb, when it is installed and may attach),
# then kills the program and its descendants and exits 124, as timeout(1)
# does.  Otherwise it exits with the program's own status.
#
#   test-watchdog.sh PROGRAM [ARG...]
limit=${TALLY_TEST_TIMEOUT:-900}
case $limit in '' | *[!0-9]*) echo "test-watchdog: TALLY_TEST_TIMEOUT=$limit is not a number of seconds" >&2; exit 2 ;; esac
[ "$limit" -gt 0 ] || exec "$@"

mark=$(mktemp "${TMPDIR:-/tmp}/test-watchdog.XXXXXX") || exit 2
"$@" &
pid=$!

descendants() { # descendants PID: every process below PID, depth first
  for c in $(pgrep -P "$1" 2>/dev/null); do
    echo "$c"
    descendants "$c"
  done
}

(
  trap '' PIPE # a reader that went away must not stop the kill below
  n=0
  while [ "$n" -lt "$limit" ]; do
    sleep 1
    kill -0 "$pid" 2>/dev/null || exit 0
    n=$((n + 1))
  done
  procs="$pid $(descendants "$pid")"
  echo "test-watchdog: $* still running after ${limit} s (TALLY_TEST_TIMEOUT); killed" >&4
  if command -v gdb >/dev/null 2>&1; then
    for p in $procs; do
      echo "test-watchdog: stacks of pid $p: $(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null)" >&4
      timeout 60 gdb -q -nx -batch -p "$p" -ex 'thread apply all bt 30' </dev/null 2>&1 |
        grep -E '^(Thread|#)' >&4
    done
  fi
  echo timeout >"$mark"
  kill -KILL $procs 2>/dev/null
) 4>&2 >/dev/null 2>&1 &
watcher=$!

wait "$pid"
rc=$?
pkill -P "$watcher" sleep 2>/dev/null
kill "$watcher" 2>/dev/null
wait "$watcher" 2>/dev/null
[ -s "$mark" ] && rc=124
rm -f "$mark"
exit $rc
