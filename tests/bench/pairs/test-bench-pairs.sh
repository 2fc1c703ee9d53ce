#!/bin/sh
# test-bench-pairs.sh: scripts/bench-pairs end to end on the CPU.
#
# The workloads are the stub programs (bench-pairs --stub, or workload files
# naming stub-lc.sh / stub-be.sh), nvidia-cuda-mps-control is
# fake-mps-control.sh on PATH, and tallyd is tallyd-record (the recording
# device; the stubs make no CUDA call, so this covers the harness's process
# management, never the GPU).  Checks: the plan, a run of every mode (the
# manifest, report, summary, plots, simulator table; MPS started and stopped
# once per MPS step with the client priorities; tenants through tally-run
# with their classes), failed and unsupported steps reported while the run
# goes on (timeouts, a BE never ready, a BE that dies (its row names the
# exception's line), MPS refusing to start or its probe
# client failing), and Ctrl-C
# stopping MPS and the tenants; the start handshake (the LC and the BE of a
# paired step start together and no request arrives before both are ready;
# an LC without {go} still starts after the BE is ready; a failure during
# the overlapped start stops both); --rounds; the CUDA C pair's programs carry PTX and
# check their arguments (the recording device runs no real kernel, so they
# are not run as tenants here).  Every wait is bounded.  Prints TAP.
B=${TALLY_BUILDDIR:-.}
S=${TALLY_SRCDIR:-..}
echo "1..17"
if ! command -v python3 >/dev/null 2>&1; then
  for i in $(seq 17); do echo "ok $i # SKIP python3 not found"; done
  exit 0
