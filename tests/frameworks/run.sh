#!/bin/sh
# run.sh: stock frameworks through Tally, feature by feature, natively and
# through tallyd over shared memory and TCP, compared with the native run.
#
# GPU machine only (exit 77 = skipped elsewhere).  Cases (framework x feature):
#   cuda-c vmm | async   tests/frameworks/vmm-async.c (driver API)
#   cuda-c graph-capture | graph-explicit   tests/frameworks/graphs.c (driver API)
#   torch alloc                  default caching allocator
#   torch alloc-expandable       PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
#   torch alloc-mallocasync      PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
#   torch cuda-graph             torch.cuda.graphs capture + replay
#   torch train-adamw | amp-bf16 | compile   torch_features.py (tolerances there)
#   cupy  fft | random | solver | sparse | sort | rawkernel | texture   cupy_libs.py
#   numba kernel                 numba_kernels.py
#   jax   train                  jit + grad + 200 steps
# A case passes on a transport when its stdout equals the native stdout and
# ends in "done", and its stderr has no line saying something is "not
# supported by Tally" or "not emulated", and no line containing "warn" or
# "error" (any case) that the native stderr lacks; such lines are printed
# with the diffs.  Every run's stdout and stderr are kept in the temporary
# folder (FW-FEATURE.{native,shm,tcp}.{out,err}) and copied to
# $TALLY_FW_LOGS when it is set, each case's as soon as it finished.  Each run gets its own TorchInductor and
# Triton cache folder, so no run reuses another's compiled kernels.
# A framework that does not import natively (absent, or failing at its own
# import: e.g. a numba older than the installed numpy) is skipped, with the
# import's last error line; so is a case whose native run fails in any other
# way ("no-native": Tally is not in that run, so there is nothing to compare
# with), with the native stderr's last line.
# Prints a table framework x feature x (native, shm, tcp) and
# "frameworks: N passed, M failed, K skipped".
# TALLY_FW_LOG_LEVEL sets tallyd's --log-level (default info; debug names
# every request tallyd answered with an error).
# TALLY_FW_ONLY="PATTERN..." runs only the cases whose FRAMEWORK/FEATURE
# matches one of the shell patterns (e.g. "cuda-c/* torch/alloc*"); make
# check-gpu runs the suite in such parts (frameworks-PART in tests/gpu.mk),
# each under check-gpu's 300 s limit per test.
# usage: run.sh   (TALLY_BUILDDIR, TALLY_SRCDIR, PYTHON, TALLY_FW_LOGS, TALLY_FW_ONLY from the env)
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
  --log-level "${TALLY_FW_LOG_LEVEL:-info}" 2>"$tmp/tallyd.log" &
daemon=$!
i=0
while ! grep -qs serving "$tmp/tallyd.log" && [ $i -lt 200 ]; do i=$((i + 1)); sleep 0.05; done
port=$(sed -n 's/.*serving.*(port \([0-9]*\)).*/\1/p' "$tmp/tallyd.log")
[ -n "$port" ] || { cat "$tmp/tallyd.log"; echo "frameworks: tallyd did not start"; exit 1; }

