# hostd/local.mk: the host daemon tallyd.
noinst_LIBRARIES += hostd/libtallyhostd.a
hostd_libtallyhostd_a_SOURCES = hostd/hostd.h hostd/config.c
hostd_libtallyhostd_a_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
hostd_libtallyhostd_a_CFLAGS = $(AM_CFLAGS) $(UV_CFLAGS)
HOSTD_LIBS = hostd/libtallyhostd.a $(REWRITE_LIBS) $(POLICY_LIBS) $(WIRE_LIBS)
bin_PROGRAMS += hostd/tallyd
hostd_tallyd_SOURCES = hostd/main.c
hostd_tallyd_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
hostd_tallyd_LDADD = $(HOSTD_LIBS)
EXTRA_DIST += hostd/README.md
