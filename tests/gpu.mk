# tests/gpu.mk: GPU end-to-end programs (make check-gpu) and the forward benchmark.
#
# Nothing here is part of `make all`, and `make check` only runs tests/gpu/test-e2e-runner
# (the runner's own logic against fakes, no GPU): the programs need nvcc, and only a GPU
# machine can run them.  `make check-gpu` builds them as prerequisites of the GPU test
# tests/gpu/e2e-run (a script generated from tests/gpu/e2e-run.sh).  `make gpu-programs`
# only builds them (about 20 s of nvcc on 2 cores), e.g. for CI on a machine without a GPU.
#
#   make check-gpu        e2e: every program natively, then through tallyd over shm and TCP
#   make forward-bench    benchmark table: native vs tally-shm vs tally-tcp
#   tests/bench/launch-ways   (built by make gpu-programs) a launch's host cost, each way
#   make gpu-e2e          both of the above, in that order
#   tests/bench/driver-waits  (built by make gpu-programs) which driver calls wait for others' work
#
# Runtime-API programs are built twice: nvcc's default static cudart (-static) and
# -cudart shared (-shared).  Every image holds sm_90 SASS plus compute_90 PTX.

GPU_ARCH_FLAGS = -arch=sm_90 -gencode arch=compute_90,code=compute_90
# No -Werror: nvcc's generated host stubs are compiled by whatever gcc the GPU machine has.
GPU_NVCC_OPTS = -O2 -std=c++17 $(GPU_ARCH_FLAGS) -Xcompiler -Wall,-Wextra \
	-I$(srcdir)/tests/gpu
GPU_SHARED_LINK = -Xlinker --enable-new-dtags,-rpath,$(CUDA_LIBDIR)
GPU_CC_OPTS = -std=gnu11 -O2 $(WARN_CFLAGS) $(CUDA_CPPFLAGS) -I$(srcdir)/tests/gpu
GPU_DRV_LINK = -L$(CUDA_LIBDIR)/stubs -lcuda

GPU_RT_NAMES = rt-device rt-memory rt-stream rt-launch rt-errors rt-sticky
GPU_RT_PROGS = $(foreach n,$(GPU_RT_NAMES),tests/gpu/$(n)-static tests/gpu/$(n)-shared)
GPU_DRV_PROGS = tests/gpu/drv-context tests/gpu/drv-module tests/gpu/drv-graph
GPU_IMAGES = tests/gpu/drv-kernels.ptx tests/gpu/drv-kernels.cubin tests/gpu/drv-kernels.fatbin
GPU_E2E_PROGS = $(GPU_RT_PROGS) $(GPU_DRV_PROGS) $(GPU_IMAGES) tests/gpu/tenant-static \
	tests/gpu/rt-graph-static
GPU_BENCH_PROGS = tests/bench/forward-bench-bin tests/bench/launch-ways tests/bench/driver-waits

GPU_TESTS += tests/gpu/e2e-run
CLEANFILES += $(GPU_E2E_PROGS) $(GPU_BENCH_PROGS) tests/gpu/e2e-run tests/bench/forward-bench \
	tests/gpu/test-e2e-runner
EXTRA_DIST += tests/gpu/README.md tests/gpu/e2e-common.h tests/gpu/e2e-run.sh tests/gpu/tallyd-lib.sh \
	tests/gpu/test-e2e-runner.sh \
	$(foreach n,$(GPU_RT_NAMES),tests/gpu/$(n).cu) tests/gpu/tenant.cu \
	tests/gpu/drv-kernels.cu tests/gpu/drv-context.c tests/gpu/drv-module.c tests/gpu/drv-graph.c \
	tests/gpu/rt-graph.cu \
	tests/gpu/e2e_util.py tests/gpu/numba-kernels.py tests/gpu/cupy-ops.py \
	tests/gpu/driver-trace/README.md tests/gpu/driver-trace/passshim.c \
	tests/gpu/driver-trace/trace.sh \
	tests/bench/forward-bench.cu tests/bench/forward-bench.sh tests/bench/launch-ways.cu \
	tests/bench/driver-waits.c \
	tests/bench/forward-bench-table.awk tests/bench/test-forward-bench-table.sh \
	tests/bench/test-forward-bench.sh

GPU_COMMON_DEPS = $(srcdir)/tests/gpu/e2e-common.h

tests/gpu/%-static: $(srcdir)/tests/gpu/%.cu $(GPU_COMMON_DEPS)
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(NVCC) $(GPU_NVCC_OPTS) -cudart static -o $@ $<

tests/gpu/%-shared: $(srcdir)/tests/gpu/%.cu $(GPU_COMMON_DEPS)
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(NVCC) $(GPU_NVCC_OPTS) -cudart shared $(GPU_SHARED_LINK) -o $@ $<

tests/gpu/drv-%: $(srcdir)/tests/gpu/drv-%.c $(GPU_COMMON_DEPS)
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(CC) $(GPU_CC_OPTS) -o $@ $< $(GPU_DRV_LINK)

