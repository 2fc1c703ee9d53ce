#!/bin/sh
# test-mechanisms.sh: bench-pairs' "Mechanisms per kernel (tallyd)" tables
# (bench-pairs --mechanisms TRACE) on a handmade trace in the form tallyd
# --trace writes: named kernels (`# kernel` lines), an LC tenant whose
# launches are untimed and traced a line per burst (one of three launches),
# one of them a CUDA graph; a BE tenant with a sliced
# submission (two pieces), a PTB submission preempted once and finished
# sliced, a launch held then issued whole, one issued at once, a line of an
# older tallyd without held=, a graph launch, and 12 more kernels so that
# the table ends in an "others" row.  Checks the counts, GPU times, shares
# and the rows' order.  Prints TAP.
S=${TALLY_SRCDIR:-..}
echo "1..2"
if ! command -v python3 >/dev/null 2>&1; then echo "ok 1 # SKIP python3 not found"; exit 0; fi
tmp=$(mktemp -d /tmp/tally-mechanisms-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
t=$tmp/trace.ktr
k=' 264,1,1 128,1,1 0 0 1 0 osp # class=be'
{
  echo '# tallyd kernel trace (tally-sim format), policy tally'
  echo '# kernel 0x0000000000000a01 _Z4gemmPf'
  echo '# kernel 0x0000000000000a02 _Z4softPf'
  echo '# kernel 0x0000000000000c01 _Z6lc_mlpPf'
  echo "lc 0x0000000000000c01 1,1,1 32,1,1 0 0 1 0 o # class=lc form=original blocks=0+1 held=0 graph=0 submit=100 issue=101 start=150 end=150"
  echo "lc 0x0000000000000c01 1,1,1 32,1,1 0 0 1 0 o # class=lc form=original blocks=0+1 held=0 graph=0 submit=300 issue=301 start=350 end=350 launches=3"
  echo 'lc 0x0000000000000c02 1,1,1 32,1,1 0 0 1 0 o # class=lc form=original blocks=0+1 held=0 graph=1 submit=500 issue=501 start=600 end=600'
  # issued while _Z4softPf runs (10.0002 to 12.0002 ms): the slowest LC launch
  echo 'lc 0x0000000000000c03 1,1,1 32,1,1 0 0 1 0 o # class=lc form=original blocks=0+1 held=0 graph=0 submit=11000000 issue=11000001 start=11500000 end=11500000'
  echo "be 0x0000000000000a01$k form=sliced blocks=0+132 held=1 graph=0 submit=1000 issue=2000 start=2000 end=3002000"
  echo "be 0x0000000000000a01$k form=sliced blocks=132+132 held=1 graph=0 submit=1000 issue=3002001 start=3002001 end=6002001"
  echo '# preempt tenant=be launch=9 blocks_done=10/264 turnaround_ns=1000'
  echo "be 0x0000000000000a01$k form=ptb blocks=0+264 held=0 graph=0 submit=7000000 issue=7000001 start=7000002 end=8000002"
  echo "be 0x0000000000000a01$k form=sliced blocks=10+254 held=0 graph=0 submit=7000000 issue=8000003 start=8000004 end=9000004"
  echo "be 0x0000000000000a02$k form=original blocks=0+264 held=1 graph=0 submit=10000000 issue=10000100 start=10000200 end=12000200"
  echo "be 0x0000000000000a02$k form=original blocks=0+264 held=0 graph=0 submit=13000000 issue=13000001 start=13000002 end=14000002"
  echo "be 0x0000000000000a03$k submit=15000000 issue=15000001 start=15000002 end=16000002"
  echo "be 0x0000000000000a04$k form=original blocks=0+1 held=0 graph=1 submit=17000000 issue=17000001 start=17000002 end=21000002"
  i=0
  while [ $i -lt 12 ]; do # 12 small kernels, 0.1 ms each
    s=$((30000000 + i * 1000000))
    echo "be 0x00000000000001$(printf %02x $i)$k form=original blocks=0+264 held=0 graph=0 submit=$s issue=$s start=$s end=$((s + 100000))"
    i=$((i + 1))
  done
  echo '# preemption turnaround: n=1 p50_ns=1000 p99_ns=1000 max_ns=1000'
} >"$t"
run() {
  python3 "$S/scripts/bench-pairs" --mechanisms "$t" >"$tmp/out" || return 1
  cat "$tmp/out"
  o=$tmp/out
  # LC: untimed, 4 bursts (one of 3 launches): 5 whole at once + 1 graph;
  # its table is LC first
  grep -q '^\*\*LC\*\* (`lc`): 6 launches (whole, issued at once 5, CUDA graph 1); no GPU time recorded (tallyd does not time this class.s launches); traced in 4 bursts, each under its first kernel\.$' "$o" &&
    grep -q '^| `_Z6lc_mlpPf (00000c01)` | 4 | - | 4 |  |  |$' "$o" &&
    grep -q '^| `CUDA graph 0x0000000000000c02` | 1 | - |  | 1 |  |$' "$o" &&
    [ "$(grep -n '^\*\*LC' "$o" | cut -d: -f1)" -lt "$(grep -n '^\*\*BE' "$o" | cut -d: -f1)" ] || return 1
  # BE: 18 submissions, 17.2 ms; shares of GPU time per form
  grep -q '^\*\*BE\*\* (`be`): 18 launches (whole, issued at once 13, held, then whole 1, whole (held not recorded) 1, sliced 1, PTB 1, CUDA graph 1); 17.2 ms of GPU time: whole, issued at once 13%, held, then whole 12%, whole (held not recorded) 6%, sliced 35%, PTB 12%, CUDA graph 23%\.$' "$o" &&
    grep -q '^| kernel | launches | GPU ms | whole, issued at once | held, then whole | whole (held not recorded) | sliced | PTB | CUDA graph | preempted |$' "$o" &&
    grep -q '^| `_Z4gemmPf (00000a01)` | 2 | 8.0 |  |  |  | 1 (2.0 pieces) | 1 |  | 1 |$' "$o" &&
    grep -q '^| `CUDA graph 0x0000000000000a04` | 1 | 4.0 |  |  |  |  |  | 1 |  |$' "$o" &&
    grep -q '^| `_Z4softPf (00000a02)` | 2 | 3.0 | 1 | 1 |  |  |  |  |  |$' "$o" &&
    grep -q '^| `0x0000000000000a03` | 1 | 1.0 |  |  | 1 |  |  |  |  |$' "$o" &&
    grep -q '^| `others (6 kernels)` | 6 | 0.6 | 6 |  |  |  |  |  |  |$' "$o" || return 1
  # the top 10 by GPU time, then others: 10 + 1 kernel rows for the BE
  [ "$(sed -n '/^\*\*BE/,/^BE on the GPU/p' "$o" | grep -c '^| `')" = 11 ] || return 1
  # the BE's busy share (17.2 ms of 41.098 ms, no overlap) and the slowest LC
  # launch (1 of 4) issued while _Z4softPf had 1.00 ms left
  grep -q '^BE on the GPU: busy 42% of the 0.04 s .* (20 timed pieces); submit to issue p50 ' "$o" &&
    grep -q '^The slowest 1 of 4 LC bursts (a trace line each: its first launch.s issue to completion seen, 0.50 ms or more) .*; 0 found no BE kernel running\.$' "$o" &&
    grep -q '^| `_Z4softPf (00000a02)` | 1 | 1.00 |$' "$o" || return 1
  # a trace without kernels says so
  echo '# tallyd kernel trace (tally-sim format), policy tally' >"$tmp/empty.ktr"
  python3 "$S/scripts/bench-pairs" --mechanisms "$tmp/empty.ktr" | grep -q '^No kernel lines' ||
    return 1
  # a FLUSH launch and its redo (the blocks that gave up) are one submission
  {
    echo '# kernel 0x0000000000000b01 _Z5spinPf'
    echo 'be 0x0000000000000b01 132,1,1 128,1,1 0 0 1 0 opf # class=be form=flush blocks=0+132 held=0 graph=0 submit=1000 issue=1001 start=1002 end=501002'
    echo '# preempt tenant=be launch=1 blocks_done=100/132 turnaround_ns=9000'
    echo 'be 0x0000000000000b01 132,1,1 128,1,1 0 0 1 0 opf # class=be form=flush blocks=0+132 held=1 graph=0 submit=1000 issue=600000 start=600001 end=1100001'
    echo 'be 0x0000000000000b01 132,1,1 128,1,1 0 0 1 0 opf # class=be form=original blocks=0+132 held=0 graph=0 submit=2000000 issue=2000001 start=2000002 end=2500002'
  } >"$tmp/flush.ktr"
  python3 "$S/scripts/bench-pairs" --mechanisms "$tmp/flush.ktr" >"$tmp/flush.out" || return 1
  cat "$tmp/flush.out"
  grep -q '^\*\*BE\*\* (`be`): 2 launches (whole, issued at once 1, FLUSH 1); 1.5 ms of GPU time: whole, issued at once 33%, FLUSH 67%\.$' "$tmp/flush.out" &&
    grep -q '^| `_Z5spinPf (00000b01)` | 2 | 1.5 | 1 | 1 | 1 |$' "$tmp/flush.out"
}
if run >"$tmp/log" 2>&1; then echo "ok 1 - mechanisms per kernel (FLUSH and its redos included), BE busy share and the slow LC launches' waits from a handmade tallyd trace"; else
  echo "not ok 1 - mechanisms per kernel (FLUSH and its redos included), BE busy share and the slow LC launches' waits from a handmade tallyd trace"; sed 's/^/# /' "$tmp/log"; fi

# The BE's window, 10 ms: held 0-1 ms during an LC request, issued 1-2, held
# 2-2.5 with the LC idle, issued 2.5-4, nothing 4-4.5, issued 4.5-5.2, held
# 5.2-6.1 (to 6.0 inside the second request), issued 6.1-10.  A third, short LC
# request (4.2-4.4 ms) falls where the BE has nothing in tallyd.
window() {
  w=$tmp/window.ktr
  b=' 1,1,1 32,1,1 0 0 1 0 o # class=be form=original blocks=0+1 held=1 graph=0'
  {
    echo '# tallyd kernel trace (tally-sim format), policy tally'
    echo 'lc 0x0000000000000c01 1,1,1 32,1,1 0 0 1 0 o # class=lc submit=0 issue=100 start=900000 end=900000'
    echo 'lc 0x0000000000000c01 1,1,1 32,1,1 0 0 1 0 o # class=lc submit=5000000 issue=5000000 start=6000000 end=6000000'
    echo "be 0x0000000000000a01$b submit=0 issue=1000000 start=1000000 end=2000000"
    echo "be 0x0000000000000a01$b submit=2000000 issue=2500000 start=2500000 end=4000000"
    echo "be 0x0000000000000a01$b submit=4500000 issue=4500000 start=4500000 end=5200000"
    echo "be 0x0000000000000a01$b submit=5000000 issue=6100000 start=6100000 end=10000000"
  } >"$w"
  printf 'req,arrival_ns,start_ns,end_ns\n0,0,0,1000000\n1,5000000,5000000,6000000\n2,4200000,4200000,4400000\n' >"$tmp/lc.csv"
  python3 "$S/scripts/bench-pairs" --mechanisms "$w" --lc-csv "$tmp/lc.csv" >"$tmp/w.out" || return 1
  cat "$tmp/w.out"
  # the LC's window (arrivals 0 and 5 ms, last end 6 ms) cuts it to 0-6 ms
  grep -q "^Where the BE's window went (0.01 s, from the BE's first submission to its last launch's end, within the LC's window (its first arrival to its last end: where the BE's throughput is measured); the LC counted as busy during its requests, from its CSV): BE work issued and not yet seen done 53%; held in tallyd with no BE work issued, while an LC request was served 30%, while none was 8% (1 gap, p50 500.0 us, p99 500.0 us); nothing of the BE's in tallyd 8%, 3% while an LC request was served " "$tmp/w.out" || return 1
  # without the CSV, the LC's launches stand for its requests
  python3 "$S/scripts/bench-pairs" --mechanisms "$w" >"$tmp/w2.out" || return 1
  cat "$tmp/w2.out"
  grep -q "last launch's end; the LC counted as busy during its launches in the trace, issue to completion seen): BE work issued and not yet seen done 71%; held in tallyd with no BE work issued, while an LC request was served 17%, while none was 7% " "$tmp/w2.out" || return 1
  # with the BE's CSV too, its measured steps (1-10 ms) cut it to 1-6 ms:
  # the hold before 1 ms (its warm-up here) is left out
  printf 'iter,start_ns,end_ns\n0,1000000,5000000\n1,5000000,10000000\n' >"$tmp/be.csv"
  python3 "$S/scripts/bench-pairs" --mechanisms "$w" --lc-csv "$tmp/lc.csv" --be-csv "$tmp/be.csv" >"$tmp/w3.out" || return 1
  cat "$tmp/w3.out"
  grep -q "^Where the BE's window went (0.01 s, from the BE's first submission to its last launch's end, within its 2 measured steps, within the LC's window (its first arrival to its last end: where the BE's throughput is measured); the LC counted as busy during its requests, from its CSV): BE work issued and not yet seen done 64%; held in tallyd with no BE work issued, while an LC request was served 16%, while none was 10% (1 gap, p50 500.0 us, p99 500.0 us); nothing of the BE's in tallyd 10%, 4% while an LC request was served " "$tmp/w3.out"
}
if window >"$tmp/log" 2>&1; then echo "ok 2 - the BE's window split into issued, held (LC serving or not) and nothing of the BE's, with and without the LC's CSV, within the BE's measured steps"; else
  echo "not ok 2 - the BE's window split into issued, held (LC serving or not) and nothing of the BE's, with and without the LC's CSV, within the BE's measured steps"; sed 's/^/# /' "$tmp/log"; fi
