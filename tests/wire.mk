# tests/wire.mk: unit tests of wire/.
if HAVE_CMOCKA
check_PROGRAMS += tests/test-wire-error
TESTS += tests/test-wire-error
endif
tests_test_wire_error_SOURCES = tests/test-wire-error.c
tests_test_wire_error_CFLAGS = $(TEST_CFLAGS)
tests_test_wire_error_LDADD = $(WIRE_LIBS) $(TEST_LIBS)
