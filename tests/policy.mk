# tests/policy.mk: unit tests of policy/.
if HAVE_CMOCKA
check_PROGRAMS += tests/test-pol-config
TESTS += tests/test-pol-config
endif
tests_test_pol_config_SOURCES = tests/test-pol-config.c
tests_test_pol_config_CFLAGS = $(TEST_CFLAGS)
tests_test_pol_config_LDADD = $(POLICY_LIBS) $(TEST_LIBS)
