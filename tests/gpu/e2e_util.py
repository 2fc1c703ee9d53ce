"""e2e_util.py: helpers shared by the Python GPU end-to-end scripts under tests/gpu/.

Same contract as e2e-common.h for the C programs: stdout carries only deterministic facts
(hashes of results, exact integer sums), so tests/gpu/e2e-run can diff a native run against
runs through Tally; at exit one line "e2e-driver: PATH" on stderr names the libcuda.so.1
mapped into the process, which the runner uses to prove that the guest library was loaded.
Inputs are generated from fixed seeds with NumPy on the host; nothing is downloaded.

Each test section runs inside section(): an exception prints "NAME: error TYPE" on stdout
(so the diff shows it) and counts as a failure; the exit status is 1 if any section failed.
"""

import hashlib
import sys
import traceback

_failures = 0


def digest(arr):
    """Returns a short stable hash of a host array's dtype, shape and bytes."""
    import numpy as np

    a = np.ascontiguousarray(arr)
    h = hashlib.sha256()
    h.update(str(a.dtype).encode())
    h.update(str(a.shape).encode())
    h.update(a.tobytes())
    return h.hexdigest()[:16]


def section(name, fn):
    """Runs fn(); prints NAME: error TYPE and counts a failure if it raises."""
    global _failures
    try:
        fn()
    except Exception as e:  # report every failure the same way, whatever raised it
        _failures += 1
        print("%s: error %s" % (name, type(e).__name__))
        traceback.print_exc(file=sys.stderr)
    sys.stdout.flush()


def check(ok, what):
    """Prints 'check WHAT: ok|FAILED' and counts a failure when not ok."""
    global _failures
    print("check %s: %s" % (what, "ok" if ok else "FAILED"))
    if not ok:
        _failures += 1


def report_driver():
    """Writes 'e2e-driver: PATH' (the mapped libcuda.so.1, or 'none') to stderr."""
    found = "none"
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                i = line.find("/")
                if i >= 0 and "libcuda.so" in line[i:]:
                    found = line[i:].strip()
                    break
    except OSError:
        found = "unknown"
    sys.stderr.write("e2e-driver: %s\n" % found)


def finish():
    """Prints the failure count, reports the driver, and exits 0 or 1."""
    print("failures: %d" % _failures)
    sys.stdout.flush()
    report_driver()
    sys.exit(0 if _failures == 0 else 1)
