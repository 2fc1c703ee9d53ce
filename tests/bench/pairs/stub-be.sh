#!/bin/bash
# stub-be.sh: a stand-in for a BE workload, for testing scripts/bench-pairs
# without a GPU.  Creates the ready file, then "iterates" (20 ms sleeps)
# until SIGTERM/SIGINT or --max-seconds, and writes the BE CSV with
# CLOCK_REALTIME times in ns (the stub LC's `date +%s%N` clock).  Prints the
# sharing variables it was given on stderr, and when it was ready.  --warmup-s
# sleeps before the ready file as a warm-up would; --exit-s sleeps after the
# CSV with SIGTERM at its default action, as a Python tenant's slow exit
# through tallyd does (a second SIGTERM then kills it).
#   stub-be.sh --out CSV --ready FILE [--max-seconds S] [--never-ready] [--warmup-s S] [--exit-s S]
out= ready= max=600 never= warmup= exit_s=
while [ $# -gt 0 ]; do
  case $1 in
    --warmup-s) warmup=$2; shift 2 ;;
    --exit-s) exit_s=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --ready) ready=$2; shift 2 ;;
    --max-seconds) max=$2; shift 2 ;;
    --never-ready) never=1; shift ;;
    *) echo "stub-be: unknown argument $1" >&2; exit 2 ;;
  esac
done
echo "stub-be: CUDA_MPS_CLIENT_PRIORITY=${CUDA_MPS_CLIENT_PRIORITY-unset}" \
  "CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY-unset} TALLY_PRIORITY=${TALLY_PRIORITY-unset}" \
  "TALLY_GEMM_SPLIT=${TALLY_GEMM_SPLIT-unset}" >&2
# now: REPLY = the time in ns on the stub LC's clock (CLOCK_REALTIME), from bash itself:
# a command substitution in the loop could be cut by the SIGTERM the harness sends, and bash
# then failed to parse the rest of it ("unexpected EOF while looking for matching `)'")
now() { REPLY=${EPOCHREALTIME//[!0-9]/}000; }
stop=
trap 'stop=1' TERM INT
[ -n "$never" ] && { while [ -z "$stop" ]; do sleep 0.05; done; exit 1; }
[ -n "$warmup" ] && sleep "$warmup"
now; t=$REPLY # taken before the file exists: the harness may go on at once
: >"$ready"
echo "stub-be: ready $t" >&2
now; limit=$(( REPLY + ${max%.*} * 1000000000 ))
i=0
: >"$out.tmp"
while [ -z "$stop" ]; do
  now; s=$REPLY
  [ "$s" -lt "$limit" ] || break
  sleep 0.02
  now; e=$REPLY
  echo "$i,$s,$e" >>"$out.tmp"
  i=$((i + 1))
done
{ echo "iter,start_ns,end_ns"; cat "$out.tmp"; } >"$out" && rm -f "$out.tmp"
echo "stub-be: $i iterations" >&2
# (exec: the same process, now a program that leaves SIGTERM at its default
# action; bash itself would wait for its sleep before acting on the signal)
[ -n "$exit_s" ] && exec python3 -c "import time; time.sleep($exit_s)"
exit 0
