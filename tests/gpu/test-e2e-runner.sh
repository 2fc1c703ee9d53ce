#!/bin/bash
# test-e2e-runner: CPU test of tests/gpu/e2e-run's own logic (make check; TAP output).
#
# Builds a fake build tree in a temp directory: a fake nvidia-smi that lists one GPU, a fake
# tallyd (python3: listens on the UNIX socket and TCP port it is given, exits 0 on SIGTERM,
# exits 5 when a client sends "die"), and fake e2e programs, one shell script copied under
# every program name, that misbehave in the ways the runner must catch: output that differs
# over TCP, a hang over TCP, a wrong exit status over shm, a run that loads the real driver,
# a run that kills tallyd, a program that is not deterministic natively.  Then it runs the
# real generated e2e-run against that tree and checks its verdict line by line, its total,
# its exit status, that it restarted tallyd after the crash and stopped it at the end.
# No GPU, CUDA or Tally code is involved: this tests the runner, not Tally.
set -u

SRCDIR=@abs_top_srcdir@
RUNNER=$(cd "$(dirname "$0")" && pwd)/e2e-run
n=0
fails=0
ok() { # CONDITION-STATUS DESCRIPTION
  n=$((n + 1))
  if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}

echo "1..18"
if ! command -v python3 >/dev/null 2>&1; then
  for i in $(seq 1 18); do echo "ok $i # SKIP python3 not found (the fake tallyd needs it)"; done
  exit 0
fi

W=$(mktemp -d "${TMPDIR:-/tmp}/tally-e2e-runner-test.XXXXXX")
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/bin" "$W/b/hostd" "$W/b/guestlib" "$W/b/tests/gpu"
mkfifo "$W/never" # opened for reading by the "hanging" program; nobody ever writes to it

cat >"$W/bin/nvidia-smi" <<'EOF'
#!/bin/sh
case "$*" in
  *memory.used*) echo 1000 ;; # constant: the runner must call memory "not measurable"
  *) echo "GPU 0: Fake GPU (UUID: GPU-00000000)" ;;
esac
EOF
cat >"$W/bin/fake-python" <<'EOF'
#!/bin/sh
# stands in for python3: every "import" check fails, so the Python programs are skipped
exit 1
EOF
cat >"$W/b/hostd/tallyd" <<EOF
#!/usr/bin/env python3
import os, select, signal, socket, sys
a = sys.argv
unix = a[a.index("--listen-unix") + 1]
host, port = a[a.index("--listen-tcp") + 1].rsplit(":", 1)
open("$W/tallyd.pids", "a").write("%d\n" % os.getpid())
u = socket.socket(socket.AF_UNIX)
u.bind(unix)
u.listen()
t = socket.socket()
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind((host, int(port)))
t.listen()
signal.signal(signal.SIGTERM, lambda *x: sys.exit(0))
print("fake tallyd listening", file=sys.stderr, flush=True)
while True:
    r, _, _ = select.select([u, t], [], [])
    for s in r:
        c, _ = s.accept()
        if c.recv(8) == b"die":
            print("fake tallyd dies on request", file=sys.stderr, flush=True)
            os._exit(5)  # at once: the client sees the close only as the process exits
        c.close()
EOF
: >"$W/b/guestlib/libcuda.so.1"
cat >"$W/fakeprog" <<EOF
#!/bin/bash
# One fake e2e program; its behaviour depends on its name and on TALLY_HOST.
name=\$(basename "\$0")
mode=native
case "\${TALLY_HOST:-}" in unix:*) mode=shm ;; tcp://*) mode=tcp ;; esac
echo "fake \$name \$*"
# A daemon address nobody listens on: answer like the guest does.
if [ "\$mode" != native ] && ! python3 -c '
import socket, sys
h = sys.argv[1]
if h.startswith("unix:"):
    s = socket.socket(socket.AF_UNIX); s.connect(h[5:])
else:
    a, p = h[6:].rsplit(":", 1); socket.create_connection((a, int(p)))' "\$TALLY_HOST" 2>/dev/null; then
  echo "error CUDA_ERROR_NO_DEVICE at fake.c:1: cuInit(0)"
  echo "tally: cannot reach tallyd at \$TALLY_HOST; start tallyd" >&2
  exit 1
fi
if [ "\${1:-}" = hold ]; then
  echo "holding 4096 MiB pid \$\$"
  cat >/dev/null
fi
if [ "\${1:-}" = lc ]; then echo "lc iterations: 3, mismatches: 0, checksum 0"; fi
case "\$name.\$mode" in
  drv-context.tcp) echo "an extra line" ;;
  rt-stream-shared.tcp) read -r _ <"$W/never" ;;
  drv-module.shm) exit 3 ;;
  rt-errors-static.*) echo "random \$RANDOM.\$\$" ;;
  rt-device-static.shm)
    # send "die", then wait until tallyd has closed the connection by exiting
    python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.send(b"die"); s.recv(1)' "\${TALLY_HOST#unix:}" ;;
