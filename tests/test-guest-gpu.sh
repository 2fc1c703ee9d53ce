#!/bin/sh
# test-guest-gpu.sh: unmodified CUDA programs through tallyd on a real GPU.
#
# GPU machine only (exit 77 = skipped elsewhere).  Builds three programs --
# tests/guest-gpu.cu with static cudart and with -cudart shared, and the
# driver-API tests/guest-gpu-drv.c loading PTX from guest-gpu-kernel.cu (and
# linking two PTX modules, guest-gpu-link-{a,b}.cu, through cuLink*), and
# tests/guest-gpu-cublas.cu (cublasCreate + one exact SGEMM checksum) --
# runs each natively, then through tally-run over the UNIX socket and over
# TCP loopback, and requires byte-identical output.  Then two tenants at
# once (one latency-critical, one best-effort), and tallyd's exit code after
# SIGTERM.  Prints one line per check and "guest-gpu: N passed, M failed".
# usage: test-guest-gpu.sh   (TALLY_BUILDDIR, TALLY_SRCDIR, NVCC from the env
# or guessed from the current directory)
B=${TALLY_BUILDDIR:-$(pwd)}
S=${TALLY_SRCDIR:-@TALLY_SRCDIR@}
CUDA=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA/bin/nvcc}
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "skipped: no GPU"
  exit 77
fi
tmp=$(mktemp -d /tmp/tally-gpu-XXXXXX)
daemon=
pass=0
fail=0
cleanup() { [ -n "$daemon" ] && kill "$daemon" 2>/dev/null; }
trap cleanup EXIT
say() { echo "$*"; }
ok() { pass=$((pass + 1)); say "PASS: $1"; }
bad() { fail=$((fail + 1)); say "FAIL: $1"; }

set -e
"$NVCC" -o "$tmp/rt-static" "$S/tests/guest-gpu.cu"
"$NVCC" -cudart shared -o "$tmp/rt-shared" "$S/tests/guest-gpu.cu"
"$NVCC" -ptx -o "$tmp/kernel.ptx" "$S/tests/guest-gpu-kernel.cu"
"$NVCC" -rdc=true -ptx -o "$tmp/link-a.ptx" "$S/tests/guest-gpu-link-a.cu"
"$NVCC" -rdc=true -ptx -o "$tmp/link-b.ptx" "$S/tests/guest-gpu-link-b.cu"
${CC:-cc} -I"$CUDA/include" -o "$tmp/drv" "$S/tests/guest-gpu-drv.c" -L"$CUDA/lib64/stubs" -lcuda
set +e
# cuBLAS is optional in a toolkit install: without it the case is skipped.
cublas=
if "$NVCC" -o "$tmp/cublas" "$S/tests/guest-gpu-cublas.cu" -lcublas >"$tmp/nvcc-cublas" 2>&1; then
  cublas=$tmp/cublas
else
  say "SKIP: cublas (no libcublas to link: $(head -c 200 "$tmp/nvcc-cublas"))"
fi
export LD_LIBRARY_PATH="$CUDA/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

"$B/hostd/tallyd" --listen-unix "$tmp/sock" --listen-tcp 127.0.0.1:0 --state-dir "$tmp/state" \
  --log-level info 2>"$tmp/tallyd.log" &
daemon=$!
i=0
while ! grep -qs serving "$tmp/tallyd.log" && [ $i -lt 200 ]; do i=$((i + 1)); sleep 0.05; done
port=$(sed -n 's/.*serving.*(port \([0-9]*\)).*/\1/p' "$tmp/tallyd.log")
if [ -z "$port" ]; then
  cat "$tmp/tallyd.log"
  echo "guest-gpu: tallyd did not start"
  exit 1
fi

compare() { # compare NAME CMD...
  name=$1; shift
  "$@" >"$tmp/native.out" 2>&1
  for how in "unix:$tmp/sock" "tcp://127.0.0.1:$port"; do
    "$B/guestlib/tally-run" --host "$how" --name "$name" -- "$@" >"$tmp/tally.out" 2>&1
    if cmp -s "$tmp/native.out" "$tmp/tally.out" && grep -qx done "$tmp/native.out"; then
      ok "$name via ${how%%:*} matches native"
    else
      bad "$name via ${how%%:*} differs from native"
      diff "$tmp/native.out" "$tmp/tally.out" | head -20
    fi
  done
}
compare rt-static "$tmp/rt-static"
compare rt-shared "$tmp/rt-shared"
compare drv "$tmp/drv" "$tmp/kernel.ptx"
compare drv-link2 "$tmp/drv" "$tmp/link-a.ptx" "$tmp/link-b.ptx"
if [ -n "$cublas" ]; then
  before=$fail
  compare cublas "$cublas"
  if [ $fail -ne $before ]; then
    # Once more with the guest's debug log: every failed request, refused
    # export table, function or kernel name not found, unsupported call.
    TALLY_LOG=debug "$B/guestlib/tally-run" --host "unix:$tmp/sock" --name cublas-debug \
      -- "$cublas" >"$tmp/cublas-debug.out" 2>&1
    echo "--- cublas under TALLY_LOG=debug: failures (full log: $tmp/cublas-debug.out)"
    grep -v 'cuGetProcAddress(.*found$' "$tmp/cublas-debug.out" |
      grep -iE 'fail|not |error|unsupported|refused|status' | sort | uniq -c | sort -rn | head -30
  fi
fi

# Two tenants at once on one GPU.
"$tmp/rt-static" >"$tmp/native.out" 2>&1
"$B/guestlib/tally-run" --host "unix:$tmp/sock" --priority latency-critical --name lc \
  -- "$tmp/rt-static" >"$tmp/lc.out" 2>&1 &
lc=$!
"$B/guestlib/tally-run" --host "unix:$tmp/sock" --priority best-effort --name be \
  -- "$tmp/rt-static" >"$tmp/be.out" 2>&1 &
be=$!
wait $lc
wait $be
if cmp -s "$tmp/native.out" "$tmp/lc.out" && cmp -s "$tmp/native.out" "$tmp/be.out"; then
  ok "two tenants (latency-critical + best-effort) both match native"
else
  bad "two tenants: an output differs"
  diff "$tmp/native.out" "$tmp/lc.out" | head -10
  diff "$tmp/native.out" "$tmp/be.out" | head -10
fi

kill -TERM "$daemon"
wait "$daemon"
rc=$?
daemon=
if [ $rc -eq 0 ]; then ok "tallyd exits 0 on SIGTERM"; else bad "tallyd exited $rc on SIGTERM"; fi
echo "--- tallyd log (last 15 lines)"
tail -n 15 "$tmp/tallyd.log"
echo "guest-gpu: $pass passed, $fail failed (outputs in $tmp)"
[ $fail -eq 0 ]
