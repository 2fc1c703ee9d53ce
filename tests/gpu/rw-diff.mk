# tests/gpu/rw-diff.mk: GPU differential tests of the kernel transformations
# and tests/bench/rewrite-bench's programs.
#
# The hook library is plain C and builds with `make` (so CI compiles it
# with -Werror); the harness programs need nvcc with CUB/Thrust and are
# built only by `make check-gpu` (GPU_TESTS) or `make rw-diff`.
noinst_LIBRARIES += tests/gpu/librwdiff.a
tests_gpu_librwdiff_a_SOURCES = tests/gpu/rw-diff.h tests/gpu/rw-diff-hook.c \
	tests/gpu/rw-diff-variants.c
tests_gpu_librwdiff_a_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)

RW_DIFF_BINS = tests/gpu/rw-diff-stress tests/gpu/rw-diff-cub-scan \
	tests/gpu/rw-diff-cub-reduce tests/gpu/rw-diff-cub-sort tests/gpu/rw-diff-cub-select \
	tests/gpu/rw-diff-cub-segmented tests/gpu/rw-diff-thrust tests/gpu/rw-diff-thrust-bykey
GPU_TESTS += $(RW_DIFF_BINS)
CLEANFILES += $(RW_DIFF_BINS) tests/gpu/rw-diff-obj/*.o

# PTX for the JIT (what the hook transforms) plus SASS for native runs.
rw_diff_gencode = $(if $(filter stress-mma,$(1)),-gencode arch=compute_90a$(comma)code=[compute_90a$(comma)sm_90a],-gencode arch=compute_90$(comma)code=[compute_90$(comma)sm_90])
comma := ,
RW_DIFF_NVCCFLAGS = -std=c++17 -O2 -Xcompiler -fPIC -I$(CUDA_HOME)/include/cccl \
	-I$(srcdir)/tests/corpus -I$(top_srcdir) -I$(top_builddir)

tests/gpu/rw-diff-obj/%.o: $(srcdir)/tests/corpus/%.cu $(CORPUS_INCS)
	@$(MKDIR_P) tests/gpu/rw-diff-obj
	$(AM_V_GEN)$(NVCC) $(RW_DIFF_NVCCFLAGS) $(call rw_diff_gencode,$*) -c $< -o $@
tests/gpu/rw-diff-obj/main.o: $(srcdir)/tests/gpu/rw-diff-main.cu $(CORPUS_INCS)
	@$(MKDIR_P) tests/gpu/rw-diff-obj
	$(AM_V_GEN)$(NVCC) $(RW_DIFF_NVCCFLAGS) -gencode arch=compute_90,code=sm_90 -c $< -o $@

# -u pulls the transformations (rewrite/xform-*.c) out of the archive when they are there;
# without them the weak reference stays NULL and variants read "unavailable".
RW_DIFF_LINK = $(AM_V_GEN)u=; if nm rewrite/libtallyrw.a 2>/dev/null | grep -q ' T rw_transform_ptx$$'; \
	then u='-Xlinker -u,rw_transform_ptx,-u,rw_xform_report_free'; fi; \
	$(NVCC) -cudart shared $$u -o $@ $(filter %.o,$^) tests/gpu/librwdiff.a $(REWRITE_LIBS) \
	-L$(CUDA_LIBDIR)/stubs -lcuda -ldl -lm -Xlinker -rpath,$(CUDA_LIBDIR)
RW_DIFF_DEPS = tests/gpu/rw-diff-obj/main.o tests/gpu/librwdiff.a rewrite/libtallyrw.a

tests/gpu/rw-diff-stress: $(RW_DIFF_DEPS) tests/gpu/rw-diff-obj/stress-sync.o \
	tests/gpu/rw-diff-obj/stress-mem.o tests/gpu/rw-diff-obj/stress-warp.o \
	tests/gpu/rw-diff-obj/stress-grid.o tests/gpu/rw-diff-obj/stress-async.o \
	tests/gpu/rw-diff-obj/stress-mma.o
	$(RW_DIFF_LINK)
tests/gpu/rw-diff-cub-scan: $(RW_DIFF_DEPS) tests/gpu/rw-diff-obj/cub-scan.o
	$(RW_DIFF_LINK)
tests/gpu/rw-diff-cub-reduce: $(RW_DIFF_DEPS) tests/gpu/rw-diff-obj/cub-reduce.o
	$(RW_DIFF_LINK)
tests/gpu/rw-diff-cub-sort: $(RW_DIFF_DEPS) tests/gpu/rw-diff-obj/cub-sort.o
	$(RW_DIFF_LINK)
tests/gpu/rw-diff-cub-select: $(RW_DIFF_DEPS) tests/gpu/rw-diff-obj/cub-select.o
	$(RW_DIFF_LINK)
tests/gpu/rw-diff-cub-segmented: $(RW_DIFF_DEPS) tests/gpu/rw-diff-obj/cub-segmented.o
	$(RW_DIFF_LINK)
tests/gpu/rw-diff-thrust: $(RW_DIFF_DEPS) tests/gpu/rw-diff-obj/thrust-algos.o
	$(RW_DIFF_LINK)
tests/gpu/rw-diff-thrust-bykey: $(RW_DIFF_DEPS) tests/gpu/rw-diff-obj/thrust-bykey.o
	$(RW_DIFF_LINK)

rw-diff: $(RW_DIFF_BINS)
.PHONY: rw-diff
EXTRA_DIST += tests/gpu/rw-diff-main.cu tests/gpu/rw-diff.mk tests/gpu/rw-diff-run tests/bench/rewrite-bench \
	tests/bench/rewrite-regs

# CI: the GPU-free self-test of the stress harness (builds it with nvcc,
# ~35 s on 2 cores), run against the driver stub.
# Not in --enable-sanitizers builds: the nvcc link line cannot take the
# sanitizer runtime, and librwdiff.a/libtallyrw.a are instrumented there.
if !SANITIZERS
TESTS += tests/gpu/rw-diff-selftest.sh
# built by `make check` before the tests run (no other fragment sets check_DATA)
check_DATA = tests/gpu/rw-diff-stress tests/gpu/stub/libcuda.so.1
endif
EXTRA_DIST += tests/gpu/rw-diff-selftest.sh
tests/gpu/stub/libcuda.so.1:
	@$(MKDIR_P) tests/gpu/stub
	$(AM_V_GEN)ln -sf $(CUDA_LIBDIR)/stubs/libcuda.so $@
CLEANFILES += tests/gpu/stub/libcuda.so.1
