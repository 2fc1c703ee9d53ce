# tests/guestlib.mk: unit tests of guestlib/ (load or link the built libcuda.so.1).
if HAVE_CMOCKA
check_PROGRAMS += tests/test-guest-entry tests/test-guest-exports tests/test-guest-daemon \
	tests/guest-chain tests/test-guest-async tests/test-guest-vmm tests/test-guest-graph tests/test-guest-array \
	tests/test-guest-tmap
TESTS += tests/test-guest-entry tests/test-guest-exports tests/test-guest-daemon \
	tests/test-guest-async tests/test-guest-vmm tests/test-guest-graph tests/test-guest-array \
	tests/test-guest-tmap
endif
# The other tenant process of test-guest-daemon/-async and of
# test-hostd-restart.sh (no cmocka: the script runs without it).
check_PROGRAMS += tests/guest-tenant-helper tests/mute-listener
TESTS += tests/test-guest-cudart.sh tests/test-guest-chain.sh tests/test-lc-path.sh
EXTRA_DIST += tests/test-guest-cudart.sh tests/guest-cudart.cu tests/test-guest-chain.sh \
	tests/test-lc-path.sh tests/record-daemon.sh
tests_mute_listener_SOURCES = tests/mute-listener.c
tests_test_guest_entry_SOURCES = tests/test-guest-entry.c tests/guest-dlopen-harness.h
tests_test_guest_entry_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_guest_entry_CFLAGS = $(TEST_CFLAGS)
tests_test_guest_entry_LDADD = $(TEST_LIBS) -ldl
EXTRA_tests_test_guest_entry_DEPENDENCIES = guestlib/libcuda.so.1 guestlib/libcuda.so
tests_test_guest_exports_SOURCES = tests/test-guest-exports.c tests/guest-dlopen-harness.h
tests_test_guest_exports_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_guest_exports_CFLAGS = $(TEST_CFLAGS)
tests_test_guest_exports_LDADD = $(TEST_LIBS) -ldl
EXTRA_tests_test_guest_exports_DEPENDENCIES = guestlib/libcuda.so.1
# Linked against the guest library itself, as an application is; the
# daemon half runs in-process on the recording GPU backend.
GUEST_LINK = guestlib/libcuda.so.1
# DT_RPATH, not DT_RUNPATH: on a GPU host LD_LIBRARY_PATH usually names the
# real driver's folder, and a RUNPATH loses to it, so these CPU tests loaded
# the real libcuda.so.1 and talked to the H200 (seen in make check there).
GUEST_RPATH = -Wl,--disable-new-dtags,-rpath,$(abs_top_builddir)/guestlib
tests_test_guest_daemon_SOURCES = tests/test-guest-daemon.c tests/guest-daemon-harness.h
tests_test_guest_daemon_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_guest_daemon_CFLAGS = $(TEST_CFLAGS)
tests_test_guest_daemon_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) \
	$(GUEST_LINK) $(TEST_LIBS)
tests_test_guest_daemon_LDFLAGS = $(AM_LDFLAGS) $(GUEST_RPATH)
EXTRA_tests_test_guest_daemon_DEPENDENCIES = tests/guest-tenant-helper
tests_test_guest_async_SOURCES = tests/test-guest-async.c tests/guest-daemon-harness.h
tests_test_guest_async_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_guest_async_CFLAGS = $(TEST_CFLAGS)
tests_test_guest_async_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) \
	$(GUEST_LINK) $(TEST_LIBS)
tests_test_guest_async_LDFLAGS = $(AM_LDFLAGS) $(GUEST_RPATH)
EXTRA_tests_test_guest_async_DEPENDENCIES = tests/guest-tenant-helper
tests_test_guest_vmm_SOURCES = tests/test-guest-vmm.c tests/guest-daemon-harness.h
tests_test_guest_vmm_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_guest_vmm_CFLAGS = $(TEST_CFLAGS)
tests_test_guest_vmm_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) \
	$(GUEST_LINK) $(TEST_LIBS)
tests_test_guest_vmm_LDFLAGS = $(AM_LDFLAGS) $(GUEST_RPATH)
tests_test_guest_array_SOURCES = tests/test-guest-array.c tests/guest-daemon-harness.h
tests_test_guest_array_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_guest_array_CFLAGS = $(TEST_CFLAGS)
tests_test_guest_array_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) \
	$(GUEST_LINK) $(TEST_LIBS)
