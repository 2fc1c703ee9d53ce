# policy/local.mk: the scheduler library (no CUDA).
noinst_LIBRARIES += policy/libtallypolicy.a
policy_libtallypolicy_a_SOURCES = policy/pol.h policy/config.c
POLICY_LIBS = policy/libtallypolicy.a -lm
EXTRA_DIST += policy/README.md
