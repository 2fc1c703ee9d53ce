# sim/local.mk: the discrete-event GPU simulator and tally-sim.
noinst_LIBRARIES += sim/libtallysim.a
sim_libtallysim_a_SOURCES = sim/sim.h sim/rng.c
SIM_LIBS = sim/libtallysim.a $(POLICY_LIBS)
bin_PROGRAMS += sim/tally-sim
sim_tally_sim_SOURCES = sim/main.c
sim_tally_sim_LDADD = $(SIM_LIBS)
EXTRA_DIST += sim/README.md
