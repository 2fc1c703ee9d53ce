# tests/hostd.mk: unit tests of hostd/ (recording GPU backend: never GPU coverage).
if HAVE_CMOCKA
check_PROGRAMS += tests/test-hostd-config tests/test-hostd-exec tests/test-hostd-sched \
	tests/test-hostd-guard tests/test-hostd-vmm tests/test-hostd-variants tests/test-hostd-graph \
	tests/test-hostd-array tests/test-hostd-tmap tests/test-hostd-release tests/test-hostd-barrier \
	tests/test-hostd-ctxlock
TESTS += tests/test-hostd-config tests/test-hostd-exec tests/test-hostd-sched tests/test-hostd-guard \
	tests/test-hostd-vmm tests/test-hostd-variants tests/test-hostd-graph tests/test-hostd-array \
	tests/test-hostd-tmap tests/test-hostd-release tests/test-hostd-barrier tests/test-hostd-ctxlock
endif
# The context's reader-writer lock (ctxlock.c): exclusion both ways, nesting, slots.
tests_test_hostd_ctxlock_SOURCES = tests/test-hostd-ctxlock.c
tests_test_hostd_ctxlock_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_hostd_ctxlock_CFLAGS = $(TEST_CFLAGS)
tests_test_hostd_ctxlock_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) $(TEST_LIBS)
# The asymmetric barrier (barrier.c): the store-buffering pattern, many rounds.
tests_test_hostd_barrier_SOURCES = tests/test-hostd-barrier.c
tests_test_hostd_barrier_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_hostd_barrier_CFLAGS = $(TEST_CFLAGS)
tests_test_hostd_barrier_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) $(TEST_LIBS)
# Releases made off the workers (release.c).
tests_test_hostd_release_SOURCES = tests/test-hostd-release.c
tests_test_hostd_release_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_hostd_release_CFLAGS = $(TEST_CFLAGS)
tests_test_hostd_release_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) $(TEST_LIBS)
# Tensor maps (exec-tmap.c): arguments at their limits, hostile requests.
tests_test_hostd_tmap_SOURCES = tests/test-hostd-tmap.c tests/hostd-call-harness.h \
	tests/hostd-call-fixture.h
tests_test_hostd_tmap_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_hostd_tmap_CFLAGS = $(TEST_CFLAGS) $(XXHASH_CFLAGS)
tests_test_hostd_tmap_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) $(TEST_LIBS)
# CUDA arrays, copies with an array side, texture and surface objects (exec-array.c).
tests_test_hostd_array_SOURCES = tests/test-hostd-array.c tests/hostd-call-harness.h \
	tests/hostd-call-fixture.h
tests_test_hostd_array_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_hostd_array_CFLAGS = $(TEST_CFLAGS) $(XXHASH_CFLAGS)
tests_test_hostd_array_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) $(TEST_LIBS)
# Stream capture and graphs (exec-graph.c), with the scheduler running.
tests_test_hostd_graph_SOURCES = tests/test-hostd-graph.c tests/hostd-call-harness.h \
	tests/hostd-call-fixture.h
tests_test_hostd_graph_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_hostd_graph_CFLAGS = $(TEST_CFLAGS) $(XXHASH_CFLAGS)
tests_test_hostd_graph_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) $(TEST_LIBS)

# Virtual memory, stream-ordered allocation and pools (exec-vmm.c, exec-pool.c).
tests_test_hostd_vmm_SOURCES = tests/test-hostd-vmm.c tests/hostd-call-harness.h \
	tests/hostd-call-fixture.h
tests_test_hostd_vmm_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_hostd_vmm_CFLAGS = $(TEST_CFLAGS) $(XXHASH_CFLAGS)
tests_test_hostd_vmm_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) $(TEST_LIBS)
# Slice and PTB variants: build, cache, slices, preemption (hostd/variants.c, sched.c).
tests_test_hostd_variants_SOURCES = tests/test-hostd-variants.c
tests_test_hostd_variants_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_hostd_variants_CFLAGS = $(TEST_CFLAGS) $(XXHASH_CFLAGS)
tests_test_hostd_variants_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) \
	$(TEST_LIBS)
