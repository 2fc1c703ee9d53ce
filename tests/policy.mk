# tests/policy.mk: unit tests of policy/.
if HAVE_CMOCKA
check_PROGRAMS += tests/test-pol-config tests/test-pol-sched tests/test-pol-profile tests/test-pol-oom \
	tests/test-pol-file tests/test-pol-depth tests/test-pol-flush
TESTS += tests/test-pol-config tests/test-pol-sched tests/test-pol-profile tests/test-pol-oom \
	tests/test-pol-file tests/test-pol-depth tests/test-pol-flush
endif
tests_test_pol_flush_SOURCES = tests/test-pol-flush.c tests/pol-harness.h
tests_test_pol_flush_CFLAGS = $(TEST_CFLAGS)
tests_test_pol_flush_LDADD = $(POLICY_LIBS) $(TEST_LIBS)
tests_test_pol_depth_SOURCES = tests/test-pol-depth.c tests/pol-harness.h
tests_test_pol_depth_CFLAGS = $(TEST_CFLAGS)
tests_test_pol_depth_LDADD = $(POLICY_LIBS) $(TEST_LIBS)
tests_test_pol_config_SOURCES = tests/test-pol-config.c
tests_test_pol_config_CFLAGS = $(TEST_CFLAGS)
tests_test_pol_config_LDADD = $(POLICY_LIBS) $(TEST_LIBS)
tests_test_pol_sched_SOURCES = tests/test-pol-sched.c tests/pol-harness.h
tests_test_pol_sched_CFLAGS = $(TEST_CFLAGS)
tests_test_pol_sched_LDADD = $(POLICY_LIBS) $(TEST_LIBS)
tests_test_pol_profile_SOURCES = tests/test-pol-profile.c
tests_test_pol_profile_CFLAGS = $(TEST_CFLAGS)
tests_test_pol_profile_LDADD = $(POLICY_LIBS) $(TEST_LIBS)
tests_test_pol_oom_SOURCES = tests/test-pol-oom.c tests/oom-harness.h
tests_test_pol_oom_CFLAGS = $(TEST_CFLAGS)
tests_test_pol_oom_LDFLAGS = $(AM_LDFLAGS) -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc \
	-Wl,--wrap=free
tests_test_pol_oom_LDADD = $(POLICY_LIBS) $(TEST_LIBS)
tests_test_pol_file_SOURCES = tests/test-pol-file.c
tests_test_pol_file_CFLAGS = $(TEST_CFLAGS)
tests_test_pol_file_LDADD = $(TEST_LIBS)
