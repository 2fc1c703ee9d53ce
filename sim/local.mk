# sim/local.mk: the discrete-event GPU simulator and tally-sim.
noinst_LIBRARIES += sim/libtallysim.a
sim_libtallysim_a_SOURCES = sim/sim.h sim/sim-int.h sim/rng.c sim/trace.c sim/arrivals.c \
	sim/pool.c sim/file.c sim/runtrace.c sim/wholerun.c sim/gpu.c sim/engine.c sim/compare.c sim/report.c \
	sim/pairs.h sim/pairs.c sim/pairs-report.c
SIM_LIBS = sim/libtallysim.a $(POLICY_LIBS)
bin_PROGRAMS += sim/tally-sim
sim_tally_sim_SOURCES = sim/main.c
# The bundled traces are found in the source tree when it is there (tally-sim
# runs from a build folder), else where `make install` put them; --traces or
# $$TALLY_SIM_TRACES point elsewhere.
sim_tally_sim_CPPFLAGS = $(AM_CPPFLAGS) -DSIM_TRACE_DIR='"$(abs_top_srcdir)/sim/traces"' \
	-DSIM_INSTALLED_TRACE_DIR='"$(pkgdatadir)/traces"'
sim_tally_sim_LDADD = $(SIM_LIBS)
simtracesdir = $(pkgdatadir)/traces
dist_simtraces_DATA = sim/traces/bert-b1-infer.ktr sim/traces/bert-b1-eager.ktr \
	sim/traces/bert-b8-graph.ktr sim/traces/resnet50-b8-graph.ktr \
	sim/traces/resnet50-b1-infer.ktr sim/traces/gpt2-train.ktr sim/traces/resnet50-train.ktr \
	sim/traces/cuda-c-lc.ktr sim/traces/cuda-c-be.ktr
EXTRA_DIST += sim/README.md sim/traces/README.md sim/traces/gen-synthetic.py
# tally-pairs: arrivals, statistics and report of the measured pair benchmark
# (scripts/bench-pairs); sim/pairs.h.
bin_PROGRAMS += sim/tally-pairs
sim_tally_pairs_SOURCES = sim/pairs-main.c
sim_tally_pairs_LDADD = $(SIM_LIBS)
