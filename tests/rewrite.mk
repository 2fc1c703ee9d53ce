# tests/rewrite.mk: unit tests of rewrite/.
if HAVE_CMOCKA
check_PROGRAMS += tests/test-rw-diag
TESTS += tests/test-rw-diag
endif
tests_test_rw_diag_SOURCES = tests/test-rw-diag.c
tests_test_rw_diag_CFLAGS = $(TEST_CFLAGS)
tests_test_rw_diag_LDADD = $(REWRITE_LIBS) $(TEST_LIBS)
# fatbin reader: fixtures are built at test time with $(NVCC).
if HAVE_CMOCKA
check_PROGRAMS += tests/test-rw-fatbin
TESTS += tests/test-rw-fatbin
endif
tests_test_rw_fatbin_SOURCES = tests/test-rw-fatbin.c
tests_test_rw_fatbin_CFLAGS = $(TEST_CFLAGS)
tests_test_rw_fatbin_LDFLAGS = $(AM_LDFLAGS) -Wl,--wrap=malloc -Wl,--wrap=calloc
tests_test_rw_fatbin_LDADD = $(REWRITE_LIBS) $(TEST_LIBS)
if HAVE_CMOCKA
check_PROGRAMS += tests/test-rw-fatbin-replay
TESTS += tests/test-rw-fatbin-replay
endif
tests_test_rw_fatbin_replay_SOURCES = tests/test-rw-fatbin-replay.c tests/fuzz/fuzz-rw-fatbin.c
tests_test_rw_fatbin_replay_CFLAGS = $(TEST_CFLAGS)
tests_test_rw_fatbin_replay_LDADD = $(REWRITE_LIBS) $(TEST_LIBS)
EXTRA_DIST += tests/fuzz/corpus/rw-fatbin
# libFuzzer target: the reader's sources are compiled into it so the
# fuzzer sees their coverage.
if FUZZING
FUZZ_TARGETS += tests/fuzz/fuzz-rw-fatbin
noinst_PROGRAMS += tests/fuzz/fuzz-rw-fatbin
endif
tests_fuzz_fuzz_rw_fatbin_SOURCES = tests/fuzz/fuzz-rw-fatbin.c rewrite/fatbin.c \
	rewrite/fatbin-elf.c rewrite/fatbin-extract.c rewrite/diag.c
tests_fuzz_fuzz_rw_fatbin_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS) $(LZ4_CFLAGS) -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_rw_fatbin_LDFLAGS = -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_rw_fatbin_LDADD = $(ZSTD_LIBS) $(LZ4_LIBS)
# PTX parser, printer, transformations, compile cache.
RW_PTX_TESTS = tests/test-rw-ptx-parse tests/test-rw-ptx-roundtrip tests/test-rw-xform-apply \
	tests/test-rw-xform-refuse tests/test-rw-cache tests/test-rw-ptx-replay tests/test-rw-ptx-oom tests/test-rw-xform-flow \
	tests/test-rw-ptb-model
if HAVE_CMOCKA
check_PROGRAMS += $(RW_PTX_TESTS)
TESTS += $(RW_PTX_TESTS)
endif
tests_test_rw_ptx_parse_SOURCES = tests/test-rw-ptx-parse.c
tests_test_rw_ptx_parse_CFLAGS = $(TEST_CFLAGS)
tests_test_rw_ptx_parse_LDADD = $(REWRITE_LIBS) $(TEST_LIBS)
tests_test_rw_ptx_roundtrip_SOURCES = tests/test-rw-ptx-roundtrip.c
tests_test_rw_ptx_roundtrip_CFLAGS = $(TEST_CFLAGS)
tests_test_rw_ptx_roundtrip_LDADD = $(REWRITE_LIBS) $(TEST_LIBS)
tests_test_rw_xform_apply_SOURCES = tests/test-rw-xform-apply.c
tests_test_rw_xform_apply_CFLAGS = $(TEST_CFLAGS)
tests_test_rw_xform_apply_LDADD = $(REWRITE_LIBS) $(TEST_LIBS)
tests_test_rw_xform_refuse_SOURCES = tests/test-rw-xform-refuse.c
tests_test_rw_xform_refuse_CFLAGS = $(TEST_CFLAGS)
tests_test_rw_xform_refuse_LDADD = $(REWRITE_LIBS) $(TEST_LIBS)
tests_test_rw_xform_flow_SOURCES = tests/test-rw-xform-flow.c
tests_test_rw_xform_flow_CFLAGS = $(TEST_CFLAGS)
tests_test_rw_xform_flow_LDADD = $(REWRITE_LIBS) $(TEST_LIBS)
tests_test_rw_ptb_model_SOURCES = tests/test-rw-ptb-model.c
tests_test_rw_ptb_model_CFLAGS = $(TEST_CFLAGS)
tests_test_rw_ptb_model_LDADD = $(REWRITE_LIBS) $(TEST_LIBS)
tests_test_rw_cache_SOURCES = tests/test-rw-cache.c
tests_test_rw_cache_CFLAGS = $(TEST_CFLAGS)
tests_test_rw_cache_LDADD = $(REWRITE_LIBS) $(TEST_LIBS)
tests_test_rw_ptx_oom_SOURCES = tests/test-rw-ptx-oom.c tests/oom-harness.h
tests_test_rw_ptx_oom_CFLAGS = $(TEST_CFLAGS)
tests_test_rw_ptx_oom_LDFLAGS = $(AM_LDFLAGS) -Wl,--wrap=malloc -Wl,--wrap=calloc \
	-Wl,--wrap=realloc -Wl,--wrap=free
tests_test_rw_ptx_oom_LDADD = $(REWRITE_LIBS) $(TEST_LIBS)
# make check replays the PTX fuzz corpus through the fuzz harness itself.
tests_test_rw_ptx_replay_SOURCES = tests/test-rw-ptx-replay.c tests/fuzz/fuzz-rw-ptx.c
tests_test_rw_ptx_replay_CFLAGS = $(TEST_CFLAGS)
tests_test_rw_ptx_replay_LDADD = $(REWRITE_LIBS) $(TEST_LIBS)
EXTRA_DIST += tests/fuzz/corpus/rw-ptx tests/data/ptx
if FUZZING
FUZZ_TARGETS += tests/fuzz/fuzz-rw-ptx
noinst_PROGRAMS += tests/fuzz/fuzz-rw-ptx
endif
# The parser's sources are compiled into the target so libFuzzer sees their coverage.
tests_fuzz_fuzz_rw_ptx_SOURCES = tests/fuzz/fuzz-rw-ptx.c rewrite/diag.c rewrite/ptx-lex.c \
	rewrite/ptx-parse.c rewrite/ptx-print.c rewrite/ptx-ir.c rewrite/ptx-opcodes.c \
	rewrite/xform-check.c rewrite/xform-flow.c rewrite/xform-apply.c rewrite/xform-report.c
tests_fuzz_fuzz_rw_ptx_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_rw_ptx_LDFLAGS = -fsanitize=fuzzer,address,undefined
# kernel corpus and GPU differential tests
include $(srcdir)/tests/corpus/corpus.mk
include $(srcdir)/tests/gpu/rw-diff.mk
