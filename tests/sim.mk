# tests/sim.mk: unit tests of sim/ (and of policy/ decisions in simulation).
SIM_TESTS = tests/test-sim-rng tests/test-sim-trace tests/test-sim-decisions \
	tests/test-sim-determinism tests/test-sim-trace-replay tests/test-sim-oom \
	tests/test-sim-runtrace tests/test-sim-flush
if HAVE_CMOCKA
check_PROGRAMS += $(SIM_TESTS)
TESTS += $(SIM_TESTS)
endif
tests_test_sim_rng_SOURCES = tests/test-sim-rng.c
tests_test_sim_rng_CFLAGS = $(TEST_CFLAGS)
tests_test_sim_rng_LDADD = $(SIM_LIBS) $(TEST_LIBS)
tests_test_sim_trace_SOURCES = tests/test-sim-trace.c
tests_test_sim_trace_CFLAGS = $(TEST_CFLAGS)
tests_test_sim_trace_LDADD = $(SIM_LIBS) $(TEST_LIBS)
tests_test_sim_trace_replay_SOURCES = tests/test-sim-trace-replay.c tests/fuzz/fuzz-sim-trace.c
tests_test_sim_trace_replay_CFLAGS = $(TEST_CFLAGS)
tests_test_sim_trace_replay_LDADD = $(SIM_LIBS) $(TEST_LIBS)
tests_test_sim_runtrace_SOURCES = tests/test-sim-runtrace.c
tests_test_sim_runtrace_CFLAGS = $(TEST_CFLAGS)
tests_test_sim_runtrace_LDADD = $(SIM_LIBS) $(TEST_LIBS)
tests_test_sim_oom_SOURCES = tests/test-sim-oom.c tests/oom-harness.h
tests_test_sim_oom_CFLAGS = $(TEST_CFLAGS)
tests_test_sim_oom_LDFLAGS = $(AM_LDFLAGS) -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc \
	-Wl,--wrap=free
tests_test_sim_oom_LDADD = $(SIM_LIBS) $(TEST_LIBS)
tests_test_sim_decisions_SOURCES = tests/test-sim-decisions.c
tests_test_sim_decisions_CFLAGS = $(TEST_CFLAGS)
tests_test_sim_decisions_LDADD = $(SIM_LIBS) $(TEST_LIBS)
tests_test_sim_flush_SOURCES = tests/test-sim-flush.c
tests_test_sim_flush_CFLAGS = $(TEST_CFLAGS)
tests_test_sim_flush_LDADD = $(SIM_LIBS) $(TEST_LIBS)
tests_test_sim_determinism_SOURCES = tests/test-sim-determinism.c
tests_test_sim_determinism_CFLAGS = $(TEST_CFLAGS)
tests_test_sim_determinism_LDADD = $(SIM_LIBS) $(TEST_LIBS)

# Benchmark: simulated blocks per second and peak memory (not run by check).
noinst_PROGRAMS += tests/bench/sim-bench
tests_bench_sim_bench_SOURCES = tests/bench/sim-bench.c
tests_bench_sim_bench_CPPFLAGS = $(AM_CPPFLAGS) -DSIM_TRACE_DIR='"$(abs_top_srcdir)/sim/traces"'
tests_bench_sim_bench_LDADD = $(SIM_LIBS)

# Fuzz target for the decoders of outside files (kernel trace, Azure CSV,
# profile file): their sources are compiled into it so the fuzzer sees
# their coverage.
if FUZZING
FUZZ_TARGETS += tests/fuzz/fuzz-sim-trace
noinst_PROGRAMS += tests/fuzz/fuzz-sim-trace
endif
tests_fuzz_fuzz_sim_trace_SOURCES = tests/fuzz/fuzz-sim-trace.c sim/trace.c sim/arrivals.c \
	sim/file.c sim/runtrace.c \
	sim/rng.c policy/config.c policy/sched.c policy/profile.c policy/profile-file.c \
	policy/tally.c policy/ref-mps.c policy/ref-timeslice.c policy/ref-tgs.c
tests_fuzz_fuzz_sim_trace_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_sim_trace_LDFLAGS = -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_sim_trace_LDADD = -lm
EXTRA_DIST += tests/fuzz/corpus/sim-trace

# The pair benchmark's arithmetic (sim/pairs.h) and the replay of its fuzz corpus.
if HAVE_CMOCKA
check_PROGRAMS += tests/test-sim-pairs tests/test-sim-pairs-replay
TESTS += tests/test-sim-pairs tests/test-sim-pairs-replay
endif
tests_test_sim_pairs_SOURCES = tests/test-sim-pairs.c
tests_test_sim_pairs_CFLAGS = $(TEST_CFLAGS)
tests_test_sim_pairs_LDADD = $(SIM_LIBS) $(TEST_LIBS)
tests_test_sim_pairs_replay_SOURCES = tests/test-sim-pairs-replay.c tests/fuzz/fuzz-sim-pairs.c
tests_test_sim_pairs_replay_CFLAGS = $(TEST_CFLAGS)
tests_test_sim_pairs_replay_LDADD = $(SIM_LIBS) $(TEST_LIBS)
if FUZZING
FUZZ_TARGETS += tests/fuzz/fuzz-sim-pairs
noinst_PROGRAMS += tests/fuzz/fuzz-sim-pairs
endif
tests_fuzz_fuzz_sim_pairs_SOURCES = tests/fuzz/fuzz-sim-pairs.c
tests_fuzz_fuzz_sim_pairs_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_sim_pairs_LDFLAGS = -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_sim_pairs_LDADD = $(SIM_LIBS) -lm
EXTRA_DIST += tests/fuzz/corpus/sim-pairs tests/bench/pairs/azure-sample.csv
