# tests/rewrite.mk: unit tests of rewrite/.
if HAVE_CMOCKA
check_PROGRAMS += tests/test-rw-diag
TESTS += tests/test-rw-diag
endif
tests_test_rw_diag_SOURCES = tests/test-rw-diag.c
tests_test_rw_diag_CFLAGS = $(TEST_CFLAGS)
tests_test_rw_diag_LDADD = $(REWRITE_LIBS) $(TEST_LIBS)