esac
if [ "\$mode" = native ] || [ "\$name" = rt-device-shared ]; then
  echo "e2e-driver: /usr/lib/x86_64-linux-gnu/libcuda.so.1" >&2
else
  echo "e2e-driver: \${LD_LIBRARY_PATH%%:*}/libcuda.so.1" >&2
fi
EOF
chmod +x "$W/bin/"* "$W/b/hostd/tallyd" "$W/fakeprog"
for p in rt-device rt-memory rt-stream rt-launch rt-errors rt-sticky; do
  cp "$W/fakeprog" "$W/b/tests/gpu/$p-static"
  cp "$W/fakeprog" "$W/b/tests/gpu/$p-shared"
done
for p in drv-context drv-module tenant-static; do cp "$W/fakeprog" "$W/b/tests/gpu/$p"; done

export TALLY_BUILDDIR=$W/b TALLY_SRCDIR=$SRCDIR PYTHON3=$W/bin/fake-python E2E_TIMEOUT=2
PATH=$W/bin:$PATH "$RUNNER" >"$W/out" 2>&1
rc=$?
sed 's/^/# /' "$W/out"
line() { grep -Eq "^$1" "$W/out"; }

[ $rc = 1 ]
ok $? "exit status 1 when something failed (got $rc)"
line 'PASS rt-memory-static +shm +identical to native'
ok $? "a matching tenant run passes"
line 'FAIL drv-context +tcp +output differs from native .*first: \+an extra line'
ok $? "differing output fails and names the first differing line"
line 'FAIL rt-stream-shared +tcp +timed out'
ok $? "a hanging tenant run fails with 'timed out'"
line 'FAIL drv-module +shm +exit status 3, native 0'
ok $? "a tenant run with a different exit status fails"
line 'FAIL rt-device-shared +shm +loaded /usr/lib/x86_64-linux-gnu/libcuda.so.1, not Tally'
ok $? "a run that did not load the guest library fails"
# (tallyd may still be exiting when the run ends: then the next start notices and charges it)
line 'FAIL rt-device-static +shm +tallyd (died during|was found dead after) this run'
ok $? "a run during which tallyd died fails"
line 'PASS rt-device-static +tcp +identical to native'
ok $? "tallyd is restarted after dying and the next run passes"
line 'FAIL rt-errors-static +native +two native runs differ'
ok $? "a program that is not deterministic natively fails its native line"
line 'SKIP cupy +tcp +python module cupy missing'
ok $? "a missing python module skips with the reason"
line 'PASS two-tenants +shm +both identical to native'
ok $? "two tenants at once are compared separately"
line 'PASS tallyd +sigterm +exit status 0'
ok $? "tallyd's exit on SIGTERM is checked"
line 'PASS tenant-dies +tcp +killed a tenant holding 4 GiB; GPU memory not measurable here'
ok $? "a killed tenant is detected and the next tenant checked"
line 'PASS unreachable +shm +cuInit: CUDA_ERROR_NO_DEVICE; tally: cannot reach tallyd at unix:'
ok $? "an unreachable daemon address is reported once"
np=$(grep -c '^PASS ' "$W/out")
nf=$(grep -c '^FAIL ' "$W/out")
ns=$(grep -c '^SKIP ' "$W/out")
line "e2e: $np passed, $nf failed, $ns skipped\$" && [ "$nf" -ge 8 ] && [ "$ns" = 6 ]
ok $? "the total counts every line ($np passed, $nf failed, $ns skipped)"
alive=0
while read -r pid; do kill -0 "$pid" 2>/dev/null && alive=$((alive + 1)); done <"$W/tallyd.pids"
[ "$alive" = 0 ] && [ "$(wc -l <"$W/tallyd.pids")" = 2 ]
ok $? "two tallyd instances were started and none is left running ($alive alive)"

# Native-only mode starts no tallyd and passes when the selected programs pass.
: >"$W/tallyd.pids"
PATH=$W/bin:$PATH "$RUNNER" -t native -k 'rt-launch|rt-memory' >"$W/out2" 2>&1
rc=$?
sed 's/^/# /' "$W/out2"
[ $rc = 0 ] && [ ! -s "$W/tallyd.pids" ] && grep -q '^e2e: 4 passed, 0 failed, 0 skipped$' "$W/out2"
ok $? "-t native runs only the programs, without tallyd (exit $rc)"

# Without a GPU (nvidia-smi lists none) the runner skips (77) and runs nothing.
mkdir -p "$W/nogpu"
printf '#!/bin/sh\nexit 0\n' >"$W/nogpu/nvidia-smi"
chmod +x "$W/nogpu/nvidia-smi"
PATH=$W/nogpu:$PATH "$RUNNER" >"$W/out3" 2>&1
rc=$?
[ $rc = 77 ] && grep -q '^skip: no GPU' "$W/out3"
ok $? "no GPU: exit 77 (got $rc)"

exit 0
