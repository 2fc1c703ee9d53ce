#!/bin/sh
# test-guest-cudart.sh: unmodified cudart programs run through the guest.
#
# Builds tests/guest-cudart.cu with nvcc (static and shared cudart), starts
# hostd/tallyd-record (tallyd on the recording device) on a private socket,
# and runs both programs under guestlib/tally-run; then checks the
# unreachable-daemon message, which tenants tally-run gives the interposed
# cuBLAS, and that tallyd exits 0 on SIGTERM.  Prints TAP.
# The recording device moves bytes but runs no kernel: CPU coverage of
# cudart's initialisation path, never GPU coverage.
B=${TALLY_BUILDDIR:-.}
S=${TALLY_SRCDIR:-..}
NVCC=${NVCC:-nvcc}
echo "1..8"
if ! command -v "$NVCC" >/dev/null 2>&1; then
  for i in 1 2 3 4 5 6 7 8; do echo "ok $i # SKIP nvcc not found"; done
  exit 0
fi
tmp=$(mktemp -d /tmp/tally-cudart-XXXXXX)
daemon=
cleanup() { [ -n "$daemon" ] && kill "$daemon" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
. "${TALLY_SRCDIR:-$(dirname "$0")/..}/tests/tap.sh"
"$NVCC" -o "$tmp/static" "$S/tests/guest-cudart.cu" >"$tmp/nvcc1" 2>&1 &&
  "$NVCC" -cudart shared -o "$tmp/shared" "$S/tests/guest-cudart.cu" >"$tmp/nvcc2" 2>&1 ||
  { cat "$tmp"/nvcc* | sed 's/^/# /'; }
echo tally-test-token >"$tmp/token"
"$B/hostd/tallyd-record" --listen-unix "$tmp/sock" --listen-tcp 127.0.0.1:0 --token-file "$tmp/token" \
  --state-dir "$tmp/state" --log-level info 2>"$tmp/daemon.log" &
daemon=$!
# Wait (bounded: 5 s) for the "serving" line, which names the TCP port.
i=0
while ! grep -qs serving "$tmp/daemon.log" && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.05; done
port=$(sed -n 's/.*serving.*(port \([0-9]*\)).*/\1/p' "$tmp/daemon.log")
# Under --enable-sanitizers our libcuda.so.1 needs the ASan runtime first in
# the nvcc-built tenant (which is not instrumented); leaks of cudart itself
# are not ours to report.
trun() {
  if [ -n "${TALLY_ASAN_PRELOAD:-}" ]; then
    LD_PRELOAD=$TALLY_ASAN_PRELOAD ASAN_OPTIONS=detect_leaks=0 "$B/guestlib/tally-run" "$@"
  else
    "$B/guestlib/tally-run" "$@"
  fi
}
run() { trun --host "unix:$tmp/sock" --name "$1" -- "$tmp/$1" | grep -qx ok; }
check "static cudart initialises and moves memory through tallyd" run static
export LD_LIBRARY_PATH="${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
check "shared cudart initialises and moves memory through tallyd" run shared
tcp() { TALLY_TOKEN=tally-test-token trun --host "tcp://127.0.0.1:$port" -- "$tmp/static" | grep -qx ok; }
check "static cudart over TCP loopback with a token" tcp
tcp_bad_token() {
  out=$(TALLY_TOKEN=wrong trun --host "tcp://127.0.0.1:$port" -- "$tmp/static" 2>&1)
  echo "$out"; echo "$out" | grep -q "refused this tenant"
}
check "TCP tenant with a wrong token is refused" tcp_bad_token
unreachable() {
  out=$(trun --host "unix:$tmp/none" -- "$tmp/static" 2>&1)
  echo "$out"
  echo "$out" | grep -q "cannot reach tallyd at unix:$tmp/none" &&
    echo "$out" | grep -q "no CUDA-capable device"
}
check "unreachable daemon: one log line and no device" unreachable
bad_priority() { ! "$B/guestlib/tally-run" --priority urgent -- true; }
check "tally-run refuses an unknown priority" bad_priority
# The interposed cuBLAS: preloaded for a best-effort tenant (where it was
# built), never for a latency-critical one, not with TALLY_GEMM_SPLIT=0.
preload() {
  [ -e "$B/blas/libtally-blas.so" ] || { echo "no libtally-blas.so built: nothing to preload"; return 0; }
  # a sanitizer build's library is preloaded only behind the ASan runtime
  pre=${TALLY_ASAN_PRELOAD:-}
  show='echo "${LD_PRELOAD:-}"'
  be=$(env -u TALLY_GEMM_SPLIT LD_PRELOAD="$pre" ASAN_OPTIONS=detect_leaks=0 \
    "$B/guestlib/tally-run" -- sh -c "$show")
  lc=$(env LD_PRELOAD="$pre" ASAN_OPTIONS=detect_leaks=0 \
    "$B/guestlib/tally-run" --priority latency-critical -- sh -c "$show")
  off=$(env LD_PRELOAD="$pre" ASAN_OPTIONS=detect_leaks=0 TALLY_GEMM_SPLIT=0 \
    "$B/guestlib/tally-run" -- sh -c "$show")
  echo "be '$be' lc '$lc' off '$off'"
  case $be in *libtally-blas.so*) ;; *) return 1 ;; esac
  [ "$lc" = "$pre" ] && [ "$off" = "$pre" ]
}
check "tally-run preloads libtally-blas.so for best-effort tenants only, unless TALLY_GEMM_SPLIT=0" preload
stop() { kill -TERM "$daemon" && wait "$daemon"; rc=$?; daemon=; [ $rc -eq 0 ]; }
check "tallyd exits 0 on SIGTERM" stop
