# policy/local.mk: the scheduler library (no CUDA).
noinst_LIBRARIES += policy/libtallypolicy.a
policy_libtallypolicy_a_SOURCES = policy/pol.h policy/pol-gpu.h policy/pol-file.h policy/pol-int.h policy/config.c policy/sched.c \
	policy/profile.c policy/profile-file.c policy/tally.c policy/ref-mps.c \
	policy/ref-timeslice.c policy/ref-tgs.c
POLICY_LIBS = policy/libtallypolicy.a -lm
EXTRA_DIST += policy/README.md
