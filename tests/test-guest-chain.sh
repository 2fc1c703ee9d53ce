#!/bin/sh
# test-guest-chain.sh: tallyd's real CUDA backend, run on our own driver.
#
# Starts tallyd-record (the recording device) and, in front of it, the real
# tallyd (hostd/gpu-cuda.c) with guestlib/ on LD_LIBRARY_PATH: that tallyd
# dlopens our libcuda.so.1 as its "driver" and is itself a tenant of the
# recording daemon.  tests/guest-chain runs against the front tallyd (and,
# for comparison, directly against the recording one).  This runs the real
# backend's code (function enumeration, parameter layouts, launches through
# CU_LAUNCH_PARAM_BUFFER_POINTER, streams, events, libraries) without a GPU;
# it is CPU coverage of hostd, never GPU coverage.  Then the same with the
# front tallyd passing launch arguments as an array of pointers
# (TALLYD_LAUNCH_PARAMS=array) and not reading cuBLASLt's layout objects
# (TALLYD_BLASLT_LAYOUT=0).  Prints TAP.
B=${TALLY_BUILDDIR:-.}
echo "1..7"
tmp=$(mktemp -d /tmp/tally-chain-XXXXXX)
rec=
front=
cleanup() {
  [ -n "$front" ] && kill "$front" 2>/dev/null
  [ -n "$rec" ] && kill "$rec" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
wait_serving() { # bounded (5 s) wait for a daemon's "serving" line
  i=0
  while ! grep -qs serving "$1" && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.05; done
}
"$B/hostd/tallyd-record" --listen-unix "$tmp/rec.sock" --log-level info 2>"$tmp/rec.log" &
rec=$!
wait_serving "$tmp/rec.log"
LD_LIBRARY_PATH="$B/guestlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" TALLY_HOST="unix:$tmp/rec.sock" TALLY_NAME=front-tallyd \
  "$B/hostd/tallyd" --listen-unix "$tmp/front.sock" --log-level info 2>"$tmp/front.log" &
front=$!
flog=$tmp/front.log fsock=$tmp/front.sock # the running front tallyd's log and socket
wait_serving "$flog"
n=0
check() {
  n=$((n + 1)); name=$1; shift
  if "$@" >"$tmp/out.$n" 2>&1; then echo "ok $n - $name"; else
    echo "not ok $n - $name"; sed 's/^/# /' "$tmp/out.$n"; sed 's/^/# front: /' "$flog" | tail -5; fi
}
# Each step is bounded, so a daemon that stops answering fails its step.
direct() { TALLY_HOST="unix:$tmp/rec.sock" timeout 120 "$B/tests/guest-chain" | grep -qx ok; }
chain() { TALLY_HOST="unix:$fsock" timeout 120 "$B/tests/guest-chain" | grep -qx ok; }
check "guest-chain against the recording daemon" direct
check "guest-chain through tallyd's CUDA backend on our driver" chain
# cuBLASLt's slot 3 as a tenant of the front tallyd: the objects its backend read from its
# driver (here our guest, served by the recording daemon); "slot3 801" when it read none.
layout() { TALLY_HOST="unix:$fsock" timeout 60 "$B/tests/guest-tenant-helper" blaslt-layout |
  grep -qx "slot3 $1"; }
check "cuBLASLt's layout objects through tallyd's CUDA backend" layout 0
stop() { # SIGTERM, then up to 60 s for the exit; its status must be 0
  kill -TERM "$front" || return 1
  i=0
  while kill -0 "$front" 2>/dev/null && [ $i -lt 600 ]; do i=$((i + 1)); sleep 0.1; done
  if kill -0 "$front" 2>/dev/null; then
    echo "tallyd (pid $front) still running 60 s after SIGTERM"; kill -KILL "$front"; front=; return 1
  fi
  wait "$front"; rc=$?; front=; [ $rc -eq 0 ]
}
check "front tallyd exits 0 on SIGTERM after cleaning up" stop
LD_LIBRARY_PATH="$B/guestlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" TALLY_HOST="unix:$tmp/rec.sock" TALLY_NAME=front-array \
  TALLYD_LAUNCH_PARAMS=array TALLYD_BLASLT_LAYOUT=0 \
  "$B/hostd/tallyd" --listen-unix "$tmp/front2.sock" --log-level debug 2>"$tmp/front2.log" &
front=$!
flog=$tmp/front2.log fsock=$tmp/front2.sock # its own: the first one's "serving" must not count
wait_serving "$flog"
array() {
  grep -q "as an array of pointers (TALLYD_LAUNCH_PARAMS=array)" "$flog" && chain &&
    grep -q "launch arguments of function .*: an array of pointers" "$flog"
}
check "guest-chain through tallyd's CUDA backend passing arguments as an array" array
no_layout() {
  grep -q "layout objects not read (TALLYD_BLASLT_LAYOUT=0)" "$flog" && layout 801
}
check "TALLYD_BLASLT_LAYOUT=0: the backend reads none, cuBLASLt's slot 3 is refused" no_layout
check "that tallyd exits 0 on SIGTERM" stop