# drv-module loads these three images from its own directory.
tests/gpu/drv-kernels.ptx: $(srcdir)/tests/gpu/drv-kernels.cu
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(NVCC) -ptx -gencode arch=compute_90,code=compute_90 -o $@ $<
tests/gpu/drv-kernels.cubin: $(srcdir)/tests/gpu/drv-kernels.cu
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(NVCC) -cubin -gencode arch=compute_90,code=sm_90 -o $@ $<
tests/gpu/drv-kernels.fatbin: $(srcdir)/tests/gpu/drv-kernels.cu
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(NVCC) -fatbin $(GPU_ARCH_FLAGS) -o $@ $<

tests/bench/forward-bench-bin: $(srcdir)/tests/bench/forward-bench.cu
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(NVCC) $(GPU_NVCC_OPTS) -cudart static -o $@ $<

# launch-ways calls the driver API itself: the stub libcuda at link time, the driver's at run time.
tests/bench/launch-ways: $(srcdir)/tests/bench/launch-ways.cu
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(NVCC) $(GPU_NVCC_OPTS) -cudart static -o $@ $< -L$(CUDA_LIBDIR)/stubs -lcuda

# driver-waits calls the driver API alone (C): the stub libcuda at link time.
tests/bench/driver-waits: $(srcdir)/tests/bench/driver-waits.c
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(CC) $(GPU_CC_OPTS) -o $@ $< $(GPU_DRV_LINK)

# The scripts learn where the sources and the build tree are when they are generated.
# ([@] keeps config.status from substituting the pattern itself.)
GPU_SCRIPT_SED = sed -e 's|@abs_top_srcdir[@]|$(abs_top_srcdir)|g'

# e2e-run itself does not need the programs (test-e2e-runner runs it on fakes); check-gpu
# builds them through the extra prerequisite below.
tests/gpu/e2e-run: $(srcdir)/tests/gpu/e2e-run.sh $(srcdir)/tests/gpu/tallyd-lib.sh Makefile
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(GPU_SCRIPT_SED) $(srcdir)/tests/gpu/e2e-run.sh >$@.tmp && \
	  chmod +x $@.tmp && mv -f $@.tmp $@

# The same two-tenant and dying-tenant runs with best-effort work in a partition of 72% of the
# SMs, not held for the latency-critical tenant (--be-sms-hold 0, its block and in-flight
# bounds at their defaults and 100 us): outputs identical to native, memory back.
GPU_TESTS += tests/gpu/e2e-partition
CLEANFILES += tests/gpu/e2e-partition
tests/gpu/e2e-partition: tests/gpu/e2e-run
	$(AM_V_GEN)printf '#!/bin/sh\n# e2e-partition: e2e-run'"'"'s tenant pairs with the best-effort partition not held (tests/gpu.mk)\nTALLYD_ARGS="--be-sms 72%% --be-sms-hold 0 --be-sms-block-us 100 $${TALLYD_ARGS:-}" exec "$$(dirname "$$0")/e2e-run" -k "two-tenants|tenant-dies" "$$@"\n' > $@ && chmod +x $@

tests/bench/forward-bench: $(srcdir)/tests/bench/forward-bench.sh $(srcdir)/tests/gpu/tallyd-lib.sh Makefile \
		$(GPU_BENCH_PROGS)
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(GPU_SCRIPT_SED) $(srcdir)/tests/bench/forward-bench.sh >$@.tmp && \
	  chmod +x $@.tmp && mv -f $@.tmp $@

check-gpu: $(GPU_E2E_PROGS)

tests/gpu/test-e2e-runner: $(srcdir)/tests/gpu/test-e2e-runner.sh tests/gpu/e2e-run Makefile
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(GPU_SCRIPT_SED) $(srcdir)/tests/gpu/test-e2e-runner.sh >$@.tmp && \
	  chmod +x $@.tmp && mv -f $@.tmp $@

# CPU test of the runner's own logic against a fake tallyd and fake programs (no GPU).
if HAVE_CMOCKA
TESTS += tests/gpu/test-e2e-runner
endif
# forward-bench's table from made-up figures, and its script's plumbing (a stand-in program,
# the recording device, a fake nvidia-smi) (no GPU).
TESTS += tests/bench/test-forward-bench-table.sh tests/bench/test-forward-bench.sh

# N framework tenants in a row through one tallyd (make tenant-churn).
tests/gpu/tenant-churn: $(srcdir)/tests/gpu/tenant-churn.sh $(srcdir)/tests/gpu/tallyd-lib.sh Makefile
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(GPU_SCRIPT_SED) $(srcdir)/tests/gpu/tenant-churn.sh >$@.tmp && \
	  chmod +x $@.tmp && mv -f $@.tmp $@
EXTRA_DIST += tests/gpu/tenant-churn.sh
CLEANFILES += tests/gpu/tenant-churn

tenant-churn: all tests/gpu/tenant-churn $(GPU_E2E_PROGS)
	@tests/gpu/tenant-churn

gpu-programs: $(GPU_E2E_PROGS) $(GPU_BENCH_PROGS) tests/gpu/e2e-run tests/bench/forward-bench \
	tests/gpu/tenant-churn

forward-bench: all tests/bench/forward-bench
	@tests/bench/forward-bench

