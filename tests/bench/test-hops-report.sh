#!/bin/sh
# test-hops-report.sh: hops-report's --gaps (tests/bench/hops-report.c) from made-up daemon
# records: the worker's time between back-to-back posts of one op, per tenant, a pair more
# than 20 us apart (idle time), a call between two posts, another op and a pinned-memory
# record left out; --op keeps one op; a file of one side's records only (no guest calls, or
# no daemon records) is read without a fault (the sanitizers' build runs this too).  The
# hops of real runs are checked by tests/test-lc-path.sh.  Prints TAP.
B=${TALLY_BUILDDIR:-.}
R=$B/tests/bench/hops-report
echo "1..5"
tmp=$(mktemp -d /tmp/tally-hops-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# d TENANT ID OP KIND ENTERED RETURNED: a daemon record (read, taken, entered, returned, replied)
d() { echo "D $1 $2 $3 $4 $(($5 - 300)) $(($5 - 200)) $5 $6 $(($6 + 50))"; }
{
  echo "G a 7 100 150 129500" # one call joined (the STREAM_SYNC below), so the exit is 0
  d a 0 24 p 1000 3500
  d a 0 24 p 3600 6100      # gap 100 ns, handler 2500
  d a 0 24 p 6300 8800      # gap 200
  d a 0 24 p 108800 111300  # 100 us after: idle, not a pair
  d a 0 24 p 111400 113900  # gap 100
  d a 7 11 c 114000 120000  # a call: no pair on either side
  d a 0 24 p 120100 122600
  d b 0 24 p 3550 6050      # tenant b: never paired with a's records
  d b 0 24 p 6110 9110      # gap 60, handler 3000
  d b 0 4294967295 p 9200 9300 # pinned memory: not a request
  d b 0 11 p 9400 9500      # another op after a LAUNCH: not a pair
} >"$tmp/hops"
n=0
check() { # check NAME CONDITION-COMMAND...
  n=$((n + 1)); name=$1; shift
  if "$@"; then echo "ok $n - $name"; else echo "not ok $n - $name"; cat "$tmp/out"; fi
}
"$R" --gaps "$tmp/hops" >"$tmp/out"; rc=$?
head='^| worker between back-to-back posts'
check "--gaps: 4 pairs (3 of a, 1 of b), mean 115 ns, exit 0" \
  sh -c "[ $rc -eq 0 ] && grep -q '$head (4 pairs, mean gap 115 ns) |' '$tmp/out'"
check "--gaps: gap p50 0.10 us, p99 0.20; handler p50 2.50, p99 3.00" \
  sh -c "grep -qx '| handler returned -> next handler entered | 0.10 | 0.20 |' '$tmp/out' &&
         grep -qx '| next handler (driver call) | 2.50 | 3.00 |' '$tmp/out'"
"$R" --gaps --op stream_sync "$tmp/hops" >"$tmp/out"
check "--gaps --op stream_sync: no pair of that op" \
  grep -q "$head (0 pairs, mean gap 0 ns) |" "$tmp/out"
grep '^D' "$tmp/hops" >"$tmp/daemon-only"
"$R" --gaps --ops "$tmp/daemon-only" >"$tmp/out" 2>&1; rc=$?
check "daemon records only: exit 1 (no call joined), the gaps table still printed, no fault" \
  sh -c "[ $rc -eq 1 ] && grep -q '$head (4 pairs, mean gap 115 ns) |' '$tmp/out' &&
         ! grep -q 'runtime error' '$tmp/out'"
grep '^G' "$tmp/hops" >"$tmp/guest-only"
"$R" --gaps "$tmp/guest-only" >"$tmp/out" 2>&1; rc=$?
check "guest records only: exit 1, 0 calls joined, no fault" \
  sh -c "[ $rc -eq 1 ] && grep -q '^hops: 0 calls joined (1 guest, 0 daemon records)' '$tmp/out' &&
         ! grep -q 'runtime error' '$tmp/out'"
