# tests/corpus/corpus.mk: the kernel corpus.
#
# `make corpus` compiles every source below to PTX in
# $(builddir)/tests/corpus/ptx/ (compute_90; compute_90a for the wgmma
# file) and prints per-file and distinct .entry counts; it fails under 300
# distinct kernels.  Measured here (2 cores, nvcc 13.0): about 3.5 min of
# CPU, ~2 min with -j2; ~31 MB of PTX, which is why it is built, not committed.
CORPUS_NAMES = stress-sync stress-mem stress-warp stress-grid stress-async stress-mma \
	cub-scan cub-reduce cub-sort cub-select cub-segmented thrust-algos thrust-bykey
CORPUS_INCS = $(srcdir)/tests/corpus/corpus.cuh $(srcdir)/tests/corpus/cub-common.cuh
CORPUS_PTX = $(CORPUS_NAMES:%=tests/corpus/ptx/%.ptx)
CORPUS_NVCCFLAGS = -std=c++17 -I$(CUDA_HOME)/include/cccl -I$(srcdir)/tests/corpus
corpus_arch = $(if $(filter stress-mma,$(1)),compute_90a,compute_90)

tests/corpus/ptx/%.ptx: $(srcdir)/tests/corpus/%.cu $(CORPUS_INCS)
	@$(MKDIR_P) tests/corpus/ptx
	$(AM_V_GEN)$(NVCC) -ptx -arch=$(call corpus_arch,$*) $(CORPUS_NVCCFLAGS) $< -o $@

corpus: $(CORPUS_PTX)
	@$(SHELL) $(srcdir)/tests/corpus/count-entries 300 $(CORPUS_PTX)

CLEANFILES += $(CORPUS_PTX)
.PHONY: corpus
EXTRA_DIST += $(CORPUS_NAMES:%=tests/corpus/%.cu) tests/corpus/corpus.cuh \
	tests/corpus/cub-common.cuh tests/corpus/corpus.mk tests/corpus/count-entries \
	tests/corpus/MANIFEST
