# tests/hostd.mk: unit tests of hostd/ (recording GPU backend: never GPU coverage).
if HAVE_CMOCKA
check_PROGRAMS += tests/test-hostd-config tests/test-hostd-exec
TESTS += tests/test-hostd-config tests/test-hostd-exec
endif
tests_test_hostd_config_SOURCES = tests/test-hostd-config.c
tests_test_hostd_config_CFLAGS = $(TEST_CFLAGS)
tests_test_hostd_config_LDADD = hostd/libtallyhostd.a $(TEST_LIBS)
tests_test_hostd_exec_SOURCES = tests/test-hostd-exec.c tests/fuzz/fuzz-hostd-exec.c
tests_test_hostd_exec_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) -DHOSTD_FUZZ_NO_ENTRY
tests_test_hostd_exec_CFLAGS = $(TEST_CFLAGS)
tests_test_hostd_exec_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) $(TEST_LIBS)
# libFuzzer target for the request decoder (configure --enable-fuzzing CC=clang).
if FUZZING
FUZZ_TARGETS += tests/fuzz/fuzz-hostd-exec
noinst_PROGRAMS += tests/fuzz/fuzz-hostd-exec
endif
tests_fuzz_fuzz_hostd_exec_SOURCES = tests/fuzz/fuzz-hostd-exec.c
tests_fuzz_fuzz_hostd_exec_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_fuzz_fuzz_hostd_exec_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_hostd_exec_LDFLAGS = -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_hostd_exec_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS)
