#!/bin/sh
# test-forward-bench-table.sh: forward-bench's table (tests/bench/forward-bench-table.awk)
# from made-up figures of three rounds, one of whose shm runs did not complete: the
# medians over the rounds that did, the ratios to native, the targets met or not, the
# open-loop request targets, each round's ratio (a missing run is "-"), and a wrong chain
# result named.  Prints TAP.
S=${TALLY_SRCDIR:-..}
A=$S/tests/bench/forward-bench-table.awk
echo "1..5"
tmp=$(mktemp -d /tmp/tally-fbtable-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# fig CONFIG ROUND CHAIN_MS LAUNCH_SYNC_US REQ_P50 REQ_P99 [CHAIN_OK]
fig() {
  printf '%s chain_ms_p50 %s %s\n%s launch_sync_us_p50 %s %s\n' "$1" "$3" "$2" "$1" "$4" "$2"
  printf '%s req_us_p50 %s %s\n%s req_us_p99 %s %s\n' "$1" "$5" "$2" "$1" "$6" "$2"
  printf '%s tcp_rtt_us_p50 20 %s\n' "$1" "$2"
  printf '%s chain_ok %s %s\n%s copy_ok 1 %s\n' "$1" "${7:-1}" "$2" "$1" "$2"
}
{
  fig native 1 4.0 10 230 250
  fig shm 1 4.4 12 235 260
  fig tcp 1 4.2 25 255 300
  fig native 2 5.0 10 232 260
  # shm round 2 did not complete: no lines
  fig tcp 2 5.0 26 260 310
  fig native 3 3.6 8 228 240
  fig shm 3 4.5 13 240 300
  fig tcp 3 4.0 24 250 290
} >"$tmp/ok.in"
out=$tmp/ok.out
if awk -v transports="shm tcp" -f "$A" "$tmp/ok.in" >"$out" 2>&1 &&
  # medians: native chain 4.0 (3.6 4.0 5.0), shm 4.45 (4.4 4.5: two rounds), tcp 4.2
  grep -q '^| 1000-kernel chain (ms) | 4.0 | 4.45 | 4.2 | 1.11x | 1.05x | <= 1.05x | NO |$' "$out" &&
  grep -q '^| launch + sync p50 (us) | 10 | 12.5 | 25 | 1.25x | 2.50x | <= 1.20x | NO |$' "$out" &&
  grep -q '^| open-loop request p99 (us) | 250 | 280 | 300 | 1.12x | 1.20x | <= 1.10x | NO |$' "$out" &&
  grep -q '^open-loop p50 over shm: 237.5 us vs native 230 + 10 us: meets$' "$out" &&
  grep -q '^open-loop p50 over TCP: 255 us vs native 230 + one TCP round trip 20 us: NO$' "$out" &&
  grep -q '^1000-kernel chain over TCP: 4.2 ms vs native 4.0 ms, 1.050x (target <= 1.05x): meets$' "$out" &&
  grep -q '^per round, tally/native (rounds 1-3; the table has the medians):$' "$out" &&
  grep -q '^  1000-kernel chain (ms), shm: 1.10x - 1.25x$' "$out" &&
  grep -q '^  1000-kernel chain (ms), tcp: 1.05x 1.00x 1.11x$' "$out" &&
  grep -q '^  launch + sync p50 (us), shm: 1.20x - 1.62x$' "$out" &&
  grep -q '^results correct (chain and copies): yes, every configuration$' "$out"; then
  echo "ok 1 - medians over the rounds that completed, ratios, targets, open-loop targets and each round's ratio"
else
  echo "not ok 1 - medians over the rounds that completed, ratios, targets, open-loop targets and each round's ratio"
  sed 's/^/# /' "$out"
fi
# One round only: no per-round lines; a wrong chain result is named.
{ fig native 1 4.0 10 230 250; fig shm 1 4.4 12 235 260 0; } >"$tmp/one.in"
out=$tmp/one.out
if awk -v transports="shm" -f "$A" "$tmp/one.in" >"$out" 2>&1 &&
  grep -q '^| metric | native | tally-shm | shm/native | target (shm) | shm meets |$' "$out" &&
  ! grep -q 'per round' "$out" &&
  grep -q '^results correct (chain and copies): shm NO; $' "$out"; then
  echo "ok 2 - one round: no per-round lines; a wrong chain result is named"
else
  echo "not ok 2 - one round: no per-round lines; a wrong chain result is named"
  sed 's/^/# /' "$out"
fi
# The reply column (the completion word off): its cells and ratio after tcp's, and its
# open-loop line.
{
  fig native 1 4.0 10 230 250; fig shm 1 4.4 12 235 260; fig reply 1 4.3 9.5 232 255
} >"$tmp/reply.in"
out=$tmp/reply.out
if awk -v transports="shm reply" -f "$A" "$tmp/reply.in" >"$out" 2>&1 &&
  grep -q '^| metric | native | tally-shm | shm, reply | shm/native | reply/native | target (shm) | shm meets |$' "$out" &&
  grep -q '^| launch + sync p50 (us) | 10 | 12 | 9.5 | 1.20x | 0.95x | <= 1.20x | yes |$' "$out" &&
  grep -q '^open-loop p50 over shm with tallyd.s reply (no completion word): 232 us vs native 230 + 10 us: meets$' "$out" &&
  grep -q '^results correct (chain and copies): yes, every configuration$' "$out"; then
  echo "ok 3 - the reply column, its ratio and its open-loop line"
else
  echo "not ok 3 - the reply column, its ratio and its open-loop line"
  sed 's/^/# /' "$out"
fi
# The queued column (a second tallyd, --lc-direct no) beside tcp and reply: every column in
# transports' order, its per-round ratios and its open-loop line after reply's.
{
  fig native 1 4.0 10 230 250; fig shm 1 4.4 12 235 260; fig tcp 1 4.2 25 255 300
  fig reply 1 4.3 9.5 232 255; fig queued 1 3.8 13 236 270
  fig native 2 5.0 10 232 260; fig shm 2 5.5 12 235 260; fig tcp 2 5.0 26 260 310
  fig reply 2 5.2 9.5 232 255; fig queued 2 4.5 14 239 280
} >"$tmp/queued.in"
out=$tmp/queued.out
if awk -v transports="shm tcp reply queued" -f "$A" "$tmp/queued.in" >"$out" 2>&1 &&
  grep -q '^| metric | native | tally-shm | tally-tcp | shm, reply | shm, queued | shm/native | tcp/native | reply/native | queued/native | target (shm) | shm meets |$' "$out" &&
  grep -q '^|---|---|---|---|---|---|---|---|---|---|---|---|$' "$out" &&
  grep -q '^| 1000-kernel chain (ms) | 4.5 | 4.95 | 4.6 | 4.75 | 4.15 | 1.10x | 1.02x | 1.06x | 0.92x | <= 1.05x | NO |$' "$out" &&
  grep -q '^  1000-kernel chain (ms), queued: 0.95x 0.90x$' "$out" &&
  sed -n '/^open-loop p50 over shm with tallyd.s reply/{n;p;}' "$out" |
    grep -q '^open-loop p50 over shm with the loop queueing for the worker (--lc-direct no): 237.5 us vs native 231 + 10 us: meets$' &&
  grep -q '^results correct (chain and copies): yes, every configuration$' "$out"; then
  echo "ok 4 - the queued column among the others, its ratios per round and its open-loop line"
else
  echo "not ok 4 - the queued column among the others, its ratios per round and its open-loop line"
  sed 's/^/# /' "$out"
fi
# The queued daemon's TCP column (queued-tcp: its loop reads the socket) after queued: its
# cells and ratio, its open-loop line against the round trip after the TCP one, and its
# chain line after the TCP one.
{
  fig native 1 4.0 10 230 250; fig tcp 1 4.2 25 248 300; fig queued-tcp 1 4.6 27 252 310
} >"$tmp/qtcp.in"
out=$tmp/qtcp.out
if awk -v transports="tcp queued-tcp" -f "$A" "$tmp/qtcp.in" >"$out" 2>&1 &&
  grep -q '^| metric | native | tally-tcp | tcp, queued | tcp/native | queued-tcp/native | target (shm) | shm meets |$' "$out" &&
  grep -q '^| 1000-kernel chain (ms) | 4.0 | 4.2 | 4.6 | 1.05x | 1.15x | <= 1.05x | - |$' "$out" &&
  sed -n '/^open-loop p50 over TCP: /{n;p;}' "$out" |
    grep -q '^open-loop p50 over TCP with the loop queueing for the worker (--lc-direct no): 252 us vs native 230 + one TCP round trip 20 us: NO$' &&
  grep -q '^open-loop p50 over TCP: 248 us vs native 230 + one TCP round trip 20 us: meets$' "$out" &&
  sed -n '/^1000-kernel chain over TCP: /{n;p;}' "$out" |
    grep -q '^1000-kernel chain over TCP with the loop queueing for the worker (--lc-direct no): 4.6 ms vs native 4.0 ms, 1.150x (target <= 1.05x): NO$'; then
  echo "ok 5 - the queued daemon's TCP column, its open-loop and chain lines"
else
  echo "not ok 5 - the queued daemon's TCP column, its open-loop and chain lines"
  sed 's/^/# /' "$out"
fi
