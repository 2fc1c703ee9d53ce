# tests/wire.mk: unit tests, fuzz targets and the benchmark of wire/.
WIRE_TESTS = tests/test-wire-error tests/test-wire-frame tests/test-wire-conn \
	tests/test-wire-peer tests/test-wire-oom tests/test-wire-api tests/test-wire-shm
if HAVE_CMOCKA
check_PROGRAMS += $(WIRE_TESTS)
TESTS += $(WIRE_TESTS)
endif
EXTRA_DIST += tests/test-wire-harness.h
tests_test_wire_error_SOURCES = tests/test-wire-error.c
tests_test_wire_error_CFLAGS = $(TEST_CFLAGS)
tests_test_wire_error_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
tests_test_wire_conn_SOURCES = tests/test-wire-conn.c tests/test-wire-harness.h
tests_test_wire_conn_CFLAGS = $(TEST_CFLAGS) $(UV_CFLAGS)
tests_test_wire_conn_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
tests_test_wire_frame_SOURCES = tests/test-wire-frame.c
tests_test_wire_frame_CFLAGS = $(TEST_CFLAGS) $(ZSTD_CFLAGS)
tests_test_wire_frame_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
tests_test_wire_peer_SOURCES = tests/test-wire-peer.c tests/test-wire-harness.h
tests_test_wire_peer_CFLAGS = $(TEST_CFLAGS) $(UV_CFLAGS)
tests_test_wire_peer_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
tests_test_wire_api_SOURCES = tests/test-wire-api.c tests/test-wire-harness.h
tests_test_wire_api_CFLAGS = $(TEST_CFLAGS) $(UV_CFLAGS)
tests_test_wire_api_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
tests_test_wire_shm_SOURCES = tests/test-wire-shm.c
tests_test_wire_shm_CFLAGS = $(TEST_CFLAGS)
tests_test_wire_shm_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
tests_test_wire_oom_SOURCES = tests/test-wire-oom.c tests/test-wire-harness.h
tests_test_wire_oom_CFLAGS = $(TEST_CFLAGS) $(UV_CFLAGS) $(ZSTD_CFLAGS)
tests_test_wire_oom_LDFLAGS = $(AM_LDFLAGS) -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc
tests_test_wire_oom_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
# Fuzz corpora replayed by make check; the same sources are the libFuzzer
# targets below (with their LLVMFuzzerTestOneInput entry compiled in).
if HAVE_CMOCKA
check_PROGRAMS += tests/test-wire-fuzz-replay
TESTS += tests/test-wire-fuzz-replay
endif
tests_test_wire_fuzz_replay_SOURCES = tests/test-wire-fuzz-replay.c tests/fuzz/fuzz-wire-frame.c \
	tests/fuzz/fuzz-wire-hello.c
tests_test_wire_fuzz_replay_CFLAGS = $(TEST_CFLAGS) -DWIRE_FUZZ_NO_ENTRY
tests_test_wire_fuzz_replay_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
EXTRA_DIST += tests/fuzz/corpus/wire-frame tests/fuzz/corpus/wire-hello
# libFuzzer targets: wire's decoder sources are compiled into them so the
# fuzzer sees their coverage.
WIRE_FUZZ_SRC = wire/frame.c wire/hello.c wire/buf.c wire/error.c wire/txplan.c
if FUZZING
FUZZ_TARGETS += tests/fuzz/fuzz-wire-frame tests/fuzz/fuzz-wire-hello
noinst_PROGRAMS += tests/fuzz/fuzz-wire-frame tests/fuzz/fuzz-wire-hello
endif
tests_fuzz_fuzz_wire_frame_SOURCES = tests/fuzz/fuzz-wire-frame.c $(WIRE_FUZZ_SRC)
tests_fuzz_fuzz_wire_frame_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS) $(XXHASH_CFLAGS) \
	-fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_wire_frame_LDFLAGS = -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_wire_frame_LDADD = $(ZSTD_LIBS)
tests_fuzz_fuzz_wire_hello_SOURCES = tests/fuzz/fuzz-wire-hello.c $(WIRE_FUZZ_SRC)
tests_fuzz_fuzz_wire_hello_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS) $(XXHASH_CFLAGS) \
	-fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_wire_hello_LDFLAGS = -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_wire_hello_LDADD = $(ZSTD_LIBS)
# Benchmark (not run by make check): prints every figure beside its raw
# baseline and the reproduce command.
noinst_PROGRAMS += tests/bench/wire-bench
tests_bench_wire_bench_SOURCES = tests/bench/wire-bench.c tests/test-wire-harness.h
tests_bench_wire_bench_CFLAGS = $(AM_CFLAGS) $(UV_CFLAGS)
tests_bench_wire_bench_LDADD = $(WIRE_LIBS) -lm
# RDMA verbs transport: built with rdma-core; reports "skipped: no RDMA
# device" (TAP SKIP) where there is none.
if HAVE_RDMA
if HAVE_CMOCKA
check_PROGRAMS += tests/test-wire-rdma
TESTS += tests/test-wire-rdma
endif
endif
tests_test_wire_rdma_SOURCES = tests/test-wire-rdma.c tests/test-wire-harness.h
tests_test_wire_rdma_CFLAGS = $(TEST_CFLAGS) $(UV_CFLAGS) $(RDMA_CFLAGS)
tests_test_wire_rdma_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
