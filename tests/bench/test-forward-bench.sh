#!/bin/bash
# test-forward-bench.sh: tests/bench/forward-bench.sh's own plumbing on the CPU (TAP).
#
# A fake nvidia-smi lists one GPU; tallyd is hostd/tallyd-record (the recording device);
# forward-bench-bin is replaced (FORWARD_BENCH_BIN) by a Python stand-in that, through Tally,
# calls cuInit with the real guest library (so the tenant connects to the daemon it was sent
# to, under its run's name), names the library it loaded and the command line of the tallyd
# it was told of (FB_TALLYD_PID), and prints figures that say which column ran it.  Checks
# the --queued columns: a second tallyd with --lc-direct no, its own socket, every queued run
# (shared memory, and TCP: queued-tcp) sent there and none of the others, the table's columns in
# order, and both daemons stopped at the end; with --hops, the table of the worker's gaps between
# launches for each transport, from that transport's tenants only.  No GPU: this tests the
# benchmark's script, not Tally's speed.
B=${TALLY_BUILDDIR:-.}
S=${TALLY_SRCDIR:-..}
echo "1..4"
if ! command -v python3 >/dev/null 2>&1; then
  for i in 1 2 3; do echo "ok $i # SKIP python3 not found (the stand-in needs it)"; done
  exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tally-fbtest-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$S/tests/tap.sh"
mkdir -p "$tmp/bin"
cat >"$tmp/bin/nvidia-smi" <<'EOS'
#!/bin/sh
case "$*" in
  *query-gpu*) echo "Fake GPU, 0.0" ;;
  *) echo "GPU 0: Fake GPU (UUID: GPU-00000000)" ;;
esac
EOS
# A sanitizer build's guest library loads only behind the ASan runtime (TALLY_ASAN_PRELOAD).
cat >"$tmp/fake-bin" <<'EOS'
#!/bin/sh
if [ -n "${TALLY_HOST:-}" ] && [ -n "${TALLY_ASAN_PRELOAD:-}" ]; then
  LD_PRELOAD=$TALLY_ASAN_PRELOAD ASAN_OPTIONS=detect_leaks=0 exec python3 "$0.py"
fi
exec python3 "$0.py"
EOS
cat >"$tmp/fake-bin.py" <<'EOS'
# forward-bench-bin's stand-in: figures by column (the tenant's name fb-COLUMN-ROUND)
import ctypes, os, sys
name = os.environ.get("TALLY_NAME", "")
col = "-".join(name.split("-")[1:-1]) if name.startswith("fb-") else "native"
chain = {"native": 4.0, "shm": 4.4, "tcp": 4.2, "queued": 3.8, "queued-tcp": 4.6}.get(col, 9.9)
if os.environ.get("TALLY_HOST"):
    rc = ctypes.CDLL("libcuda.so.1").cuInit(0)
    lib = [l.split()[-1] for l in open("/proc/self/maps") if "libcuda.so" in l][0]
    print("e2e-driver:", lib, file=sys.stderr)
    print("cuInit:", rc, os.environ["TALLY_HOST"], file=sys.stderr)
    pid = os.environ.get("FB_TALLYD_PID", "")
    if pid:
        with open(f"/proc/{pid}/cmdline") as f:
            print("tallyd:", pid, f.read().replace("\0", " "), file=sys.stderr)
print(f"stream created\nchain_ms_p50 {chain}\nchain_ok 1\ncopy_ok 1\nlaunch_sync_us_p50 10\n"
      "req_us_p50 230\nreq_us_p99 250\ntcp_rtt_us_p50 20")
EOS
chmod +x "$tmp/bin/nvidia-smi" "$tmp/fake-bin"
L=$tmp/logs
PATH=$tmp/bin:$PATH TALLYD=$B/hostd/tallyd-record FORWARD_BENCH_BIN=$tmp/fake-bin \
  FORWARD_BENCH_LOGS=$L TALLY_BUILDDIR=$B TALLY_SRCDIR=$S \
  timeout 120 bash "$S/tests/bench/forward-bench.sh" -r 2 --queued --hops >"$tmp/fb.out" 2>&1
