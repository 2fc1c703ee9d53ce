#!/bin/sh
# run.sh: stock frameworks through Tally, feature by feature, natively and
# through tallyd over shared memory and TCP, compared byte for byte.
#
# GPU machine only (exit 77 = skipped elsewhere).  Cases (framework x feature):
#   cuda-c vmm | async   tests/frameworks/vmm-async.c (driver API)
#   cuda-c graph-capture | graph-explicit   tests/frameworks/graphs.c (driver API)
#   torch alloc                  default caching allocator
#   torch alloc-expandable       PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
#   torch alloc-mallocasync      PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
#   torch cuda-graph             torch.cuda.graphs capture + replay
#   jax   train                  jit + grad + 200 steps
# A case passes on a transport when its output equals the native output and
# ends in "done".  A framework that does not import natively is skipped.
# Prints one table row per case and "frameworks: N passed, M failed, K skipped".
# usage: run.sh   (TALLY_BUILDDIR, TALLY_SRCDIR, PYTHON from the env)
B=${TALLY_BUILDDIR:-$(pwd)}
S=${TALLY_SRCDIR:-@TALLY_SRCDIR@}
CUDA=${CUDA_HOME:-/usr/local/cuda}
PY=${PYTHON:-python3}
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "skipped: no GPU"
  exit 77
fi
tmp=$(mktemp -d /tmp/tally-fw-XXXXXX)
daemon=
pass=0 fail=0 skip=0
cleanup() { [ -n "$daemon" ] && kill "$daemon" 2>/dev/null; }
trap cleanup EXIT
export LD_LIBRARY_PATH="$CUDA/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
${CC:-cc} -std=gnu11 -O2 -I"$CUDA/include" -o "$tmp/vmm-async" "$S/tests/frameworks/vmm-async.c" \
  -L"$CUDA/lib64/stubs" -lcuda || { echo "frameworks: cannot build vmm-async"; exit 1; }
${CC:-cc} -std=gnu11 -O2 -I"$CUDA/include" -o "$tmp/graphs" "$S/tests/frameworks/graphs.c" \
  -L"$CUDA/lib64/stubs" -lcuda || { echo "frameworks: cannot build graphs"; exit 1; }

"$B/hostd/tallyd" --listen-unix "$tmp/sock" --listen-tcp 127.0.0.1:0 --state-dir "$tmp/state" \
  --log-level info 2>"$tmp/tallyd.log" &
daemon=$!
i=0
while ! grep -qs serving "$tmp/tallyd.log" && [ $i -lt 200 ]; do i=$((i + 1)); sleep 0.05; done
port=$(sed -n 's/.*serving.*(port \([0-9]*\)).*/\1/p' "$tmp/tallyd.log")
[ -n "$port" ] || { cat "$tmp/tallyd.log"; echo "frameworks: tallyd did not start"; exit 1; }

printf '%-8s %-20s %-8s %-8s %-8s\n' framework feature native shm tcp
# case FRAMEWORK FEATURE ENV CMD...: ENV is "-" or VAR=VALUE
case_() {
  fw=$1 feat=$2 envv=$3; shift 3
  out=$tmp/$fw-$feat
  if [ "$envv" = - ]; then envv=TALLY_FW_NONE=1; fi
  env "$envv" "$@" >"$out.native" 2>&1
  if ! grep -qx done "$out.native"; then
    if grep -q "ModuleNotFoundError" "$out.native"; then
      skip=$((skip + 1)); printf '%-8s %-20s %-8s\n' "$fw" "$feat" "absent"; return
    fi
    fail=$((fail + 1)); printf '%-8s %-20s %-8s (see %s)\n' "$fw" "$feat" FAIL "$out.native"; return
  fi
  row=
  for how in "unix:$tmp/sock" "tcp://127.0.0.1:$port"; do
    t=${how%%:*}; [ "$t" = unix ] && t=shm
    env "$envv" "$B/guestlib/tally-run" --host "$how" --name "$fw-$feat" -- "$@" >"$out.$t" 2>&1
    if cmp -s "$out.native" "$out.$t"; then
      pass=$((pass + 1)); row="$row ok      "
    else
      fail=$((fail + 1)); row="$row DIFFERS "
      { echo "--- $fw $feat via $t (diff native tally):"; diff "$out.native" "$out.$t" | head -15; } >>"$tmp/diffs"
    fi
  done
  printf '%-8s %-20s %-8s%s\n' "$fw" "$feat" ok "$row"
}
case_ cuda-c vmm - "$tmp/vmm-async" vmm
case_ cuda-c async - "$tmp/vmm-async" async
case_ cuda-c graph-capture - "$tmp/graphs" capture
case_ cuda-c graph-explicit - "$tmp/graphs" explicit
case_ torch alloc - "$PY" "$S/tests/frameworks/torch_features.py" alloc
case_ torch alloc-expandable PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
  "$PY" "$S/tests/frameworks/torch_features.py" alloc
case_ torch alloc-mallocasync PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync \
  "$PY" "$S/tests/frameworks/torch_features.py" alloc
case_ torch cuda-graph - "$PY" "$S/tests/frameworks/torch_features.py" graph
case_ jax train - "$PY" "$S/tests/frameworks/jax_train.py"
[ -f "$tmp/diffs" ] && cat "$tmp/diffs"
kill -TERM "$daemon"
wait "$daemon"
daemon=
echo "--- tallyd log (last 10 lines)"
tail -n 10 "$tmp/tallyd.log"
echo "frameworks: $pass passed, $fail failed, $skip skipped (outputs in $tmp)"
[ $fail -eq 0 ]
