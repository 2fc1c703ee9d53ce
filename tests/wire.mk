# tests/wire.mk: unit tests, fuzz targets and the benchmark of wire/.
WIRE_TESTS = tests/test-wire-error tests/test-wire-frame tests/test-wire-conn \
	tests/test-wire-peer tests/test-wire-oom tests/test-wire-api tests/test-wire-shm \
	tests/test-wire-rbulk tests/test-wire-parcopy tests/test-wire-call tests/test-wire-u64map \
	tests/test-wire-le tests/test-wire-direct
if HAVE_CMOCKA
check_PROGRAMS += $(WIRE_TESTS)
TESTS += $(WIRE_TESTS)
endif
EXTRA_DIST += tests/test-wire-harness.h
tests_test_wire_le_SOURCES = tests/test-wire-le.c
tests_test_wire_le_CFLAGS = $(TEST_CFLAGS)
tests_test_wire_le_LDADD = $(TEST_LIBS)
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
tests_test_wire_direct_SOURCES = tests/test-wire-direct.c tests/test-wire-harness.h
tests_test_wire_direct_CFLAGS = $(TEST_CFLAGS) $(UV_CFLAGS)
tests_test_wire_direct_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
tests_test_wire_shm_SOURCES = tests/test-wire-shm.c
tests_test_wire_shm_CFLAGS = $(TEST_CFLAGS)
tests_test_wire_shm_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
tests_test_wire_u64map_SOURCES = tests/test-wire-u64map.c
tests_test_wire_u64map_CFLAGS = $(TEST_CFLAGS)
tests_test_wire_u64map_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
tests_test_wire_call_SOURCES = tests/test-wire-call.c
tests_test_wire_call_CFLAGS = $(TEST_CFLAGS)
tests_test_wire_call_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
tests_test_wire_rbulk_SOURCES = tests/test-wire-rbulk.c
tests_test_wire_rbulk_CFLAGS = $(TEST_CFLAGS)
tests_test_wire_rbulk_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
tests_test_wire_parcopy_SOURCES = tests/test-wire-parcopy.c tests/test-wire-harness.h
tests_test_wire_parcopy_CFLAGS = $(TEST_CFLAGS) $(UV_CFLAGS)
tests_test_wire_parcopy_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
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
	tests/fuzz/fuzz-wire-hello.c tests/fuzz/fuzz-wire-rbulk.c tests/fuzz/fuzz-wire-direct.c
tests_test_wire_fuzz_replay_CFLAGS = $(TEST_CFLAGS) -DWIRE_FUZZ_NO_ENTRY
tests_test_wire_fuzz_replay_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
EXTRA_DIST += tests/fuzz/corpus/wire-frame tests/fuzz/corpus/wire-hello tests/fuzz/corpus/wire-rbulk \
	tests/fuzz/corpus/wire-direct
# libFuzzer targets: wire's decoder sources are compiled into them so the
# fuzzer sees their coverage.
WIRE_FUZZ_SRC = wire/frame.c wire/hello.c wire/buf.c wire/error.c wire/txplan.c wire/rbulk.c
if FUZZING
FUZZ_TARGETS += tests/fuzz/fuzz-wire-frame tests/fuzz/fuzz-wire-hello tests/fuzz/fuzz-wire-rbulk \
	tests/fuzz/fuzz-wire-direct
noinst_PROGRAMS += tests/fuzz/fuzz-wire-frame tests/fuzz/fuzz-wire-hello tests/fuzz/fuzz-wire-rbulk \
	tests/fuzz/fuzz-wire-direct
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
tests_fuzz_fuzz_wire_rbulk_SOURCES = tests/fuzz/fuzz-wire-rbulk.c $(WIRE_FUZZ_SRC)
tests_fuzz_fuzz_wire_rbulk_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS) $(XXHASH_CFLAGS) \
	-fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_wire_rbulk_LDFLAGS = -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_wire_rbulk_LDADD = $(ZSTD_LIBS)
tests_fuzz_fuzz_wire_direct_SOURCES = tests/fuzz/fuzz-wire-direct.c wire/direct.c wire/shm.c \
	$(WIRE_FUZZ_SRC)
tests_fuzz_fuzz_wire_direct_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS) $(XXHASH_CFLAGS) \
	-fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_wire_direct_LDFLAGS = -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_wire_direct_LDADD = $(ZSTD_LIBS)
# Benchmark (not run by make check): prints every figure beside its raw
# baseline and the reproduce command.
noinst_PROGRAMS += tests/bench/wire-bench
tests_bench_wire_bench_SOURCES = tests/bench/wire-bench.c tests/test-wire-harness.h
tests_bench_wire_bench_CFLAGS = $(AM_CFLAGS) $(UV_CFLAGS)
tests_bench_wire_bench_LDADD = $(WIRE_LIBS) -lm
# RDMA verbs transport: built with rdma-core; reports "skipped: no RDMA
# device" (TAP SKIP) where there is none.
# test-wire-rdma-fake: the same cases against a simulated device
# (tests/test-wire-rdma-fake.c, every rdma_cm/verbs call wrapped at link time), so the
# verbs code runs somewhere; it is a model, not hardware.
if HAVE_RDMA
if HAVE_CMOCKA
check_PROGRAMS += tests/test-wire-rdma tests/test-wire-rdma-fake
TESTS += tests/test-wire-rdma tests/test-wire-rdma-fake
endif
endif
RDMA_FAKE_WRAPS = ibv_get_device_list ibv_free_device_list ibv_alloc_pd ibv_dealloc_pd \
	ibv_create_comp_channel ibv_destroy_comp_channel ibv_create_cq ibv_destroy_cq \
	ibv_get_cq_event ibv_ack_cq_events ibv_reg_mr ibv_dereg_mr rdma_create_event_channel \
	rdma_destroy_event_channel rdma_create_id rdma_destroy_id rdma_bind_addr rdma_listen \
	rdma_resolve_addr rdma_resolve_route rdma_connect rdma_accept rdma_reject rdma_disconnect \
	rdma_create_qp rdma_destroy_qp rdma_get_cm_event rdma_ack_cm_event rdma_get_dst_port
tests_test_wire_rdma_fake_SOURCES = tests/test-wire-rdma.c tests/test-wire-rdma-fake.c \
	tests/test-wire-harness.h
tests_test_wire_rdma_fake_CFLAGS = $(TEST_CFLAGS) $(UV_CFLAGS) $(RDMA_CFLAGS) -DWIRE_RDMA_FAKE
tests_test_wire_rdma_fake_LDFLAGS = $(AM_LDFLAGS) $(foreach f,$(RDMA_FAKE_WRAPS),-Wl,--wrap=$(f))
tests_test_wire_rdma_fake_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
tests_test_wire_rdma_SOURCES = tests/test-wire-rdma.c tests/test-wire-harness.h
tests_test_wire_rdma_CFLAGS = $(TEST_CFLAGS) $(UV_CFLAGS) $(RDMA_CFLAGS)
tests_test_wire_rdma_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