tests_test_hostd_sched_SOURCES = tests/test-hostd-sched.c
tests_test_hostd_sched_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_hostd_sched_CFLAGS = $(TEST_CFLAGS)
tests_test_hostd_sched_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) $(TEST_LIBS)
# Quotas, token/folder checks, log escaping, module cache bounds, tallyctl's texts.
tests_test_hostd_guard_SOURCES = tests/test-hostd-guard.c
tests_test_hostd_guard_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_hostd_guard_CFLAGS = $(TEST_CFLAGS) $(XXHASH_CFLAGS)
tests_test_hostd_guard_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) $(TEST_LIBS)
tests_test_hostd_config_SOURCES = tests/test-hostd-config.c
tests_test_hostd_config_CFLAGS = $(TEST_CFLAGS)
tests_test_hostd_config_LDADD = hostd/libtallyhostd.a $(POLICY_LIBS) $(TEST_LIBS)
tests_test_hostd_exec_SOURCES = tests/test-hostd-exec.c tests/fuzz/fuzz-hostd-exec.c \
	tests/hostd-call-harness.h
tests_test_hostd_exec_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) -DHOSTD_FUZZ_NO_ENTRY
tests_test_hostd_exec_CFLAGS = $(TEST_CFLAGS) $(XXHASH_CFLAGS)
tests_test_hostd_exec_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) $(TEST_LIBS)
# Restart after a GPU fault: tallyd-record re-executes itself (shell TAP);
# its tenants are tests/guest-tenant-helper (guestlib.mk), linked against the
# guest library as applications are.
TESTS += tests/test-hostd-restart.sh
if HAVE_CMOCKA
check_PROGRAMS += tests/test-hostd-restart-unit
TESTS += tests/test-hostd-restart-unit
endif
tests_test_hostd_restart_unit_SOURCES = tests/test-hostd-restart-unit.c
tests_test_hostd_restart_unit_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_hostd_restart_unit_CFLAGS = $(TEST_CFLAGS)
tests_test_hostd_restart_unit_LDADD = hostd/libtallyhostd.a $(POLICY_LIBS) $(TEST_LIBS)
EXTRA_DIST += tests/test-hostd-restart.sh
# What the log says about a tenant's failed requests (shell TAP, tallyd-record).
TESTS += tests/test-hostd-log.sh
EXTRA_DIST += tests/test-hostd-log.sh
# The same on a GPU with the real tallyd (make check-gpu): the script, with
# this tree's source path; it builds its CUDA tenant with nvcc itself.
GPU_TESTS += tests/test-hostd-restart-gpu
EXTRA_DIST += tests/test-hostd-restart-gpu.sh tests/test-hostd-restart-gpu.cu
CLEANFILES += tests/test-hostd-restart-gpu
tests/test-hostd-restart-gpu: $(srcdir)/tests/test-hostd-restart-gpu.sh hostd/tallyd \
		guestlib/libcuda.so.1 guestlib/tally-run
	$(AM_V_GEN)$(MKDIR_P) tests && sed -e 's|@TALLY_SRCDIR@|$(abs_top_srcdir)|g' \
	  $(srcdir)/tests/test-hostd-restart-gpu.sh > $@ && chmod +x $@
