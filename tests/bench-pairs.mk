# tests/bench-pairs.mk: the pair benchmark (scripts/bench-pairs): its CUDA C
# pair, built by `make` (nvcc is required by configure), with sm_90 SASS and
# compute_90 PTX embedded so tallyd can transform the kernels; and its CPU
# smoke test (stub workloads, a fake nvidia-cuda-mps-control, tallyd-record;
# the recording device runs no real kernel, so the pair programs themselves
# are only checked for embedded PTX and argument handling there).
PAIR_CUDA_PROGS = tests/bench/pairs/pair-lc tests/bench/pairs/pair-be
PAIR_NVCC_OPTS = -O2 -std=c++17 -gencode 'arch=compute_90,code=[sm_90,compute_90]' \
	-Xcompiler -Wall,-Wextra -I$(srcdir)/tests/bench/pairs
all-local: $(PAIR_CUDA_PROGS)
tests/bench/pairs/pair-%: $(srcdir)/tests/bench/pairs/pair-%.cu $(srcdir)/tests/bench/pairs/pair-common.h
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(NVCC) $(PAIR_NVCC_OPTS) -cudart static -o $@ $<
CLEANFILES += $(PAIR_CUDA_PROGS)
# The cuBLAS pair (cublas-gemm.pair): cuBLAS linked shared, so libtally-blas.so can interpose it.
if HAVE_CUBLAS
GEMM_PAIR_PROGS = tests/bench/pairs/gemm-lc tests/bench/pairs/gemm-be
tests/bench/pairs/gemm-%: $(srcdir)/tests/bench/pairs/gemm-%.cu $(srcdir)/tests/bench/pairs/pair-common.h \
		$(srcdir)/tests/bench/pairs/gemm-common.h
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(NVCC) $(PAIR_NVCC_OPTS) -cudart static -o $@ $< -lcublas \
	  -Xlinker -rpath,$(CUDA_LIBDIR)
CLEANFILES += $(GEMM_PAIR_PROGS)
else
GEMM_PAIR_PROGS =
endif
all-local: $(GEMM_PAIR_PROGS)
EXTRA_DIST += tests/bench/pairs/gemm-lc.cu tests/bench/pairs/gemm-be.cu tests/bench/pairs/gemm-common.h
PAIR_FILES = tests/bench/pairs/bert-b1-eager+gpt2-train.pair \
	tests/bench/pairs/bert-b1-graph+gpt2-train.pair \
	tests/bench/pairs/bert-b8-eager+gpt2-train.pair \
	tests/bench/pairs/bert-b8-graph+gpt2-train.pair \
	tests/bench/pairs/cuda-ptx.pair \
	tests/bench/pairs/cublas-gemm.pair tests/bench/pairs/cublas-gemm-whole.pair \
	tests/bench/pairs/cuda-ptx-short.pair \
	tests/bench/pairs/gpt2-decode+gpt2-train.pair \
	tests/bench/pairs/resnet50-b1-eager+bert-train.pair \
	tests/bench/pairs/resnet50-b1-graph+resnet50-train.pair \
	tests/bench/pairs/resnet50-b8-eager+resnet50-train.pair \
	tests/bench/pairs/resnet50-b8-graph+resnet50-train.pair
PAIR_SMOKE_TESTS = tests/bench/pairs/test-bench-pairs.sh tests/bench/pairs/test-sim-vs-measured.sh \
	tests/bench/pairs/test-mechanisms.sh tests/bench/pairs/test-fw-speed.sh \
	tests/bench/pairs/test-graph-replay.sh
TESTS += $(PAIR_SMOKE_TESTS)
EXTRA_DIST += $(PAIR_SMOKE_TESTS) scripts/bench-pairs tests/bench/README.md \
	tests/bench/pairs/pair-lc.cu tests/bench/pairs/pair-be.cu tests/bench/pairs/pair-common.h \
	tests/bench/pairs/torch_lc.py tests/bench/pairs/torch_be.py tests/bench/pairs/torch_common.py \
	tests/bench/pairs/plot.py tests/bench/pairs/stub-lc.sh tests/bench/pairs/stub-be.sh \
	tests/bench/pairs/fake-mps-control.sh tests/bench/sim-depth \
	scripts/fw-speed tests/bench/pairs/jax_step.py tests/bench/pairs/stub-speed.py \
	tests/bench/pairs/graph_replay.py \
	$(PAIR_FILES)
