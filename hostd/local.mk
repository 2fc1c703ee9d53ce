# hostd/local.mk: the host daemon tallyd.
#
# The daemon's logic is one archive; the GPU backend is chosen at link time
# (sibling files behind hostd/gpu.h): tallyd links gpu-cuda.c and the real
# driver, unit tests link gpu-record.c and never touch a GPU.
noinst_LIBRARIES += hostd/libtallyhostd.a hostd/libtallyhostd-cuda.a hostd/libtallyhostd-record.a
hostd_libtallyhostd_a_SOURCES = hostd/hostd.h hostd/hostd-int.h hostd/tenant-int.h hostd/gpu.h \
	hostd/config.c hostd/log.c hostd/modcache.c hostd/tenant.c hostd/exec.c hostd/server.c hostd/hops.c \
	hostd/hostfn.c hostd/sched.c hostd/sched.h hostd/variants.c hostd/variants.h \
	hostd/restart.c hostd/guard.h hostd/quota.c hostd/metrics.c hostd/ctl.c hostd/latency.c \
	hostd/exec-vmm.c hostd/exec-pool.c hostd/exec-graph.c hostd/exec-array.c hostd/exec-tmap.c hostd/exec-link.c \
	hostd/release.c hostd/pin.c hostd/barrier.c hostd/ctxlock.c
hostd_libtallyhostd_a_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
hostd_libtallyhostd_a_CFLAGS = $(AM_CFLAGS) $(UV_CFLAGS) $(XXHASH_CFLAGS)
hostd_libtallyhostd_cuda_a_SOURCES = hostd/gpu-cuda.c
hostd_libtallyhostd_cuda_a_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
hostd_libtallyhostd_record_a_SOURCES = hostd/gpu-record.c
hostd_libtallyhostd_record_a_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
HOSTD_LIBS = hostd/libtallyhostd.a $(REWRITE_LIBS) $(POLICY_LIBS) $(WIRE_LIBS) $(UV_LIBS) \
	$(XXHASH_LIBS) -lpthread
# The driver is dlopened at start (gpu-cuda.c), never linked.
HOSTD_CUDA_LIBS = hostd/libtallyhostd-cuda.a -ldl
HOSTD_RECORD_LIBS = hostd/libtallyhostd-record.a
bin_PROGRAMS += hostd/tallyd
hostd_tallyd_SOURCES = hostd/main.c
hostd_tallyd_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
hostd_tallyd_LDADD = hostd/libtallyhostd.a $(HOSTD_CUDA_LIBS) $(HOSTD_LIBS)
# A tallyd on the recording device: lets CPU-only machines run real
# programs end to end through the guest (tests/test-guest-cudart.sh); never
# installed, never GPU coverage.
noinst_PROGRAMS += hostd/tallyd-record
hostd_tallyd_record_SOURCES = hostd/main.c
hostd_tallyd_record_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
hostd_tallyd_record_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS)
# tallyctl: the operator's client of tallyd's control socket (no GPU, no
# daemon code: it only connects, asks and prints).
bin_PROGRAMS += hostd/tallyctl
hostd_tallyctl_SOURCES = hostd/tallyctl.c
EXTRA_DIST += hostd/README.md
