#!/bin/bash
# stub-be.sh: a stand-in for a BE workload, for testing scripts/bench-pairs
# without a GPU.  Creates the ready file, then "iterates" (20 ms sleeps)
# until SIGTERM/SIGINT or --max-seconds, and writes the BE CSV with
# `date +%s%N` times (the stub LC's clock).  Prints the sharing variables
# it was given on stderr, and when it was ready (`date +%s%N`).  --warmup-s
# sleeps before the ready file as a warm-up would.
#   stub-be.sh --out CSV --ready FILE [--max-seconds S] [--never-ready] [--warmup-s S]
out= ready= max=600 never= warmup=
while [ $# -gt 0 ]; do
  case $1 in
    --warmup-s) warmup=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --ready) ready=$2; shift 2 ;;
    --max-seconds) max=$2; shift 2 ;;
    --never-ready) never=1; shift ;;
    *) echo "stub-be: unknown argument $1" >&2; exit 2 ;;
  esac
done
echo "stub-be: CUDA_MPS_CLIENT_PRIORITY=${CUDA_MPS_CLIENT_PRIORITY-unset}" \
  "CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY-unset} TALLY_PRIORITY=${TALLY_PRIORITY-unset}" >&2
stop=
trap 'stop=1' TERM INT
[ -n "$never" ] && { while [ -z "$stop" ]; do sleep 0.05; done; exit 1; }
[ -n "$warmup" ] && sleep "$warmup"
t=$(date +%s%N) # taken before the file exists: the harness may go on at once
: >"$ready"
echo "stub-be: ready $t" >&2
limit=$(( $(date +%s%N) + ${max%.*} * 1000000000 ))
i=0
: >"$out.tmp"
while [ -z "$stop" ]; do
  s=$(date +%s%N)
  [ -n "$s" ] && [ "$s" -lt "$limit" ] || break
  sleep 0.02
  e=$(date +%s%N)
  [ -n "$e" ] || break # a signal to the whole group may end date itself
  echo "$i,$s,$e" >>"$out.tmp"
  i=$((i + 1))
done
{ echo "iter,start_ns,end_ns"; cat "$out.tmp"; } >"$out" && rm -f "$out.tmp"
echo "stub-be: $i iterations" >&2