rc=$?

table() {
  cat "$tmp/fb.out"
  [ $rc = 0 ] &&
    grep -q '^| metric | native | tally-shm | tally-tcp | shm, queued | tcp, queued | shm/native | tcp/native | queued/native | queued-tcp/native | target (shm) | shm meets |$' "$tmp/fb.out" &&
    grep -q '^| 1000-kernel chain (ms) | 4 | 4.4 | 4.2 | 3.8 | 4.6 | 1.10x | 1.05x | 0.95x | 1.15x | <= 1.05x | NO |$' "$tmp/fb.out" &&
    grep -q '^  1000-kernel chain (ms), queued: 0.95x 0.95x$' "$tmp/fb.out" &&
    grep -q '^  1000-kernel chain (ms), queued-tcp: 1.15x 1.15x$' "$tmp/fb.out" &&
    grep -q '^results correct (chain and copies): yes, every configuration$' "$tmp/fb.out"
}
check "--queued, 2 rounds: shm and TCP columns through the second tallyd, per-round ratios, exit 0" \
  table

# pid_of CFG ROUND: the tallyd the run was told of
pid_of() { sed -n 's/^tallyd: \([0-9]*\) .*/\1/p' "$L/$1.$2.err"; }
daemons() {
  for c in shm tcp queued queued-tcp; do
    for r in 1 2; do echo "$c.$r: $(grep -h '^cuInit\|^tallyd' "$L/$c.$r.err")"; done
  done
  for r in 1 2; do
    grep -q '^cuInit: 0 unix:.*/tallyd-queued\.sock$' "$L/queued.$r.err" &&
      grep -q '^cuInit: 0 tcp://127\.0\.0\.1:' "$L/queued-tcp.$r.err" &&
      [ "$(pid_of queued-tcp $r)" = "$(pid_of queued $r)" ] &&
      grep -q '^cuInit: 0 unix:.*/tallyd\.sock$' "$L/shm.$r.err" &&
      grep -q '^cuInit: 0 tcp://127\.0\.0\.1:' "$L/tcp.$r.err" &&
      grep -q '^tallyd: .* --lc-direct no' "$L/queued.$r.err" &&
      ! grep -q -- '--lc-direct' "$L/shm.$r.err" "$L/tcp.$r.err" &&
      [ "$(pid_of shm $r)" = "$(pid_of tcp $r)" ] &&
      [ -n "$(pid_of queued $r)" ] && [ "$(pid_of queued $r)" != "$(pid_of shm $r)" ] || return 1
  done
}
check "the queued runs go to a second tallyd with --lc-direct no, the others to the first" daemons

logs() {
  ls "$L"
  q=$(grep -l "'fb-queued-1' connected" "$L"/tallyd.*.log) && s=$(grep -l "'fb-shm-1' connected" "$L"/tallyd.*.log) &&
    [ "$q" != "$s" ] && grep -q "'fb-queued-2' connected" "$q" && ! grep -q "'fb-shm" "$q" &&
    grep -q "'fb-tcp-2' connected" "$s" && ! grep -q "'fb-queued" "$s" &&
    for p in $(pid_of shm 1) $(pid_of queued 1); do ! kill -0 "$p" 2>/dev/null || return 1; done
}
check "each daemon's log has its own tenants; both daemons stopped at the end" logs

# --hops: each transport's gaps come from the daemon records of its own tenants (the stand-in
# makes one call, its HELLO, and no launch: no pair).
gaps() {
  for c in shm tcp queued queued-tcp; do
    grep -q "^the worker between back-to-back launches over $c (hops-report --gaps --op launch):\$" \
      "$tmp/fb.out" && grep -q "^D fb-$c-1 " "$L/hops.daemon.$c" &&
      [ "$(grep -vc "^D fb-$c-" "$L/hops.daemon.$c")" = 0 ] || return 1
  done
  [ "$(grep -c '^| worker between back-to-back posts (0 pairs, mean gap 0 ns) |' \
    "$tmp/fb.out")" = 4 ]
}
check "--hops: the worker's gaps per transport, from its own tenants' records" gaps