tests_test_guest_array_LDFLAGS = $(AM_LDFLAGS) $(GUEST_RPATH)
tests_test_guest_tmap_SOURCES = tests/test-guest-tmap.c tests/guest-daemon-harness.h
tests_test_guest_tmap_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_guest_tmap_CFLAGS = $(TEST_CFLAGS)
tests_test_guest_tmap_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) \
	$(GUEST_LINK) $(TEST_LIBS)
tests_test_guest_tmap_LDFLAGS = $(AM_LDFLAGS) $(GUEST_RPATH)
tests_test_guest_graph_SOURCES = tests/test-guest-graph.c tests/guest-daemon-harness.h
tests_test_guest_graph_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_guest_graph_CFLAGS = $(TEST_CFLAGS)
tests_test_guest_graph_LDADD = hostd/libtallyhostd.a $(HOSTD_RECORD_LIBS) $(HOSTD_LIBS) \
	$(GUEST_LINK) $(TEST_LIBS)
tests_test_guest_graph_LDFLAGS = $(AM_LDFLAGS) $(GUEST_RPATH)
tests_guest_tenant_helper_SOURCES = tests/guest-tenant-helper.c
tests_guest_tenant_helper_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_guest_tenant_helper_LDADD = $(GUEST_LINK)
tests_guest_tenant_helper_LDFLAGS = $(AM_LDFLAGS) $(GUEST_RPATH)
tests_guest_chain_SOURCES = tests/guest-chain.c
tests_guest_chain_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_guest_chain_LDADD = $(GUEST_LINK)
tests_guest_chain_LDFLAGS = $(AM_LDFLAGS) $(GUEST_RPATH)
# The cudart script runs the programs it builds against tallyd-record.
check_SCRIPTS = guestlib/tally-run hostd/tallyd hostd/tallyd-record tests/bench/hops-report

# GPU end-to-end (make check-gpu): the script, with this tree's paths.
GPU_TESTS += tests/guest-gpu-smoke
EXTRA_DIST += tests/test-guest-gpu.sh tests/guest-gpu.cu tests/guest-gpu-drv.c \
	tests/guest-gpu-kernel.cu tests/guest-gpu-link-a.cu tests/guest-gpu-link-b.cu \
	tests/guest-gpu-cublas.cu
CLEANFILES += tests/guest-gpu-smoke
tests/guest-gpu-smoke: $(srcdir)/tests/test-guest-gpu.sh hostd/tallyd guestlib/libcuda.so.1 guestlib/tally-run
	$(AM_V_GEN)$(MKDIR_P) tests && sed -e 's|@TALLY_SRCDIR@|$(abs_top_srcdir)|g' \
	  $(srcdir)/tests/test-guest-gpu.sh > $@ && chmod +x $@
# The guest library's tables with every allocation failing once (tables.c
# compiled in; malloc wrapped at link time, tests/oom-harness.h).
if HAVE_CMOCKA
check_PROGRAMS += tests/test-guest-tables-oom
TESTS += tests/test-guest-tables-oom
endif
tests_test_guest_tables_oom_SOURCES = tests/test-guest-tables-oom.c guestlib/tables.c \
	tests/oom-harness.h
tests_test_guest_tables_oom_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_guest_tables_oom_CFLAGS = $(TEST_CFLAGS)
tests_test_guest_tables_oom_LDFLAGS = $(AM_LDFLAGS) -Wl,--wrap=malloc -Wl,--wrap=calloc \
	-Wl,--wrap=realloc -Wl,--wrap=free
tests_test_guest_tables_oom_LDADD = $(WIRE_GUEST_LIBS) $(TEST_LIBS)
# The GEMM split planner (pure C: no guest library, no daemon).
if HAVE_CMOCKA
check_PROGRAMS += tests/test-gemm-plan
TESTS += tests/test-gemm-plan
endif
tests_test_gemm_plan_SOURCES = tests/test-gemm-plan.c
tests_test_gemm_plan_CFLAGS = $(TEST_CFLAGS)
tests_test_gemm_plan_LDADD = guestlib/libgemmplan.a $(TEST_LIBS)
