#!/bin/sh
# test-lc-path.sh: the latency-critical path's behaviours on tallyd-record (CPU).
#
#   1. churn: TALLY_CHURN_N (default 1000) tenants start, cuInit and exit in a
#      row against one tallyd-record, alternating classes; every one connects,
#      none hangs (each bounded by timeout), and the slowest is printed
#   2. a socket whose listen backlog is full: cuInit fails within
#      TALLY_CONNECT_WAIT_MS, naming the address and the full backlog
#   3. a socket that accepts and never answers: cuInit fails within
#      TALLY_CONNECT_WAIT_MS, naming the address and the unanswered HELLO
#   4. hand-off times: tallyd --hops and TALLY_HOPS, joined by hops-report, host functions'
#      way back and the synchronisations a word answered included
#   5. --lc-poll yes: tallyd polls while an idle latency-critical tenant is
#      connected (CPU time over a second), --lc-poll no: it sleeps; a bad
#      TALLY_LC_SPIN_US is refused with a line naming it
#   6. no daemon: cuInit fails at once, naming the address
#   7. --lc-direct yes: the LC worker reads its ring, and over TCP its socket, itself (the
#      daemon log counts the frames), and sync-word / order / hostfn-ctxsync give the same
#      results as with no direct reading (no; shm over TCP); the daemon has as many
#      descriptors open after the tenants left as before they came
#   8. a reading worker slowed between choosing its ring and reading it
#      (TALLYD_TEST_DIRECT_GAP_US): the loop takes the ring back, queues what it reads and
#      hands it over again meanwhile, and requests still run in ring order
#   9. --hostfn-word yes: with the driver's callbacks made 20 ms late
#      (TALLYD_RECORD_HOSTFN_LATE_US), a polling worker reaches every host function by
#      its reach word, and so it does with no flag (the default); no: by the callback; the
#      functions run either way
#  10. --lc-poll-cpu: the polling worker runs on the CPU given (its threads' affinity, read
#      while the tenant is connected, and the daemon's line), a second LC tenant's worker
#      not on the same one, the next one after it left on it again; auto pins it to the
#      highest allowed CPU with 4 or more, and not at all below; a CPU tallyd may not run on
#      is refused at start
# Prints TAP.  Each tenant is guest-tenant-helper under tally-run.
B=${TALLY_BUILDDIR:-.}
N=${TALLY_CHURN_N:-1000}
echo "1..10"
tmp=$(mktemp -d /tmp/tally-lc-XXXXXX)
daemon=
mute=
cleanup() {
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null
  [ -n "$mute" ] && kill "$mute" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
. "${TALLY_SRCDIR:-$(dirname "$0")/..}/tests/tap.sh"
now_ms() { echo $(($(date +%s%N) / 1000000)); }
helper() { # helper HOST PRIO ACTION
  TALLY_HOST=$1 TALLY_PRIORITY=$2 timeout -k 2 20 "$B/guestlib/tally-run" --host "$1" \
    --priority "$2" -- "$B/tests/guest-tenant-helper" "$3"
}
S=${TALLY_SRCDIR:-$(dirname "$0")/..}
. "$S/tests/record-daemon.sh"
cpu_ticks() { # user + system ticks of pid $1
  sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}
cleaned_up() { # cleaned_up N: waits (10 s at most) until tallyd logged N tenants cleaned up
  i=0
  while [ "$(grep -c 'cleaned up' "$tmp/daemon.log")" -lt "$1" ] && [ $i -lt 200 ]; do
    i=$((i + 1)); sleep 0.05; done
}
# lc_hold J [VAR=VALUE...]: latency-critical tenant J (alloc-wait, with those variables) is
# connected and has allocated when it returns, and stays until lc_release J; its output is in
# $tmp/lcJ.out and $tmp/lcJ.err, its standard input the fifo $tmp/lcJ.in on descriptor 7 + J.
lc_hold() {
  lc_j=$1; shift
  rm -f "$tmp/lc$lc_j.in"; mkfifo "$tmp/lc$lc_j.in"
  (for a in "$@"; do export "$a"; done
   helper "unix:$tmp/sock" latency-critical alloc-wait) <"$tmp/lc$lc_j.in" >"$tmp/lc$lc_j.out" \
    2>"$tmp/lc$lc_j.err" &
  eval "lc_pid$lc_j=\$!"
  eval "exec $((7 + lc_j))>\"\$tmp/lc$lc_j.in\""
  i=0
  while ! grep -qs '^ptr' "$tmp/lc$lc_j.out" && [ $i -lt 200 ]; do i=$((i + 1)); sleep 0.05; done
}
lc_release() { # lc_release J: tenant J reads the end of its input and exits
  eval "exec $(($1 + 7))>&-"
  eval "wait \$lc_pid$1"
}

churn() {
  start_daemon || { echo "tallyd-record did not start"; return 1; }
  slow=0; slow_i=0; t_all=$(now_ms); i=0
  while [ $i -lt "$N" ]; do
    prio=best-effort; [ $((i % 2)) = 0 ] && prio=latency-critical
    t0=$(now_ms)
    out=$(helper "unix:$tmp/sock" $prio init 2>&1)
    dt=$(($(now_ms) - t0))
    if [ "$out" != "init 0" ]; then
      echo "tenant $i ($prio) after ${dt} ms: $out"; stop_daemon; return 1
    fi
    [ $dt -gt $slow ] && { slow=$dt; slow_i=$i; }
    i=$((i + 1))
  done
  echo "note: $N tenants in $(($(now_ms) - t_all)) ms; slowest start-to-exit ${slow} ms (tenant $slow_i)"
  kill -0 "$daemon" || { echo "tallyd-record died"; return 1; }
  stop_daemon
}
check "$N tenants start and stop in a row, none hangs" churn

mute_start() { # mute_start full|silent
  rm -f "$tmp/mute.sock" "$tmp/mute.in"
  mkfifo "$tmp/mute.in"
  "$B/tests/mute-listener" "$tmp/mute.sock" "$1" <"$tmp/mute.in" >"$tmp/mute.out" &
  mute=$!
  exec 7>"$tmp/mute.in"
  i=0
  while ! grep -qs ready "$tmp/mute.out" && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.05; done
}
mute_stop() {
  exec 7>&-
  wait "$mute" 2>/dev/null
  mute=
}
bounded() { # bounded full|silent WANT: cuInit fails in time with WANT in its message
  mute_start "$1"
  t0=$(now_ms)
  out=$(TALLY_CONNECT_WAIT_MS=300 helper "unix:$tmp/mute.sock" best-effort init 2>&1)
  dt=$(($(now_ms) - t0))
  mute_stop
  echo "$out"
  echo "note: cuInit gave up after $dt ms (TALLY_CONNECT_WAIT_MS=300)"
  echo "$out" | grep -q "^init 100$" && echo "$out" | grep -q "$tmp/mute.sock" &&
    echo "$out" | grep -q "$2" && [ $dt -lt 5000 ]
}
check "connect to a full backlog fails within TALLY_CONNECT_WAIT_MS, naming it" \
  bounded full "listen backlog stayed full"
check "a daemon that never answers fails cuInit within TALLY_CONNECT_WAIT_MS" \
  bounded silent "no answer to HELLO within"

hops() {
  start_daemon --hops "$tmp/hops" || return 1
  TALLY_HOPS=$tmp/hops helper "unix:$tmp/sock" latency-critical healthy | grep -q "^healthy 0$" ||
    { echo "tenant failed"; return 1; }
  stop_daemon
  grep -c '^G ' "$tmp/hops"; grep -c '^D ' "$tmp/hops"
  "$B/tests/bench/hops-report" --ops "$tmp/hops" >"$tmp/report" || { cat "$tmp/report"; return 1; }
  cat "$tmp/report"
  for hop in "read by tallyd's loop" "taken by the tenant's worker" "handler (driver" \
    "reply handed to wire" "guest woke" "total"; do
    grep -F "$hop" "$tmp/report" | grep -qv '| - |' || { echo "no figures for: $hop"; return 1; }
  done
  # --ops: the tenant's requests by op with their counts (the helper's HELLO, its allocation
  # and its copy back, one call each).
  for op in HELLO MEM_ALLOC DTOH; do
    grep -Eq "^\\| guest-tenant-helper \\| $op \\| call \\| 1 \\| [0-9.]+ \\| [0-9.]+ \\| [0-9.]+ \\| [0-9.]+ \\|\$" \
      "$tmp/report" || { echo "no per-op row for $op"; return 1; }
  done
  # --op by name keeps that op's one call; --skip-last leaves a tenant's last calls out.
  "$B/tests/bench/hops-report" --op mem_alloc "$tmp/hops" | grep -q "^hops: 1 calls joined" ||
    { echo "--op mem_alloc did not keep one call"; return 1; }
  "$B/tests/bench/hops-report" --op MEM_ALLOC --skip-last 100000 "$tmp/hops" |
    grep -q "^hops: 0 calls joined" || { echo "--skip-last kept calls"; return 1; }
  "$B/tests/bench/hops-report" --op no_such_op "$tmp/hops" 2>/dev/null && return 1
  # A tenant's pinned memory registered by its worker is in the hops as PINNED_MAP (no
  # request), by op only: the post rows leave it out.
  rm -f "$tmp/hops"
  start_daemon --hops "$tmp/hops" || return 1
  TALLY_HOPS=$tmp/hops helper "unix:$tmp/sock" latency-critical pinned-ops | grep -q "^pinned 0$" ||
    { echo "pinned tenant failed"; return 1; }
  stop_daemon
  "$B/tests/bench/hops-report" --ops "$tmp/hops" >"$tmp/report" || { cat "$tmp/report"; return 1; }
  grep -Eq "^\\| guest-tenant-helper \\| PINNED_MAP \\| post \\| 1 \\| [0-9.]+ \\| [0-9.]+ \\| [0-9.]+ \\| [0-9.]+ \\|\$" \
    "$tmp/report" || { cat "$tmp/report"; echo "no PINNED_MAP row"; return 1; }
  "$B/tests/bench/hops-report" --op pinned_map "$tmp/hops" | grep -q "(1 posts, daemon side)" ||
    { echo "--op pinned_map did not keep the registration"; return 1; }
  posts=$(awk '$1 == "D" && $5 == "p" && $4 != 4294967295' "$tmp/hops" | wc -l)
  "$B/tests/bench/hops-report" "$tmp/hops" | grep -q "($posts posts, daemon side)" ||
    { echo "the registration counted as a post (posts: $posts)"; return 1; }
  # Host functions' way back: one F line per function run, joined with the HOSTFN_WAIT call
  # that handed it to the guest (the helper runs 5).
  rm -f "$tmp/hops"
  start_daemon --hops "$tmp/hops" || return 1
  TALLY_HOPS=$tmp/hops helper "unix:$tmp/sock" latency-critical hostfn-ctxsync |
    grep -q "^ctxsync held 1$" || { echo "host-function tenant failed"; return 1; }
  stop_daemon
  "$B/tests/bench/hops-report" "$tmp/hops" >"$tmp/report"
  sed -n '/host functions/,$p' "$tmp/report"
  [ "$(grep -c '^F guest-tenant-helper ' "$tmp/hops")" -eq 5 ] || { echo "not 5 F lines"; return 1; }
  grep -qF "(5 host functions, 5 joined with the guest's wait)" "$tmp/report" || return 1
  for hop in "reached (the driver's callback)" "host-function thread woke" "reported done" \
    "the stream held"; do
    grep -F "$hop" "$tmp/report" | grep -qv '| - |' || { echo "no figures for: $hop"; return 1; }
  done
  # Synchronisations the GPU answered by a word make no call: the guest keeps them as id 0
  # and hops-report joins each with tallyd's STREAM_MARK post (the helper's 21 words).
  rm -f "$tmp/hops"
  start_daemon --hops "$tmp/hops" || return 1
  TALLY_HOPS=$tmp/hops helper "unix:$tmp/sock" latency-critical sync-word >"$tmp/sw" ||
    { echo "sync-word tenant failed"; return 1; }
  stop_daemon
  grep -q "^rounds 0$" "$tmp/sw" || { cat "$tmp/sw"; return 1; }
  words=$(awk '$1 == "G" && $3 == 0' "$tmp/hops" | wc -l)
  [ "$words" -ge 21 ] || { echo "$words word synchronisations kept, not 21 or more"; return 1; }
  "$B/tests/bench/hops-report" --op stream_sync "$tmp/hops" >"$tmp/report" || return 1
  sed -n '/by a word/,$p' "$tmp/report"
  grep -qF "($words synchronisations the GPU answered by a word, $words joined)" "$tmp/report" ||
    { echo "not every word synchronisation joined"; return 1; }
  for hop in "STREAM_MARK in the ring" "read by tallyd" "the GPU's write queued" \
    "guest saw the word" "word seen)"; do
    grep -F "$hop" "$tmp/report" | grep -qv '| - |' || { echo "no figures for: $hop"; return 1; }
  done
  "$B/tests/bench/hops-report" --last 5 --op stream_mark "$tmp/hops" |
    grep -qF "answered by a word, 5 joined)" || { echo "--last 5 did not keep 5"; return 1; }
  return 0
}
check "hand-off times are recorded on both sides and joined" hops

# runnable_share PID: in how many of 20 looks, 50 ms apart, some thread of PID
# was running or ready to run (state R), in percent.  A poller always is, even
# when other jobs take the CPUs; a daemon that sleeps almost never.
runnable_share() {
  n=0; k=0
  while [ $k -lt 20 ]; do
    if sed 's/^.*) //' /proc/"$1"/task/*/stat 2>/dev/null | cut -d' ' -f1 | grep -q R; then
      n=$((n + 1))
    fi
    k=$((k + 1)); sleep 0.05
  done
  echo $((n * 5))
}
idle_cpu() { # idle_cpu MODE: prints tallyd's CPU % and runnable share (runnable_share) over
             # 1 s with an idle LC tenant
  start_daemon --lc-poll "$1" || return 1
  lc_hold 1 TALLY_LC_SPIN_US=abc
  sleep 0.2
  a=$(cpu_ticks "$daemon"); run=$(runnable_share "$daemon"); b=$(cpu_ticks "$daemon")
  lc_release 1
  stop_daemon
  echo "$(((b - a) * 100 / $(getconf CLK_TCK))) $run"
}
lc_poll() {
  yes=$(idle_cpu yes) || return 1
  grep -q "TALLY_LC_SPIN_US=abc: expected" "$tmp/lc1.err" || { echo "bad TALLY_LC_SPIN_US not logged"; return 1; }
  no=$(idle_cpu no) || return 1
  set -- $yes $no
  echo "note: tallyd with an idle latency-critical tenant: --lc-poll yes ${1}% CPU, runnable" \
    "in ${2}% of looks; no ${3}% CPU, runnable in ${4}%"
  # The CPU share of a poller depends on what else runs (a whole core when it
  # has one, 1% on a 2-core machine whose CPUs other test jobs kept busy), so
  # the check is on the thread's state: a poller is always runnable, a daemon
  # whose idle tenant sleeps nearly never.
  [ "$2" -ge 80 ] && [ "$4" -le 30 ]
}
check "--lc-poll yes polls for an idle LC tenant, no sleeps" lc_poll

unreachable() {
  out=$(TALLY_CONNECT_WAIT_MS=200 helper "unix:$tmp/nothing.sock" best-effort init 2>&1)
  echo "$out"
  echo "$out" | grep -q "^init 100$" && echo "$out" | grep -q "cannot reach tallyd at unix:$tmp/nothing.sock"
}
check "no daemon: cuInit fails at once naming the address" unreachable

direct() { # the same requests with the worker reading the ring or socket itself and not
  for run in yes:unix no:unix yes:tcp shm:tcp; do
    mode=${run%:*} via=${run#*:}
    start_daemon --lc-poll yes --lc-direct $mode --listen-tcp 127.0.0.1:0 || return 1
    at="unix:$tmp/sock"
    port=$(sed -n 's/.*serving.*(port \([0-9]*\)).*/\1/p' "$tmp/daemon.log" | head -n 1)
    [ $via = tcp ] && at="tcp://127.0.0.1:$port"
    fds=$(ls "/proc/$daemon/fd" | wc -l)
    sw=$(helper "$at" latency-critical sync-word) || { echo "sync-word: exit $?"; return 1; }
    ord=$(helper "$at" latency-critical order) || { echo "order: exit $?"; return 1; }
    # The worker waits in cuCtxSynchronize for a host function whose answer comes through the
    # ring or socket it reads: the loop must take it back (a hang here is the fault).
    hcs=$(helper "$at" latency-critical hostfn-ctxsync) ||
      { echo "hostfn-ctxsync: exit $?"; return 1; }
    cleaned_up 3 # the workers' last lines come after their tenants left
    # Every descriptor goes with its tenant (the worker's copy of a socket it read included).
    i=0
    while [ "$(ls "/proc/$daemon/fd" | wc -l)" != "$fds" ] && [ $i -lt 100 ]; do
      i=$((i + 1)); sleep 0.02; done
    fds_after=$(ls "/proc/$daemon/fd" | wc -l)
    stop_daemon
    frames=$(sed -n 's/.*its worker read \([0-9]*\) frames.*/\1/p' "$tmp/daemon.log" | head -n 1)
    echo "note: --lc-direct $mode over $via: sync-word '$(echo $sw)', order '$ord', '$hcs'," \
      "frames read by the worker: ${frames:-none}, descriptors $fds before, $fds_after after"
    [ "$fds_after" = "$fds" ] || return 1
    [ "$(echo $sw)" = "held 1 value 7 rounds 0 error 400 after 0" ] || return 1
    [ "$ord" = "order 0 of 64" ] || return 1
    [ "$hcs" = "ctxsync held 1" ] || return 1
    if [ $mode = yes ]; then [ "${frames:-0}" -gt 0 ] || return 1
    else [ -z "$frames" ] || return 1; fi
  done
}
check "--lc-direct: the LC worker reads its ring or socket itself, with the same results" direct

slow_reader() { # the queue the loop filled first, then the ring: spaced 0 of 512
  TALLYD_TEST_DIRECT_GAP_US=150 start_daemon --lc-poll yes --lc-direct yes || return 1
  ord=$(helper "unix:$tmp/sock" latency-critical spaced) || { echo "spaced: exit $?"; stop_daemon; return 1; }
  cleaned_up 1
  stop_daemon
  echo "note: worker 150 us late to its ring: '$ord'," \
    "$(sed -n 's/.*(its worker read \(.*\))$/\1/p' "$tmp/daemon.log")"
  [ "$ord" = "spaced 0 of 512" ]
}
check "a worker late to its ring still runs requests in ring order" slow_reader

hostfn_word() { # a tenant waiting for its host functions with no call: word or callback
  for mode in yes no default; do
    flag="--hostfn-word $mode"
    [ $mode = default ] && flag=
    # flag is empty or two words: unquoted on purpose
    TALLYD_RECORD_HOSTFN_LATE_US=20000 start_daemon --lc-poll yes $flag || return 1
    hw=$(helper "unix:$tmp/sock" latency-critical hostfn-wait) || { echo "exit $?"; stop_daemon; return 1; }
    hcs=$(helper "unix:$tmp/sock" latency-critical hostfn-ctxsync) || { stop_daemon; return 1; }
    cleaned_up 2
    stop_daemon
    reached=$(grep 'host functions reached' "$tmp/daemon.log" | head -n 1 | sed 's/.*reached //')
    echo "note: --hostfn-word $mode: '$hw', '$hcs', reached ${reached:-(no line)}"
    [ "$hw" = "hostfn-wait 20 of 20 ran" ] && [ "$hcs" = "ctxsync held 1" ] || return 1
    if [ $mode != no ]; then # yes is the default
      [ "$reached" = "20 by their word, 0 by the driver's callback" ] || return 1
    else
      [ -z "$reached" ] || return 1
    fi
  done
}
check "--hostfn-word: a polling worker hears of a host function from the GPU's word" hostfn_word

# worker_cpus: the CPU lists of the daemon's threads that are pinned to one CPU, sorted.
worker_cpus() {
  grep -h '^Cpus_allowed_list' /proc/"$daemon"/task/*/status 2>/dev/null | awk '{ print $2 }' |
    grep -v '[-,]' | sort -u | tr '\n' ' '
}
pinned_on() { # pinned_on K FLAG...: the CPU lists of the pinned threads while K LC tenants are
              # connected
  k=$1; shift
  start_daemon --lc-poll yes "$@" || return 1
  for t in $(seq 1 "$k"); do lc_hold "$t"; done
  cpus=$(worker_cpus)
  for t in $(seq 1 "$k"); do lc_release "$t"; done
  stop_daemon
  echo "$cpus"
}
lc_poll_cpu() {
  allowed=$(taskset -pc $$ 2>/dev/null | sed 's/.*: //')
  lo=$(echo "$allowed" | cut -d, -f1 | cut -d- -f1)
  top=$(echo "$allowed" | tr ',' '\n' | sed 's/.*-//' | sort -n | tail -n 1)
  ncpu=$(nproc)
  on=$(pinned_on 1 --lc-poll-cpu "$lo") || return 1
  grep -q "tenant 1: its polling worker runs on CPU $lo\$" "$tmp/daemon.log" || {
    echo "no line for CPU $lo"; return 1; }
  # two tenants, one CPU asked for: the second worker gets what auto gives, never CPU lo too
  two=$(pinned_on 2 --lc-poll-cpu "$lo") || return 1
  [ "$(grep -c "its polling worker runs on CPU $lo\$" "$tmp/daemon.log")" = 1 ] || {
    echo "CPU $lo given twice"; return 1; }
  # a tenant that left gives its CPU back: the next one, after its cleanup, gets it again
  start_daemon --lc-poll yes --lc-poll-cpu "$lo" || return 1
  for j in 1 2; do
    helper "unix:$tmp/sock" latency-critical init >/dev/null 2>&1 || { stop_daemon; return 1; }
    cleaned_up $j
  done
  stop_daemon
  again=$(grep -c "its polling worker runs on CPU $lo\$" "$tmp/daemon.log")
  [ "$again" = 2 ] || { echo "CPU $lo given $again times to two tenants in a row"; return 1; }
  off=$(pinned_on 1 --lc-poll-cpu none) || return 1
  grep -q "polling worker" "$tmp/daemon.log" && { echo "none still pinned"; return 1; }
  auto=$(pinned_on 1) || return 1
  # a CPU tallyd may not run on is refused at start, naming the ones it may
  bad=$("$B/hostd/tallyd-record" --listen-unix "$tmp/bad.sock" --lc-poll-cpu 1023 2>&1)
  rc=$?
  echo "note: pinned threads with --lc-poll-cpu $lo: '$on', two tenants: '$two', none:" \
    "'$off', auto ($ncpu CPUs): '$auto'; --lc-poll-cpu 1023: exit $rc"
  [ "$on" = "$lo " ] && [ -z "$off" ] || return 1
  if ! echo "$allowed" | grep -q 1023; then
    [ $rc = 2 ] && echo "$bad" | grep -q "lc-poll-cpu 1023: tallyd may run on CPUs .*$top only" ||
      return 1
  fi
  if [ "$ncpu" -ge 4 ]; then
    # a quarter of the CPUs polls at most: with fewer than 8, CPU lo was the one
    want="$lo "
    [ "$ncpu" -ge 8 ] && want=$(printf '%s\n' "$lo" "$top" | sort -u | tr '\n' ' ')
    [ "$auto" = "$top " ] && grep -q "its polling worker runs on CPU $top" "$tmp/daemon.log" &&
      [ "$two" = "$want" ]
  else
    [ -z "$auto" ] && grep -q "its polling worker is not pinned" "$tmp/daemon.log" &&
      [ "$two" = "$lo " ]
  fi
}
check "--lc-poll-cpu: the polling worker runs on its own CPU, auto's choice by CPUs allowed" \
  lc_poll_cpu
