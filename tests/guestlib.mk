# tests/guestlib.mk: unit tests of guestlib/ (load the built libcuda.so.1).
if HAVE_CMOCKA
check_PROGRAMS += tests/test-guest-entry
TESTS += tests/test-guest-entry
endif
tests_test_guest_entry_SOURCES = tests/test-guest-entry.c
tests_test_guest_entry_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_guest_entry_CFLAGS = $(TEST_CFLAGS)
tests_test_guest_entry_LDADD = $(TEST_LIBS) -ldl
EXTRA_tests_test_guest_entry_DEPENDENCIES = guestlib/libcuda.so.1