fi
tmp=$(mktemp -d /tmp/tally-bench-pairs-XXXXXX)
bg=
cleanup() { [ -n "$bg" ] && kill "$bg" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
mkdir -p "$tmp/bin" "$tmp/pairs"
ln -s "$S/tests/bench/pairs/fake-mps-control.sh" "$tmp/bin/nvidia-cuda-mps-control"
PATH=$tmp/bin:$PATH
TALLYD=$B/hostd/tallyd-record
FAKE_MPS_LOG=$tmp/mps.log
TALLY_MPS_PROBE=none # no GPU: no real MPS client can run; test 6 gives a fake probe
export PATH TALLYD FAKE_MPS_LOG TALLY_MPS_PROBE
. "${TALLY_SRCDIR:-$(dirname "$0")/../../..}/tests/tap.sh"
bp() { python3 "$S/scripts/bench-pairs" --builddir "$B" "$@"; }
status() { # status DIR PAIR MODE: that row's status in DIR's manifest
  awk -F, -v p="$2" -v m="$3" '$1 == p && $2 == m { print $3 }' "$1/manifest.csv"
}
lc_saw() { # lc_saw DIR PAIR MODEDIR ROLE TEXT: that tenant's stderr names TEXT
  grep -q "$5" "$1/raw/$2/$3/$4.err"
}

help() {
  bp --help | grep -q -- '--quick' && bp --help | grep -q 'azure:FILE' &&
    bp --version | grep -q '^bench-pairs (tally) '
}
check "--help names the flags, --version on stdout" help

dry() {
  out=$(bp --quick --dry-run --out "$tmp/dry") || return 1
  echo "$out"
  # 3 quick pairs x (calibrate, alone LC, alone BE + 4 other quick modes)
  # the product's default policy, each step's estimate, the whole set within 10 minutes
  echo "$out" | grep -q '^21 steps, about ' && echo "$out" | grep -q 'pair-lc --arrivals' &&
    echo "$out" | grep -q '^\[7/21\] cuda-ptx: tallyd:tally (about [0-9]* s, after 3 s of the BE alone' &&
    ! echo "$out" | grep -q 'tallyd-alone' &&
    ! echo "$out" | grep -q 'tallyd:none' &&
    echo "$out" | awk '/^21 steps, about/ { exit !($4 + 0 > 0 && $4 + 0 < 9.5) }' &&
    echo "$out" | grep -q 'start together' && [ ! -d "$tmp/dry" ] || return 1
  # a paired step counts the longer of the two start-ups, not their sum: the
  # BERT pair's timeslice step is estimated below the alone LC + alone BE steps
  lc=$(echo "$out" | sed -n 's/^\[9\/21\] bert-b8-graph+gpt2-train: alone LC (about \([0-9]*\) s)/\1/p')
  be=$(echo "$out" | sed -n 's/^\[10\/21\] bert-b8-graph+gpt2-train: alone BE (about \([0-9]*\) s)/\1/p')
  ts=$(echo "$out" | sed -n 's/^\[11\/21\] bert-b8-graph+gpt2-train: timeslice (about \([0-9]*\) s)/\1/p')
  [ -n "$lc" ] && [ -n "$be" ] && [ -n "$ts" ] && [ "$ts" -lt $((lc + be - 10)) ] &&
    echo "$out" | grep -q 'torch_lc.py .*--ready .*/bert-b8-graph+gpt2-train/timeslice/lc.ready --go '
}
check "--quick --dry-run prints the 21 steps (tallyd:tally) with estimates within 9.5 minutes, overlapped starts, and runs nothing" dry

modes=alone,timeslice,mps,mps-prio,tallyd:none,tallyd-tcp:none,tallyd-alone:none,tallyd:tally
full() {
  d=$tmp/full
  bp --stub --pairs cuda-ptx --modes $modes --duration 0.4 --out "$d" >"$tmp/full.out" 2>"$tmp/full.err" ||
    { cat "$tmp/full.err"; return 1; }
  cat "$tmp/full.err"
  for m in alone timeslice mps mps-prio tallyd:none tallyd-tcp:none tallyd-alone:none; do
    [ "$(status "$d" cuda-ptx $m)" = ok ] || { echo "mode $m: $(status "$d" cuda-ptx $m)"; return 1; }
  done
  # --policy is passed only to a tallyd that has it
  if "$TALLYD" --help 2>&1 | grep -q -- --policy; then
    [ "$(status "$d" cuda-ptx tallyd:tally)" = ok ] || return 1
    # the first tallyd step with a scheduling policy ran the BE alone first through
    # a scheduled tallyd of its policy, on the same state folder; tallyd:none did not
    pr=$d/raw/cuda-ptx/tallyd-tally/prime
    grep -q -- '--policy tally .*--be-alone 0' "$pr/tallyd.cmd" && [ -s "$pr/be.csv" ] &&
      [ "$(grep -o -- '--state-dir [^ ]*' "$pr/tallyd.cmd")" = \
        "$(grep -o -- '--state-dir [^ ]*' "$d/raw/cuda-ptx/tallyd-tally/tallyd.cmd")" ] &&
      [ ! -d "$d/raw/cuda-ptx/tallyd-none/prime" ] || { echo "no prime step"; return 1; }
    # the stubs launch no kernel: tallyd:tally's trace is listed, without kernels
    # (tests/bench/pairs/test-mechanisms.sh checks the tables on a trace that has some)
    grep -q '^## Mechanisms per kernel (tallyd)$' "$d/report.md" &&
      grep -A2 '^### cuda-ptx, `tallyd:tally` (raw/cuda-ptx/tallyd-tally/tallyd-trace.ktr)$' \
        "$d/report.md" | grep -q '^No kernel lines' || { cat "$d/report.md"; return 1; }
  else
    status "$d" cuda-ptx tallyd:tally | grep -q '^failed: this tallyd has no --policy' || return 1
  fi
  grep -q '^\[10/10\] cuda-ptx: tallyd:tally' "$tmp/full.err" &&
    [ "$(grep -c '^| cuda-ptx |' "$d/report.md")" = 8 ] &&
    [ "$(grep -c '^cuda-ptx,' "$d/summary.csv")" = 8 ] &&
    grep -q 'BUNDLED SYNTHETIC' "$d/sim-vs-measured.md" &&
    grep -q '^| cuda-ptx | mps |' "$tmp/full.out" || return 1
  # MPS: one start and one quit per MPS step, priorities only under mps-prio
  [ "$(grep -c '^start' "$FAKE_MPS_LOG")" = 2 ] && [ "$(grep -c '^quit' "$FAKE_MPS_LOG")" = 2 ] &&
    lc_saw "$d" cuda-ptx mps-prio lc CUDA_MPS_CLIENT_PRIORITY=0 &&
    lc_saw "$d" cuda-ptx mps-prio be CUDA_MPS_CLIENT_PRIORITY=1 &&
    lc_saw "$d" cuda-ptx mps lc CUDA_MPS_CLIENT_PRIORITY=unset &&
    lc_saw "$d" cuda-ptx timeslice lc CUDA_MPS_PIPE_DIRECTORY=unset || return 1
  # tallyd: both tenants through tally-run with their classes
  lc_saw "$d" cuda-ptx tallyd-none lc TALLY_PRIORITY=latency-critical &&
    lc_saw "$d" cuda-ptx tallyd-none be TALLY_PRIORITY=best-effort &&
    lc_saw "$d" cuda-ptx tallyd-tcp-none lc TALLY_PRIORITY=latency-critical || return 1
  if python3 -c 'import matplotlib' 2>/dev/null; then
    [ -s "$d/plots/tradeoff.png" ] && [ -s "$d/plots/cdf-cuda-ptx.png" ]
  else
    grep -q 'matplotlib is not installed' "$tmp/full.err"
  fi
}
check "every mode runs on stubs: manifest, report, MPS start/stop, priorities, plots" full

cat >"$tmp/pairs/t.pair" <<EOT
# test pairs: stubs that fail in chosen ways
name = hang
lc = $S/tests/bench/pairs/stub-lc.sh --arrivals {arrivals} --out {out} --hang --when CUDA_MPS_PIPE_DIRECTORY
be = $S/tests/bench/pairs/stub-be.sh --out {out} --ready {ready} --max-seconds {max_seconds}
EOT
sed -e 's/^name = hang/name = unsup/' -e 's/--hang --when CUDA_MPS_PIPE_DIRECTORY/--unsupported --when TALLY_HOST/' \
  "$tmp/pairs/t.pair" >"$tmp/pairs/u.pair"
sed -e 's/^name = hang/name = never/' -e 's/ --hang --when CUDA_MPS_PIPE_DIRECTORY//' \
  -e 's/--max-seconds {max_seconds}/--never-ready/' "$tmp/pairs/t.pair" >"$tmp/pairs/n.pair"
failures() {
  d=$tmp/fail
  bp --pair-dir "$tmp/pairs" --pairs hang,unsup,never --modes alone,mps,tallyd:none \
    --duration 0.3 --step-timeout 2 --no-plots --out "$d" 2>&1 || return 1
  status "$d" hang mps | grep -q '^failed: LC timed out after 2 s' &&
    [ "$(status "$d" hang tallyd:none)" = ok ] &&
    status "$d" unsup tallyd:none | grep -q '^unsupported: the stub cannot do this here' &&
    [ "$(status "$d" unsup mps)" = ok ] &&
    status "$d" never alone | grep -q '^failed: BE not ready after 2 s' &&
    status "$d" never mps | grep -q '^failed: BE not ready' &&
    grep -q '^| never | tallyd:none |.*| failed: BE not ready' "$d/report.md"
}
check "a hung LC times out, unsupported and never-ready steps are reported, the run goes on" failures

# A BE that becomes ready and then dies as a PyTorch tenant does on a CUDA
# error: the row names the exception's line, not the hint printed after it.
crash() {
  d=$tmp/crash
  cat >"$tmp/bin/crash-be.sh" <<'EOT'
#!/bin/sh
while [ $# -gt 0 ]; do case $1 in --ready) : >"$2"; shift 2 ;; *) shift ;; esac; done
sleep 0.2
echo 'Traceback (most recent call last):' >&2
echo 'torch.AcceleratorError: CUDA error: invalid argument' >&2
echo 'CUDA kernel errors might be asynchronously reported at some other API call' >&2
echo 'Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.' >&2
exit 1
EOT
  chmod +x "$tmp/bin/crash-be.sh"
  sed -e 's/^name = hang/name = crash/' -e 's/ --hang --when CUDA_MPS_PIPE_DIRECTORY//' \
    -e "s|^be = .*|be = $tmp/bin/crash-be.sh --out {out} --ready {ready}|" \
    "$tmp/pairs/t.pair" >"$tmp/pairs/c.pair"
  bp --pair-dir "$tmp/pairs" --pairs crash --modes alone,tallyd:none \
    --duration 0.3 --step-timeout 5 --no-plots --out "$d" 2>&1 || return 1
  status "$d" crash tallyd:none |
    grep -q '^failed: BE exit 1: torch.AcceleratorError: CUDA error: invalid argument$'
}
check "a BE that dies on a CUDA error: its row names the exception's line, not the hint after it" crash

mps_refused() {
  d=$tmp/refused
  before=$(grep -c '^start' "$FAKE_MPS_LOG")
  FAKE_MPS_FAIL=1 bp --stub --pairs cuda-ptx --modes alone,mps,mps-prio --duration 0.3 --no-plots \
    --out "$d" 2>&1 || return 1
  status "$d" cuda-ptx mps | grep -q '^unsupported: nvidia-cuda-mps-control -d exit 1: An instance' &&
    status "$d" cuda-ptx mps-prio | grep -q '^unsupported:' &&
    [ "$(status "$d" cuda-ptx alone)" = ok ] &&
    [ "$(grep -c '^start' "$FAKE_MPS_LOG")" = "$before" ]
}
check "MPS that cannot start makes its rows unsupported and the run goes on" mps_refused

probe_fails() {
  d=$tmp/probe
  printf '#!/bin/sh\necho "probe: no MPS server for this client" >&2\nexit 1\n' >"$tmp/bin/probe-fail"
  chmod +x "$tmp/bin/probe-fail"
  starts=$(grep -c '^start' "$FAKE_MPS_LOG") quits=$(grep -c '^quit' "$FAKE_MPS_LOG")
  TALLY_MPS_PROBE=$tmp/bin/probe-fail bp --stub --pairs cuda-ptx --modes alone,mps,mps-prio \
    --duration 0.3 --no-plots --out "$d" 2>&1 || return 1
  # MPS started once, its probe failed, it was stopped; mps-prio was not tried again
  status "$d" cuda-ptx mps | grep -q '^unsupported: an MPS client (probe probe-fail) exit 1: probe: no MPS' &&
    [ "$(status "$d" cuda-ptx mps-prio)" = "$(status "$d" cuda-ptx mps)" ] &&
    [ "$(grep -c '^start' "$FAKE_MPS_LOG")" = $((starts + 1)) ] &&
    [ "$(grep -c '^quit' "$FAKE_MPS_LOG")" = $((quits + 1)) ]
}
check "MPS whose probe client fails is unsupported, stopped, and not retried" probe_fails

no_mps() {
  d=$tmp/nompsbin
  TALLY_MPS_CONTROL=/nonexistent/nvidia-cuda-mps-control bp --stub --pairs cuda-ptx --modes alone,mps \
    --duration 0.3 --no-plots --out "$d" 2>&1 || return 1
  status "$d" cuda-ptx mps | grep -q '^unsupported: nvidia-cuda-mps-control -d'
}
check "a missing nvidia-cuda-mps-control makes the MPS rows unsupported" no_mps

budget() {
  d=$tmp/budget
  bp --stub --pairs cuda-ptx --modes alone,timeslice --duration 0.3 --max-minutes 0.001 --no-plots \
    --out "$d" 2>&1 || return 1
  # the first step starts at minute 0; every later one is over the budget
  status "$d" cuda-ptx timeslice | grep -q '^skipped: the time budget (--max-minutes 0.001)' &&
    grep -q '^| cuda-ptx | timeslice |.*| skipped: the time budget' "$d/report.md"
}
check "--max-minutes turns the steps after the budget into skipped rows and still reports" budget

interrupt() {
  d=$tmp/int
  quits=$(grep -c '^quit' "$FAKE_MPS_LOG")
  python3 "$S/scripts/bench-pairs" --builddir "$B" --pair-dir "$tmp/pairs" --pairs hang \
    --modes alone,mps --duration 0.3 --step-timeout 60 --no-plots --out "$d" >"$tmp/int.out" 2>&1 &
  bg=$!
  err=$d/raw/hang/mps/lc.err
  i=0
  while ! grep -qs 'stub-lc: pid' "$err" && [ $i -lt 300 ]; do i=$((i + 1)); sleep 0.05; done
  lc=$(sed -n 's/^stub-lc: pid \([0-9]*\)$/\1/p' "$err")
  [ -n "$lc" ] || { echo "the LC under MPS did not start"; cat "$tmp/int.out"; return 1; }
  kill -INT "$bg"
  i=0
  while kill -0 "$bg" 2>/dev/null && [ $i -lt 400 ]; do i=$((i + 1)); sleep 0.05; done
  wait "$bg"; rc=$?; bg=
  cat "$tmp/int.out"
  [ $rc -eq 130 ] && [ "$(grep -c '^quit' "$FAKE_MPS_LOG")" = $((quits + 1)) ] &&
    ! kill -0 "$lc" 2>/dev/null && grep -q 'interrupted' "$tmp/int.out" &&
    [ "$(status "$d" hang alone)" = ok ]
}
check "Ctrl-C stops the tenants and MPS, and keeps what finished" interrupt

# The start handshake on stubs with warm-ups: the BE warms up 1.5 s, the LC
# 0.5 s.  Times are the stubs' `date +%s%N` lines and CSV rows (one clock).
cat >"$tmp/pairs/o.pair" <<EOT
name = overlap
lc = $S/tests/bench/pairs/stub-lc.sh --arrivals {arrivals} --out {out} --ready {ready} --go {go} --warmup-s 0.5
be = $S/tests/bench/pairs/stub-be.sh --out {out} --ready {ready} --max-seconds {max_seconds} --warmup-s 1.5
EOT
sed -e 's/^name = overlap/name = serial/' -e 's/ --ready {ready} --go {go} --warmup-s 0.5//' \
  "$tmp/pairs/o.pair" >"$tmp/pairs/s.pair"
sed -e 's/^name = overlap/name = capfail/' \
  -e 's/--warmup-s 0.5/--unsupported --when CUDA_MPS_PIPE_DIRECTORY/' "$tmp/pairs/o.pair" >"$tmp/pairs/c.pair"
when() { # when FILE WORD: the time the stub printed after WORD in FILE
  sed -n "s/^stub-[lbe]*c*: $2 \([0-9]*\)$/\1/p" "$1" | head -1
}
first_arrival() { awk -F, 'NR == 2 { print $2 }' "$1"; }
overlap() {
  d=$tmp/overlap
  bp --pair-dir "$tmp/pairs" --pairs overlap,serial --modes alone,timeslice,mps,tallyd:none \
    --duration 0.3 --no-plots --out "$d" 2>&1 || return 1
  for m in alone timeslice mps tallyd:none; do
    for p in overlap serial; do
      [ "$(status "$d" $p $m)" = ok ] || { echo "$p $m: $(status "$d" $p $m)"; return 1; }
    done
  done
  for m in timeslice mps tallyd-none; do
    r=$d/raw/overlap/$m
    ls=$(when "$r/lc.err" started) lr=$(when "$r/lc.err" ready) lg=$(when "$r/lc.err" go)
    br=$(when "$r/be.err" ready) a0=$(first_arrival "$r/lc.csv")
    echo "$m: LC started $ls ready $lr go $lg, BE ready $br, first arrival $a0"
    [ -n "$ls" ] && [ -n "$lr" ] && [ -n "$lg" ] && [ -n "$br" ] && [ -n "$a0" ] || return 1
    # the LC started while the BE warmed up, and was ready first; it started
    # serving only after both were ready: its arrival clock begins at go
    [ "$ls" -lt "$br" ] && [ "$lr" -lt "$br" ] && [ "$lg" -ge "$br" ] && [ "$a0" -gt "$lg" ] || return 1
    # the BE ran through the LC's whole window
    be_end=$(tail -1 "$r/be.csv" | cut -d, -f3) lc_end=$(tail -1 "$r/lc.csv" | cut -d, -f4)
    [ "$be_end" -ge "$lc_end" ] || { echo "BE ended $be_end before the LC's last request $lc_end"; return 1; }
  done
  # alone runs (calibration, alone LC) find the go file at once
  [ -n "$(when "$d/raw/overlap/alone/lc.err" go)" ] &&
    [ -n "$(when "$d/raw/overlap/calibrate/lc.err" go)" ] || return 1
  # an LC without {ready}/{go} starts when the BE is ready, as before
  r=$d/raw/serial/timeslice
  ls=$(when "$r/lc.err" started) br=$(when "$r/be.err" ready)
  echo "serial: LC started $ls, BE ready $br"
  [ -n "$ls" ] && [ -n "$br" ] && [ "$ls" -ge "$br" ] && [ -z "$(when "$r/lc.err" go)" ]
}
check "the LC and the BE start together; no request arrives before both are ready; an LC without {go} waits for the BE" overlap

overlap_fail() {
  d=$tmp/capfail
  bp --pair-dir "$tmp/pairs" --pairs capfail --modes alone,mps,timeslice --duration 0.3 \
    --no-plots --out "$d" 2>&1 || return 1
  # the LC gives up during its warm-up under MPS: the step is unsupported, the
  # BE started with it is stopped (it wrote its CSV at SIGTERM), and the run goes on
  status "$d" capfail mps | grep -q '^unsupported: the stub cannot do this here' &&
    grep -q '^stub-be: [0-9]* iterations' "$d/raw/capfail/mps/be.err" &&
    [ "$(status "$d" capfail timeslice)" = ok ] || return 1
  # a tenant that never gets ready fails the step within the step timeout, the other stopped
  sed -e 's/^name = overlap/name = lcnever/' -e 's/--warmup-s 0.5/--hang --when CUDA_MPS_PIPE_DIRECTORY/' \
    "$tmp/pairs/o.pair" >"$tmp/pairs/h.pair"
  d=$tmp/lcnever
  bp --pair-dir "$tmp/pairs" --pairs lcnever --modes alone,mps --duration 0.3 \
    --step-timeout 3 --no-plots --out "$d" 2>&1 || return 1
  status "$d" lcnever mps | grep -q '^failed: LC not ready after 3 s' &&
    grep -q '^stub-be: [0-9]* iterations' "$d/raw/lcnever/mps/be.err"
}
check "a failure during the overlapped start fails or marks the step and stops the other tenant" overlap_fail

slow_exit() {
  sed -e 's/^name = overlap/name = slowexit/' -e 's/--warmup-s 0.5/--exit-s 0.5/' \
    -e 's/--warmup-s 1.5/--exit-s 1.5/' \
    "$tmp/pairs/o.pair" >"$tmp/pairs/x.pair"
  d=$tmp/slowexit
  bp --pair-dir "$tmp/pairs" --pairs slowexit --modes alone,timeslice,tallyd:none --duration 0.3 \
    --no-plots --out "$d" 2>&1 || return 1
  # the BE gets one SIGTERM when the LC's CSV exists (the LC's exit takes a
  # while); its slow exit is waited for, not ended by a second SIGTERM (which
  # its default action would obey)
  for m in timeslice tallyd:none; do
    [ "$(status "$d" slowexit $m)" = ok ] || { echo "$m: $(status "$d" slowexit $m)"; return 1; }
  done
}
check "a BE that exits slowly after SIGTERM gets no second one" slow_exit

mode_options() {
  d=$tmp/opts
  # +split makes tally-run preload libtally-blas.so into the BE; in a sanitizer
  # build that library needs the ASan runtime loaded first (tally-run keeps it so)
  sed -e 's/^name = overlap/name = opts/' "$tmp/pairs/o.pair" >"$tmp/pairs/p.pair"
  [ -n "${TALLY_ASAN_PRELOAD:-}" ] &&
    echo "be_env = LD_PRELOAD=$TALLY_ASAN_PRELOAD ASAN_OPTIONS=detect_leaks=0" >>"$tmp/pairs/p.pair"
  bp --pair-dir "$tmp/pairs" --pairs opts \
    --modes alone,tallyd:none,tallyd:tally+split+depth=2+share=20,tallyd:tally+scheduled+nosplit+variants=all+sms=16+nohold+pblock=200+pflight=500,tallyd:tally+noflush \
    --duration 0.3 --no-plots --out "$d" 2>&1 || return 1
  for m in tallyd:none tallyd:tally+depth=2+share=20+split tallyd:tally+nohold+nosplit+pblock=200+pflight=500+scheduled+sms=16+variants=all tallyd:tally+noflush; do
    [ "$(status "$d" opts $m)" = ok ] || { echo "$m: $(status "$d" opts $m)"; return 1; }
  done
  r=$d/raw/opts/tallyd-tally+depth=2+share=20+split
  # the options reach tallyd (its command line is kept) and the BE's environment only
  grep -q -- '--policy tally .*--be-depth 2' "$r/tallyd.cmd" &&
    grep -q -- '--share-block-us 20' "$r/tallyd.cmd" &&
    ! grep -q -- '--be-depth\|--share-block-us' "$d/raw/opts/tallyd-none/tallyd.cmd" &&
    grep -q 'TALLY_GEMM_SPLIT=1' "$r/be.err" && grep -q 'TALLY_GEMM_SPLIT=unset' "$r/lc.err" &&
    grep -q 'TALLY_GEMM_SPLIT=unset' "$d/raw/opts/tallyd-none/be.err" &&
    q=$d/raw/opts/tallyd-tally+nohold+nosplit+pblock=200+pflight=500+scheduled+sms=16+variants=all
  grep -q 'TALLY_GEMM_SPLIT=0' "$q/be.err" && grep -q -- '--be-alone 0' "$q/tallyd.cmd" &&
    grep -q -- '--variants all' "$q/tallyd.cmd" && grep -q -- '--be-sms 16' "$q/tallyd.cmd" &&
    grep -q -- '--be-sms-hold 0' "$q/tallyd.cmd" && grep -q -- '--be-sms-block-us 200' "$q/tallyd.cmd" &&
    grep -q -- '--be-sms-inflight-us 500' "$q/tallyd.cmd" &&
    ! grep -q -- '--be-alone\|--variants\|--be-sms' "$r/tallyd.cmd" &&
    grep -q -- '--variants slice+ptb' "$d/raw/opts/tallyd-tally+noflush/tallyd.cmd" || return 1
  # a bad option is refused before anything runs
  ! bp --stub --pairs cuda-ptx --modes tallyd:tally+depth=99 --out "$tmp/bad" 2>"$tmp/bad.err" &&
    grep -q 'unknown option +depth=99' "$tmp/bad.err" && [ ! -d "$tmp/bad" ] &&
    ! bp --stub --pairs cuda-ptx --modes tallyd:tally+variants=most --out "$tmp/bad" 2>"$tmp/bad.err" &&
    grep -q 'unknown option +variants=most' "$tmp/bad.err" && [ ! -d "$tmp/bad" ] &&
    ! bp --stub --pairs cuda-ptx --modes tallyd:tally+share=0 --out "$tmp/bad" 2>"$tmp/bad.err" &&
    grep -q 'unknown option +share=0' "$tmp/bad.err" && [ ! -d "$tmp/bad" ] &&
    ! bp --stub --pairs cuda-ptx --modes tallyd:tally+sms=4 --out "$tmp/bad" 2>"$tmp/bad.err" &&
    grep -q 'unknown option +sms=4 .*+sms=N with N in 8..4096' "$tmp/bad.err" && [ ! -d "$tmp/bad" ] &&
    ! bp --stub --pairs cuda-ptx --modes tallyd:tally+noflush+variants=all --out "$tmp/bad" 2>"$tmp/bad.err" &&
    grep -q 'both set tallyd --variants' "$tmp/bad.err" && [ ! -d "$tmp/bad" ]
}
check "mode options: +split gives the BE TALLY_GEMM_SPLIT=1, +nosplit 0, +depth=N tallyd --be-depth N, +share=N tallyd --share-block-us N, +scheduled tallyd --be-alone 0, +variants=V tallyd --variants V, +noflush tallyd --variants slice+ptb, +sms=N tallyd --be-sms N, +nohold tallyd --be-sms-hold 0, +pblock=N tallyd --be-sms-block-us N, side by side with the plain mode" mode_options

rounds() {
  d=$tmp/rounds
  bp --stub --pairs cuda-ptx --modes alone,tallyd-alone:none,tallyd-alone:tally --duration 0.3 \
    --no-plots --rounds 2 --out "$d" 2>&1 || return 1
  cat "$d/rounds.md"
  # each round is a whole run of its own; the summary counts both for every mode and gives
  # the scheduler's cost against tallyd-alone:none
  [ -f "$d/round-1/manifest.csv" ] && [ -f "$d/round-2/summary.csv" ] &&
    grep -q '^# bench-pairs: 2 rounds' "$d/rounds.md" &&
    [ "$(grep -c '| 2 of 2 |' "$d/rounds.md")" -eq 3 ] &&
    [ "$(grep -c '^| cuda-ptx | [a-z:-]* | [12] | ok |' "$d/rounds.md")" -eq 6 ] &&
    grep -q '^| cuda-ptx | tallyd-alone:tally | [0-9.]* ([0-9.]*-[0-9.]*) | [0-9.]* (' "$d/rounds.md" ||
    return 1
  ! bp --stub --pairs cuda-ptx --rounds 0 --out "$tmp/r0" 2>"$tmp/r0.err" &&
    grep -q -- '--rounds must be between 1 and 50' "$tmp/r0.err" && [ ! -d "$tmp/r0" ]
}
check "--rounds 2: two whole runs, then medians and ranges per mode and the scheduler's cost per round" rounds

mean_gap() {
  d=$tmp/gap
  bp --stub --pairs cuda-ptx --modes alone,timeslice --arrivals poisson --mean-gap-ms 2 --duration 2 \
    --no-plots --out "$d" 2>"$tmp/gap.err" >/dev/null || { cat "$tmp/gap.err"; return 1; }
  # the rate is 1 / gap whatever the stub's service time; about 1000 arrivals in 2 s
  grep -q '^rate_per_s 500.000$' "$d/raw/cuda-ptx/calibrate/rate.txt" &&
    grep -q 'a mean gap of 2 ms, poisson arrivals' "$tmp/gap.err" || { cat "$tmp/gap.err"; return 1; }
  k=$(wc -l <"$d/raw/cuda-ptx/arrivals.txt")
  echo "note: $k arrivals in 2 s at a mean gap of 2 ms"
  [ "$k" -gt 850 ] && [ "$k" -lt 1150 ] || return 1
  # the simulator is asked for the same process
  grep -q 'cuda-c-be.ktr`.* at a mean gap of 2 ms, poisson arrivals' "$d/sim-vs-measured.md" &&
    grep -q '^| cuda-ptx | timeslice | timeslice | [^|]* | [+-][0-9.]*% |' "$d/sim-vs-measured.md" ||
    { cat "$d/sim-vs-measured.md"; return 1; }
  ! bp --stub --pairs cuda-ptx --mean-gap-ms 0 --out "$tmp/g0" 2>"$tmp/g0.err" &&
    grep -q -- '--mean-gap-ms must be between' "$tmp/g0.err" && [ ! -d "$tmp/g0" ]
}
check "--mean-gap-ms sets the LC's arrival rate whatever its service time, for the run and the simulator" mean_gap

cuda_pair() {
  for p in pair-lc pair-be; do
    x=$B/tests/bench/pairs/$p
    [ -x "$x" ] || { echo "$x not built"; return 1; }
    # sm_90 SASS and compute_90 PTX, so tallyd can transform the kernels
    "$B/rewrite/tally-ptx" fatbin "$x" | grep -q '^    [0-9]*  *[0-9]* PTX  *90 ' || return 1
    # a bad command line is refused before any CUDA call
    "$x" --out 2>"$tmp/$p.err"; rc=$?
    [ $rc -eq 2 ] && grep -q "^usage: $p" "$tmp/$p.err" || return 1
  done
  "$B/tests/bench/pairs/pair-lc" --arrivals "$tmp/none" --out "$tmp/x.csv" 2>&1 |
    grep -q "pair-lc: $tmp/none: No such file"
}
check "the CUDA C pair carries compute_90 PTX and checks its arguments before CUDA" cuda_pair
