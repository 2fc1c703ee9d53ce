# guestlib/local.mk: the guest library, installed as $(pkglibdir)/libcuda.so.1
# (never into $(libdir), where it would shadow the real driver).
tallylib_PROGRAMS += guestlib/libcuda.so.1
guestlib_libcuda_so_1_SOURCES = guestlib/guest.h \
	guestlib/entry.c guestlib/chan.c guestlib/device.c guestlib/ctx.c guestlib/compat.c guestlib/tables.c \
	guestlib/mem.c guestlib/stream.c guestlib/syncword.c guestlib/module.c guestlib/proc.c guestlib/export.c \
	guestlib/stubs.c guestlib/hostfn.c guestlib/vmm.c guestlib/graph.c guestlib/array.c \
	guestlib/tmap.c guestlib/trace.c guestlib/mirror.c guestlib/hostreg.c \
	guestlib/gstage.c guestlib/uobj.c
guestlib_libcuda_so_1_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
guestlib_libcuda_so_1_CFLAGS = $(AM_CFLAGS) $(XXHASH_CFLAGS) -fvisibility=hidden
guestlib_libcuda_so_1_LDFLAGS = $(AM_LDFLAGS) -shared -Wl,-soname,libcuda.so.1 $(SHLIB_NO_UNDEFINED)
# wire/'s guest objects need no libuv; zstd (and rdma-core when built) come along.
guestlib_libcuda_so_1_LDADD = wire/libtallywire.a $(ZSTD_LIBS) $(RDMA_LIBS) -lpthread -ldl
# The GEMM split planner: pure C, for the interposed cuBLAS/cuBLASLt.
noinst_LIBRARIES += guestlib/libgemmplan.a
guestlib_libgemmplan_a_SOURCES = guestlib/gemm-plan.h guestlib/gemm-plan.c
EXTRA_DIST += docs/gemm-split.md
EXTRA_DIST += guestlib/README.md guestlib/driver-api.annot guestlib/driver-api.def \
	guestlib/driver-proc.def guestlib/driver-trace.def guestlib/cuda-result.def guestlib/tally-run.in \
	scripts/gen-driver-api.py

# The generated tables are committed; they are rebuilt when an input changes
# where libclang's Python bindings are installed, and otherwise kept as
# committed with a warning (GPU hosts need not have libclang).
GEN_DRIVER_API_PY = /usr/bin/python3
GUEST_GENERATED = guestlib/driver-api.def guestlib/driver-proc.def guestlib/driver-trace.def \
	guestlib/cuda-result.def
$(srcdir)/guestlib/driver-api.def: $(srcdir)/scripts/gen-driver-api.py $(srcdir)/guestlib/driver-api.annot
	$(AM_V_GEN)if $(GEN_DRIVER_API_PY) -c 'import clang.cindex' 2>/dev/null; then \
	  $(GEN_DRIVER_API_PY) $(srcdir)/scripts/gen-driver-api.py \
	    --cuda-include $(CUDA_HOME)/include --annot $(srcdir)/guestlib/driver-api.annot \
	    --outdir $(srcdir)/guestlib; \
	else echo "warning: no libclang bindings for $(GEN_DRIVER_API_PY); keeping the committed $@"; \
	  touch $@; fi

# check-generated: regenerate into a temporary folder and fail on any
# difference from the committed files (catches hand edits and header drift).
check-generated:
	@tmp=`mktemp -d` && \
	$(GEN_DRIVER_API_PY) $(srcdir)/scripts/gen-driver-api.py --cuda-include $(CUDA_HOME)/include \
	  --annot $(srcdir)/guestlib/driver-api.annot --outdir $$tmp && \
	rc=0; for f in $(GUEST_GENERATED); do \
	  diff -u $(srcdir)/$$f $$tmp/`basename $$f` || rc=1; done; rm -rf $$tmp; \
	if [ $$rc = 0 ]; then echo "check-generated: guestlib tables match cuda.h"; fi; exit $$rc
.PHONY: check-generated

# tally-run: usable from the build tree (LD_LIBRARY_PATH = builddir/guestlib)
# and installed in bin (LD_LIBRARY_PATH = pkglibdir).
bin_SCRIPTS = guestlib/tally-run
CLEANFILES += guestlib/tally-run
guestlib/tally-run: $(srcdir)/guestlib/tally-run.in Makefile
	$(AM_V_GEN)$(MKDIR_P) guestlib && \
	sed -e 's|@TALLY_BUILD_LIBDIR@|$(abs_top_builddir)/guestlib|g' \
	    -e 's|@TALLY_BUILD_BLASDIR@|$(abs_top_builddir)/blas|g' \
	    -e 's|@TALLY_INSTALL_LIBDIR@|$(pkglibdir)|g' \
	    -e 's|@TALLY_DEFAULT_SOCKET@|/run/tally/tallyd.sock|g' \
	    -e 's|@TALLY_RUN_SANITIZED@|$(TALLY_SANITIZED)|g' \
	    -e 's|@PACKAGE_NAME@|$(PACKAGE_NAME)|g' -e 's|@PACKAGE_VERSION@|$(PACKAGE_VERSION)|g' \
	    $(srcdir)/guestlib/tally-run.in > $@ && chmod +x $@

# Some loaders (numba) dlopen the unversioned libcuda.so before
# libcuda.so.1: both names must reach the guest, in the build tree (which
# tally-run puts on LD_LIBRARY_PATH) and in $(pkglibdir).  The link is
# relative, so it survives DESTDIR staging; uninstall removes it.
all-local: guestlib/libcuda.so
guestlib/libcuda.so: guestlib/libcuda.so.1
	$(AM_V_GEN)rm -f $@ && ln -s libcuda.so.1 $@
CLEANFILES += guestlib/libcuda.so
install-exec-hook:
	$(MKDIR_P) '$(DESTDIR)$(pkglibdir)'
	cd '$(DESTDIR)$(pkglibdir)' && rm -f libcuda.so && ln -s libcuda.so.1 libcuda.so
uninstall-hook:
	rm -f '$(DESTDIR)$(pkglibdir)/libcuda.so'
