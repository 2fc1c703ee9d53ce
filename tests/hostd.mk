# tests/hostd.mk: unit tests of hostd/.
if HAVE_CMOCKA
check_PROGRAMS += tests/test-hostd-config
TESTS += tests/test-hostd-config
endif
tests_test_hostd_config_SOURCES = tests/test-hostd-config.c
tests_test_hostd_config_CFLAGS = $(TEST_CFLAGS)
tests_test_hostd_config_LDADD = hostd/libtallyhostd.a $(TEST_LIBS)
