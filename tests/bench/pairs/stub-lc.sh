#!/bin/sh
# stub-lc.sh: a stand-in for an LC workload, for testing scripts/bench-pairs
# without a GPU (bench-pairs --stub, tests/bench/pairs/test-bench-pairs.sh).
# Reads the arrival offsets, serves each request FIFO in a fake 300 us (+ up
# to 60 us) of "execution", writes the LC CSV with those times, and sleeps
# until its last request would end, so that it spans real time as a real LC
# does.  Times are `date +%s%N` (the stub BE uses the same clock).  Prints
# the sharing variables it was given on stderr, for the test to check.
# --warmup-s sleeps as a warm-up would; --ready/--go is the start handshake
# of a real LC (create READY, then wait for GO before the arrival clock
# starts); it prints when it started, was ready and saw GO (`date +%s%N`).
# --exit-s sleeps after the CSV, as a framework LC's exit does.
#   stub-lc.sh --arrivals FILE --out CSV [--hang | --unsupported | --fail]
#              [--when VAR]   (the action only when VAR is set: e.g. in one mode)
#              [--warmup-s S] [--ready FILE --go FILE] [--exit-s S]
echo "stub-lc: started $(date +%s%N)" >&2
arrivals= out= act= when= warmup= ready= go= exit_s=
while [ $# -gt 0 ]; do
  case $1 in
    --arrivals) arrivals=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --warmup-s) warmup=$2; shift 2 ;;
    --exit-s) exit_s=$2; shift 2 ;;
    --ready) ready=$2; shift 2 ;;
    --go) go=$2; shift 2 ;;
    --hang | --unsupported | --fail) act=$1; shift ;;
    --when) when=$2; shift 2 ;;
    *) echo "stub-lc: unknown argument $1" >&2; exit 2 ;;
  esac
done
echo "stub-lc: pid $$"  >&2
echo "stub-lc: CUDA_MPS_CLIENT_PRIORITY=${CUDA_MPS_CLIENT_PRIORITY-unset}" \
  "CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY-unset} TALLY_PRIORITY=${TALLY_PRIORITY-unset}" \
  "TALLY_GEMM_SPLIT=${TALLY_GEMM_SPLIT-unset}" >&2
case $when in *[!A-Za-z0-9_]*) echo "stub-lc: --when wants a variable name" >&2; exit 2 ;; esac
if [ -n "$when" ] && eval "[ -z \"\${$when+set}\" ]"; then act=; fi
case $act in
  --hang) exec sleep 100000 ;;
  --unsupported) echo "unsupported: the stub cannot do this here" >&2; exit 77 ;;
  --fail) echo "stub-lc: failing as asked" >&2; exit 3 ;;
esac
[ -r "$arrivals" ] && [ -n "$out" ] || { echo "stub-lc: --arrivals FILE --out CSV" >&2; exit 2; }
[ -n "$warmup" ] && sleep "$warmup"
if [ -n "$ready" ]; then t=$(date +%s%N); : >"$ready" || exit 1; echo "stub-lc: ready $t" >&2; fi
if [ -n "$go" ]; then
  while [ ! -e "$go" ]; do sleep 0.01; done
  echo "stub-lc: go $(date +%s%N)" >&2
fi
# awk computes in doubles: keep its numbers small (ns since t0) and print
# the absolute time as seconds and nanoseconds.
t0=$(( $(date +%s%N) + 1000000 ))
awk -v s0=$((t0 / 1000000000)) -v n0=$((t0 % 1000000000)) '
  function abs(rel,  n) { n = n0 + rel; return sprintf("%d%09d", s0 + int(n / 1e9), n - int(n / 1e9) * 1e9) }
  BEGIN { print "req,arrival_ns,start_ns,end_ns"; prev = 0 }
  NF { a = $1; s = a > prev ? a : prev; e = s + 300000 + (NR % 7) * 10000; prev = e
       printf "%d,%s,%s,%s\n", NR - 1, abs(a), abs(s), abs(e) }
  END { print abs(prev) > "/dev/stderr" }' "$arrivals" >"$out.tmp" 2>"$out.end" || exit 1
end=$(cat "$out.end"); rm -f "$out.end"
now=$(date +%s%N)
[ "$end" -gt "$now" ] && sleep "$(awk -v d=$((end - now)) 'BEGIN { printf "%.3f", d / 1e9 }')"
mv "$out.tmp" "$out"
echo "stub-lc: $(($(wc -l <"$out") - 1)) requests" >&2
[ -n "$exit_s" ] && sleep "$exit_s"
exit 0