# libFuzzer target for the request decoder (configure --enable-fuzzing CC=clang).
if FUZZING
FUZZ_TARGETS += tests/fuzz/fuzz-hostd-exec tests/fuzz/fuzz-hostd-sched
noinst_PROGRAMS += tests/fuzz/fuzz-hostd-exec tests/fuzz/fuzz-hostd-sched
endif
tests_fuzz_fuzz_hostd_exec_SOURCES = tests/fuzz/fuzz-hostd-exec.c
tests_fuzz_fuzz_hostd_exec_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_fuzz_fuzz_hostd_exec_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_hostd_exec_LDFLAGS = -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_hostd_exec_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS)
# The scheduler's API driven by scripts of launches, memsets, fences, flushes and tenants
# coming and going (tests/fuzz/fuzz-hostd-sched.c).
tests_fuzz_fuzz_hostd_sched_SOURCES = tests/fuzz/fuzz-hostd-sched.c
EXTRA_DIST += tests/fuzz/corpus/hostd-sched
tests_fuzz_fuzz_hostd_sched_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_fuzz_fuzz_hostd_sched_CFLAGS = $(tests_fuzz_fuzz_hostd_exec_CFLAGS)
tests_fuzz_fuzz_hostd_sched_LDFLAGS = $(tests_fuzz_fuzz_hostd_exec_LDFLAGS)
tests_fuzz_fuzz_hostd_sched_LDADD = $(tests_fuzz_fuzz_hostd_exec_LDADD)
# What tallyd adds per launch and per synchronisation (recording device, shm):
# cd BUILDDIR && tests/bench/hostd-bench [N [M]]  (TALLYD_ARGS: extra daemon flags).
noinst_PROGRAMS += tests/bench/hostd-bench
tests_bench_hostd_bench_SOURCES = tests/bench/hostd-bench.c
tests_bench_hostd_bench_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_bench_hostd_bench_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) \
	$(GUEST_LINK)
tests_bench_hostd_bench_LDFLAGS = $(AM_LDFLAGS) $(GUEST_RPATH)
EXTRA_tests_bench_hostd_bench_DEPENDENCIES = hostd/tallyd-record
# Every allocation of a tenant's creation and requests fails once (malloc
# wrapped at link time, tests/oom-harness.h).
if HAVE_CMOCKA
check_PROGRAMS += tests/test-hostd-oom
TESTS += tests/test-hostd-oom
endif
tests_test_hostd_oom_SOURCES = tests/test-hostd-oom.c tests/oom-harness.h tests/hostd-call-harness.h
tests_test_hostd_oom_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_hostd_oom_CFLAGS = $(TEST_CFLAGS)
tests_test_hostd_oom_LDFLAGS = $(AM_LDFLAGS) -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc \
	-Wl,--wrap=free
tests_test_hostd_oom_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) $(TEST_LIBS)
# The chaos suite: tallyd-record as a child process against floods,
# slowloris, malformed input, deaths and quota breaches (TAP; no cmocka).
check_PROGRAMS += tests/test-hostd-chaos
TESTS += tests/test-hostd-chaos
tests_test_hostd_chaos_SOURCES = tests/test-hostd-chaos.c tests/hostd-chaos.h
tests_test_hostd_chaos_LDADD = $(WIRE_LIBS)
EXTRA_tests_test_hostd_chaos_DEPENDENCIES = hostd/tallyd-record hostd/tallyctl \
	tests/guest-tenant-helper guestlib/tally-run
# Where a request's time goes (docs/lc-path.md): hops-report FILE... over the
# hand-off times of TALLY_HOPS (guest) and tallyd --hops.
noinst_PROGRAMS += tests/bench/hops-report
tests_bench_hops_report_SOURCES = tests/bench/hops-report.c
tests_bench_hops_report_LDADD = $(WIRE_GUEST_LIBS)
# hops-report --gaps from made-up records (no GPU).
TESTS += tests/bench/test-hops-report.sh
EXTRA_DIST += tests/bench/test-hops-report.sh

# The flood measurement (tests/bench/RESULTS.md): cd BUILDDIR && tests/bench/hostd-flood [SECONDS].
noinst_PROGRAMS += tests/bench/hostd-flood
tests_bench_hostd_flood_SOURCES = tests/bench/hostd-flood.c tests/hostd-chaos.h
tests_bench_hostd_flood_LDADD = $(WIRE_LIBS)
EXTRA_tests_bench_hostd_flood_DEPENDENCIES = hostd/tallyd-record