gpu-e2e: all
	@$(MAKE) $(AM_MAKEFLAGS) check-gpu; rc=$$?; \
	  $(MAKE) $(AM_MAKEFLAGS) forward-bench || rc=1; exit $$rc

.PHONY: gpu-programs forward-bench gpu-e2e tenant-churn

# Stock frameworks feature by feature: tests/frameworks/run.sh with this tree's source
# path (frameworks-run: the whole suite), and make check-gpu runs it in four parts, each
# well under check-gpu's 300 s per test (every case starts its framework three times).
FW_PARTS = tests/frameworks/frameworks-driver tests/frameworks/frameworks-torch \
	tests/frameworks/frameworks-torch-train tests/frameworks/frameworks-libs
GPU_TESTS += $(FW_PARTS)
CLEANFILES += $(FW_PARTS)
fw_only_frameworks_driver = cuda-c/*
fw_only_frameworks_torch = torch/alloc* torch/cuda-graph
fw_only_frameworks_torch_train = torch/train-adamw torch/amp-bf16 torch/compile
fw_only_frameworks_libs = cupy/* numba/* jax/*
$(FW_PARTS): tests/frameworks/frameworks-run
	$(AM_V_GEN)printf '#!/bin/sh\n# %s: one part of the framework suite (tests/gpu.mk)\nTALLY_FW_ONLY="%s" exec "$$(dirname "$$0")/frameworks-run" "$$@"\n' \
	  '$(@F)' '$(fw_only_$(subst -,_,$(@F)))' > $@ && chmod +x $@
EXTRA_DIST += tests/frameworks/README.md tests/frameworks/run.sh tests/frameworks/vmm-async.c \
	tests/frameworks/graphs.c \
	tests/frameworks/torch_features.py tests/frameworks/jax_train.py tests/frameworks/cupy_libs.py \
	tests/frameworks/numba_kernels.py
CLEANFILES += tests/frameworks/frameworks-run
tests/frameworks/frameworks-run: $(srcdir)/tests/frameworks/run.sh hostd/tallyd guestlib/libcuda.so.1 \
	guestlib/tally-run
	$(AM_V_GEN)$(MKDIR_P) tests/frameworks && sed -e 's|@TALLY_SRCDIR@|$(abs_top_srcdir)|g' \
	  $(srcdir)/tests/frameworks/run.sh > $@ && chmod +x $@

# Sliced and PTB variants of a best-effort tenant's PTX kernels, bit for bit against native,
# under --variants off|slice|ptb|all next to a bursting latency-critical tenant (make check-gpu).
# var-tenant carries PTX only (compute_90), so the driver JITs it and tallyd can transform it.
GPU_TESTS += tests/gpu/variants-run
EXTRA_DIST += tests/gpu/variants-run.sh tests/gpu/var-tenant.cu
CLEANFILES += tests/gpu/variants-run tests/gpu/var-tenant
tests/gpu/var-tenant: $(srcdir)/tests/gpu/var-tenant.cu $(GPU_COMMON_DEPS)
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(NVCC) -O2 -std=c++17 -gencode arch=compute_90,code=compute_90 \
	  -Xcompiler -Wall,-Wextra -I$(srcdir)/tests/gpu -cudart static -o $@ $<
tests/gpu/variants-run: $(srcdir)/tests/gpu/variants-run.sh $(srcdir)/tests/gpu/tallyd-lib.sh \
		Makefile tests/gpu/var-tenant hostd/tallyd hostd/tallyctl guestlib/libcuda.so.1
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(GPU_SCRIPT_SED) $(srcdir)/tests/gpu/variants-run.sh >$@.tmp && \
	  chmod +x $@.tmp && mv -f $@.tmp $@
gpu-programs: tests/gpu/var-tenant tests/gpu/variants-run

# libtally-blas.so: split GEMMs against whole ones for every interposed entry point, natively
# (make check-gpu; TALLY_GEMM_BUDGET_US=50 with the interposer preloaded, no tallyd).
if HAVE_CUBLAS
GPU_TESTS += tests/gpu/gemm-split
CLEANFILES += tests/gpu/gemm-split tests/gpu/gemm-split-bin
tests/gpu/gemm-split-bin: $(srcdir)/tests/gpu/gemm-split.c
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(CC) $(GPU_CC_OPTS) -o $@ $< -L$(CUDA_LIBDIR) -lcublasLt -lcublas -lcudart \
	  -Wl,-rpath,$(CUDA_LIBDIR) -ldl -lm
tests/gpu/gemm-split: $(srcdir)/tests/gpu/gemm-split-run.sh Makefile tests/gpu/gemm-split-bin \
		blas/libtally-blas.so
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)cp $(srcdir)/tests/gpu/gemm-split-run.sh $@.tmp && chmod +x $@.tmp && mv -f $@.tmp $@
GEMM_SPLIT_GPU = tests/gpu/gemm-split
else
GEMM_SPLIT_GPU =
endif
gpu-programs: $(GEMM_SPLIT_GPU)
EXTRA_DIST += tests/gpu/gemm-split.c tests/gpu/gemm-split-run.sh
