#!/usr/bin/env python3
"""stub-speed.py: scripts/fw-speed's stand-in workload (--stub), no CUDA.

usage: stub-speed.py CSV SECONDS
Writes 100 requests `req,arrival_ns,start_ns,end_ns` whose times depend on
where it runs (TALLY_HOST: none 1.0 ms, unix: 1.1 ms, tcp: 1.2 ms; every
tenth twice as long; with TALLY_GEMM_SPLIT=0 all of them 1.1 times shorter),
so the harness's ratios are known: 1.100 and 1.200, and 1.100 for a run
against its +nosplit twin.  It prints where it ran, the split setting, the
class tally-run gave it (TALLY_PRIORITY) and its hops file.  With
STUB_SPEED_FAIL=PREFIX in the environment a run whose TALLY_HOST starts with
PREFIX prints a line as Tally's guest would (tally[PID]: ...) and 30
numbered lines, and exits 3 (a failing run's output).  With
STUB_SPEED_HANG=PREFIX such a run prints its pid and sleeps until killed (a
run that a time limit stops).
"""
import os
import sys
import time

host = os.environ.get("TALLY_HOST", "")
base = 1.2e6 if host.startswith("tcp:") else 1.1e6 if host.startswith("unix:") else 1.0e6
if os.environ.get("TALLY_GEMM_SPLIT") == "0":
    base /= 1.1
fail = os.environ.get("STUB_SPEED_FAIL")
if fail and host.startswith(fail):
    print(f"tally[{os.getpid()}]: stub-speed: the channel's reason")
    for i in range(1, 31):
        print(f"stub-speed: failing on purpose, line {i}")
    sys.exit(3)
hang = os.environ.get("STUB_SPEED_HANG")
if hang and host.startswith(hang):
    print(f"stub-speed: hanging, pid {os.getpid()}", flush=True)
    while True:
        time.sleep(1)
t = time.monotonic_ns()
with open(sys.argv[1], "w") as f:
    f.write("req,arrival_ns,start_ns,end_ns\n")
    for i in range(100):
        d = base * (2 if i % 10 == 9 else 1)
        f.write(f"{i},0,{t + i * 10**7},{t + i * 10**7 + int(d)}\n")
print("stub-speed:", host or "native", "split", os.environ.get("TALLY_GEMM_SPLIT", "default"),
      "for", sys.argv[2], "s", "hops", os.path.basename(os.environ.get("TALLY_HOPS", "none")),
      "class", os.environ.get("TALLY_PRIORITY", "none"))