# row_ FORMAT ARGS...: one table row, shown now and again at the end
row_() {
  # shellcheck disable=SC2059
  printf "$@" | tee -a "$tmp/table"
}
row_ '%-8s %-20s %-8s %-8s %-8s\n' framework feature native shm tcp
# stderr_bad NATIVE_ERR TALLY_ERR: prints the lines of TALLY_ERR that fail a case
# (compared with numbers and this run's own paths masked: pids, times and
# cache folders differ between any two runs)
norm_() { sed -e "s#$tmp/[^ :'\"]*#TMP#g" -e 's/[0-9][0-9]*/N/g' "$1"; }
stderr_bad() {
  grep -i -e 'not supported by Tally' -e 'not emulated' "$2"
  norm_ "$1" >"$2.nat"
  grep -i -e warn -e error "$2" | while IFS= read -r line; do
    m=$(printf '%s\n' "$line" | sed -e "s#$tmp/[^ :'\"]*#TMP#g" -e 's/[0-9][0-9]*/N/g')
    grep -qxF -- "$m" "$2.nat" || printf '%s\n' "$line"
  done
  rm -f "$2.nat"
}
# run_ WHERE OUT ENV CMD...: one run (WHERE native, or a tallyd address);
# stdout to OUT.out, stderr to OUT.err
run_() {
  where=$1 o=$2 envv=$3; shift 3
  if [ "$where" = native ]; then
    env "$envv" TORCHINDUCTOR_CACHE_DIR="$o.inductor" TRITON_CACHE_DIR="$o.triton" "$@" \
      >"$o.out" 2>"$o.err"
  else
    env "$envv" TORCHINDUCTOR_CACHE_DIR="$o.inductor" TRITON_CACHE_DIR="$o.triton" \
      "$B/guestlib/tally-run" --host "$where" --name "$(basename "$o")" -- "$@" \
      >"$o.out" 2>"$o.err"
  fi
}
# case FRAMEWORK FEATURE ENV CMD...: ENV is "-" or VAR=VALUE
# wanted_ FW/FEATURE: whether TALLY_FW_ONLY (unset: everything) asks for it
wanted_() {
  [ -z "${TALLY_FW_ONLY:-}" ] && return 0
  set -f
  for pat in $TALLY_FW_ONLY; do
    # shellcheck disable=SC2254
    case $1 in $pat) set +f; return 0 ;; esac
  done
  set +f
  return 1
}
# module_ FW: the module a framework's cases import first (numba's GPU part
# is numba.cuda, which fails to import where numba itself does not)
module_() {
  case $1 in numba) echo numba.cuda ;; *) echo "$1" ;; esac
}
# keep_ OUT: copies a finished case's files to $TALLY_FW_LOGS at once, so a
# suite stopped by a time limit still leaves the logs of the rows it ran
keep_() {
  [ -n "${TALLY_FW_LOGS:-}" ] || return 0
  mkdir -p "$TALLY_FW_LOGS" && for f in "$1".*; do [ -f "$f" ] && cp "$f" "$TALLY_FW_LOGS/"; done
  cp "$tmp/table" "$TALLY_FW_LOGS/" 2>/dev/null
  return 0
}
case_() {
  wanted_ "$1/$2" || return 0
  case1_ "$@"
  keep_ "$tmp/$1-$2"
}
case1_() {
  fw=$1 feat=$2 envv=$3; shift 3
  out=$tmp/$fw-$feat
  if [ "$envv" = - ]; then envv=TALLY_FW_NONE=1; fi
  run_ native "$out.native" "$envv" "$@"
  if ! grep -qx "done" "$out.native.out"; then
    # the framework itself cannot be imported here (not installed, or broken
    # against this machine's other packages): nothing to compare with
    if grep -q "ModuleNotFoundError" "$out.native.err" ||
      { [ "$1" = "$PY" ] && ! "$PY" -c "import $(module_ "$fw")" >"$out.probe" 2>&1; }; then
      skip=$((skip + 1))
      row_ '%-8s %-20s %-8s %s\n' "$fw" "$feat" "absent" "$(tail -1 "$out.probe" 2>/dev/null)"; return
    fi
    # the native run itself failed (Tally was not in it): nothing to compare
    # with, so the case is skipped with the native run's last error line
    skip=$((skip + 1))
    row_ '%-8s %-20s %-8s %s (see %s)\n' "$fw" "$feat" "no-native" \
      "$(grep -v '^[[:space:]]*$' "$out.native.err" | tail -1 | cut -c1-120)" "$out.native.err"; return
  fi
  row=
  for how in "unix:$tmp/sock" "tcp://127.0.0.1:$port"; do
    t=${how%%:*}; [ "$t" = unix ] && t=shm
    run_ "$how" "$out.$t" "$envv" "$@"
    stderr_bad "$out.native.err" "$out.$t.err" >"$out.$t.bad"
    if cmp -s "$out.native.out" "$out.$t.out" && [ ! -s "$out.$t.bad" ]; then
      pass=$((pass + 1)); row="$row ok      "
    elif [ -s "$out.$t.bad" ] && cmp -s "$out.native.out" "$out.$t.out"; then
      fail=$((fail + 1)); row="$row STDERR  "
      { echo "--- $fw $feat via $t: stderr lines the native run does not have:"
        head -15 "$out.$t.bad"; } >>"$tmp/diffs"
    else
      fail=$((fail + 1)); row="$row DIFFERS "
      { echo "--- $fw $feat via $t (diff native tally, stdout):"
        diff "$out.native.out" "$out.$t.out" | head -15
        if [ -s "$out.$t.bad" ]; then echo "    stderr lines the native run does not have:"
          head -15 "$out.$t.bad"; fi; } >>"$tmp/diffs"
    fi
  done
  row_ '%-8s %-20s %-8s%s\n' "$fw" "$feat" ok "$row"
}
TF="$S/tests/frameworks/torch_features.py"
case_ cuda-c vmm - "$tmp/vmm-async" vmm
case_ cuda-c async - "$tmp/vmm-async" async
case_ cuda-c graph-capture - "$tmp/graphs" capture
case_ cuda-c graph-explicit - "$tmp/graphs" explicit
case_ torch alloc - "$PY" "$TF" alloc
case_ torch alloc-expandable PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$PY" "$TF" alloc
case_ torch alloc-mallocasync PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "$PY" "$TF" alloc
case_ torch cuda-graph - "$PY" "$TF" graph
case_ torch train-adamw - "$PY" "$TF" train-adamw
case_ torch amp-bf16 - "$PY" "$TF" amp-bf16
case_ torch compile - "$PY" "$TF" compile
for f in fft random solver sparse sort rawkernel texture; do
  case_ cupy "$f" - "$PY" "$S/tests/frameworks/cupy_libs.py" "$f"
done
case_ numba kernel - "$PY" "$S/tests/frameworks/numba_kernels.py"
case_ jax train - "$PY" "$S/tests/frameworks/jax_train.py"
[ -f "$tmp/diffs" ] && cat "$tmp/diffs"
kill -TERM "$daemon"
wait "$daemon"
daemon=
echo "--- tallyd log (last 10 lines)"
tail -n 10 "$tmp/tallyd.log"
echo "--- results"
cat "$tmp/table"
if [ -n "${TALLY_FW_LOGS:-}" ]; then
  mkdir -p "$TALLY_FW_LOGS" &&
    for f in "$tmp"/*.out "$tmp"/*.err "$tmp"/*.bad "$tmp/tallyd.log" "$tmp/diffs" "$tmp/table"; do
      [ -f "$f" ] && cp "$f" "$TALLY_FW_LOGS/"
    done
  echo "logs copied to $TALLY_FW_LOGS"
fi
echo "frameworks: $pass passed, $fail failed, $skip skipped (outputs in $tmp)"
[ $fail -eq 0 ]
