# tests/local.mk: shared test support and the per-module test fragments.
# Each module's cmocka tests live in tests/<module>.mk.
EXTRA_DIST += tests/README.md tests/bench/RESULTS.md
include $(srcdir)/tests/wire.mk
include $(srcdir)/tests/policy.mk
include $(srcdir)/tests/rewrite.mk
include $(srcdir)/tests/sim.mk
include $(srcdir)/tests/hostd.mk
include $(srcdir)/tests/guestlib.mk
include $(srcdir)/tests/blas.mk
include $(srcdir)/tests/gpu.mk
include $(srcdir)/tests/bench-pairs.mk
EXTRA_DIST += tests/data/facts
EXTRA_DIST += tests/fuzz-replay.h tests/tap.sh tests/spawn-env.h
# The time bound every test program runs under (build-aux/test-watchdog.sh).
TESTS += tests/test-watchdog.sh
EXTRA_DIST += tests/test-watchdog.sh
