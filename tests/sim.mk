# tests/sim.mk: unit tests of sim/.
if HAVE_CMOCKA
check_PROGRAMS += tests/test-sim-rng
TESTS += tests/test-sim-rng
endif
tests_test_sim_rng_SOURCES = tests/test-sim-rng.c
tests_test_sim_rng_CFLAGS = $(TEST_CFLAGS)
tests_test_sim_rng_LDADD = $(SIM_LIBS) $(TEST_LIBS)
