#!/usr/bin/env python3
"""gen-synthetic.py: writes the bundled SYNTHETIC kernel traces of tally-sim.

Nothing here was recorded on a GPU.  Each trace is a hand-written model of a
workload's kernel sequence: the layer structure of the real model (BERT-base,
ResNet-50, GPT-2 124M), launch shapes of the kind cuBLAS/cuDNN/PyTorch use,
and per-block durations from roofline estimates for an H200:
  - GEMM / implicit-GEMM conv tiles of 256x128 (batch-8 inference:
    128x128, batch-1: 64x64) outputs,
    split-K above K = 4096 (as cuBLAS does for long K), at 7.5 TFLOP/s per
    SM (990 TFLOP/s dense FP16 over 132 SMs), divided by the blocks sharing
    an SM;
  - memory-bound kernels (layer norm, softmax, element-wise, optimizer) as
    PyTorch launches them: one 256-thread block per 16 KiB, 8 blocks per SM
    sharing the SM's 1/132 of 4.8 TB/s of HBM;
  - attention blocks of 128 query rows.
A deterministic +-15% jitter (seeded LCG) breaks ties between layers.
The batch-8 "graph" traces model one CUDA graph launch: all kernels are
submitted back to back with no host gap (gap_ns 0), larger grids than batch 1.
Run from anywhere: python3 sim/traces/gen-synthetic.py [outdir]
tallyd will record real traces in the same format (sim/trace.c).
"""
import math, os, sys

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
SM_FLOP_PER_NS = 7500.0          # 990e12 / 132 / 1e9
HBM_BYTES_PER_NS = 4800.0        # 4.8 TB/s
SMS = 132

class Lcg:
    def __init__(self, seed): self.x = seed
    def jitter(self):
        self.x = (self.x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return 0.85 + 0.30 * ((self.x >> 11) / float(1 << 53))

def header(f, name, what):
    f.write("# SYNTHETIC kernel trace (not recorded on a GPU): %s\n" % what)
    f.write("# made by sim/traces/gen-synthetic.py; format: sim/trace.c\n")
    f.write("# tenant kernel_id grid block regs shmem block_ns gap_ns variants\n")

class Trace:
    def __init__(self, name, seed, gap_ns=0):
        self.name, self.rows, self.rng, self.gap = name, [], Lcg(seed), gap_ns
        self.ids = {}
    def kid(self, tag):
        if tag not in self.ids:
            self.ids[tag] = 0x1000 + len(self.ids)
        return self.ids[tag]
    def add(self, tag, grid, block, regs, shmem, block_ns, variants):
        ns = max(1000, int(block_ns * self.rng.jitter()))
        self.rows.append((self.kid(tag), grid, block, regs, shmem, ns, self.gap, variants))
    # --- kernel families
    def gemm(self, tag, m, n, k, tile=(256, 128), variants="osp"):
        tm, tn = tile
        splits = max(1, math.ceil(k / 4096))
        k = k / splits
        grid = math.ceil(m / tm) * math.ceil(n / tn) * splits
        # (threads, regs, shared memory, blocks sharing an SM) per tile:
        # 256x128: 168 regs x 256 threads -> 1 block per SM;
        # 128x128: 256 threads x 128 regs, 64 KiB -> 2 per SM;
        # 64x64: 128 threads, 128 regs, 32 KiB -> 4 per SM.
        shape = {256 * 128: (256, 168, 98304, 1), 128 * 128: (256, 128, 65536, 2),
                 64 * 64: (128, 128, 32768, 4)}[tm * tn]
        ns = tm * tn * k * 2 / (SM_FLOP_PER_NS / shape[3])
        self.add(tag, grid, shape[0], shape[1], shape[2], ns, variants)
    def mem(self, tag, nbytes, variants="osp"):
        # One 256-thread block per 16 KiB; 8 blocks share an SM's bandwidth.
        chunk = 16384
        grid = max(1, math.ceil(nbytes / chunk))
        ns = chunk / (HBM_BYTES_PER_NS / SMS / 8)
        self.add(tag, grid, 256, 32, 0, ns, variants)
    def attn(self, tag, batch_heads, seq, dim, bwd=False, variants="osp"):
        grid = batch_heads * math.ceil(seq / 128)
        flop = 128 * (seq / 2.0) * dim * 4 * (2.5 if bwd else 1.0)
        # 128 threads x 255 regs + 64 KiB: 2 blocks per SM.
        self.add(tag, grid, 128, 255, 65536, flop / (SM_FLOP_PER_NS / 2), variants)
    def write(self, what):
        path = os.path.join(OUT, self.name + ".ktr")
        with open(path, "w") as f:
            header(f, self.name, what)
            for (kid, grid, block, regs, shmem, ns, gap, var) in self.rows:
                f.write("%s 0x%x %d %d %d %d %d %d %s\n" %
                        (self.name, kid, grid, block, regs, shmem, ns, gap, var))

def bert_infer(name, gap_ns, what, batch=1):
    # BERT-base, sequence 128, FP16: 12 layers, hidden 768, 12 heads.
    # LC kernels are never reshaped: variants "o".  Batch 1 uses 64x64
    # GEMM tiles (few output tiles); batch 8 (1024 tokens) 128x128, as
    # cuBLAS picks larger tiles when there are enough of them to fill the GPU.
    t = Trace(name, 11 if batch == 1 else 15, gap_ns)
    tok, h = 128 * batch, 768
    tile = (64, 64) if batch == 1 else (128, 128)
    t.mem("embed", tok * h * 2 * 4, "o")
    t.mem("embed_ln", tok * h * 2 * 3, "o")
    for l in range(12):
        t.gemm("qkv", tok, 3 * h, h, tile, "o")
        t.attn("attn", 12 * batch, 128, 64, False, "o")
        t.gemm("proj", tok, h, h, tile, "o")
        t.mem("add_ln1", tok * h * 2 * 4, "o")
        t.gemm("fc1_gelu", tok, 4 * h, h, tile, "o")
        t.gemm("fc2", tok, h, 4 * h, tile, "o")
        t.mem("add_ln2", tok * h * 2 * 4, "o")
    t.gemm("pooler", batch, h, h, (64, 64), "o")
    t.mem("classifier", h * 2 * 4, "o")
    t.write(what)

def resnet_infer(batch=1):
    # ResNet-50, 224x224, FP16, BN folded into convs: 53 convs.  Batch 8:
    # 128x128 implicit-GEMM tiles (batch 1: 64x64), as for BERT above.
    name = "resnet50-b%d-infer" % batch if batch == 1 else "resnet50-b%d-graph" % batch
    t = Trace(name, 12 if batch == 1 else 16)
    n = batch
    tile = (64, 64) if batch == 1 else (128, 128)
    t.gemm("stem", n * 112 * 112, 64, 7 * 7 * 3, tile, "o")
    t.mem("maxpool", n * 112 * 112 * 64 * 2 * 2, "o")
    stages = [(3, 56, 64, 256), (4, 28, 128, 512), (6, 14, 256, 1024), (3, 7, 512, 2048)]
    cin = 64
    for si, (blocks, hw, mid, out) in enumerate(stages):
        for b in range(blocks):
            t.gemm("s%d_c1" % si, n * hw * hw, mid, cin, tile, "o")
            t.gemm("s%d_c2" % si, n * hw * hw, mid, mid * 9, tile, "o")
            t.gemm("s%d_c3" % si, n * hw * hw, out, mid, tile, "o")
            if b == 0:
                t.gemm("s%d_down" % si, n * hw * hw, out, cin, tile, "o")
            t.mem("s%d_add_relu" % si, n * hw * hw * out * 2 * 3, "o")
            cin = out
    t.mem("avgpool", n * 7 * 7 * 2048 * 2, "o")
    t.gemm("fc", n, 1000, 2048, (64, 64), "o")
    if batch == 1:
        t.write("ResNet-50 batch-1 inference, CUDA-graph style (no host gaps)")
    else:
        t.write("ResNet-50 batch-%d inference, CUDA graph (kernels back to back, no host gaps)"
                % batch)

def gpt2_train():
    # GPT-2 124M, batch 8 x 1024 tokens, FP16/BF16 mixed precision, AdamW.
    # GEMMs marked osp: the Tally setting (PTX available, e.g. Triton); the
    # LM-head GEMMs are marked o (SASS-only cuBLAS) to exercise the fallback.
    t = Trace("gpt2-train", 13, 0)
    tok, h, v = 8192, 768, 50257
    act = tok * h * 2
    t.mem("embed", act * 3)
    for l in range(12):
        t.mem("ln1", act * 3)
        t.gemm("qkv", tok, 3 * h, h)
        t.attn("attn_fwd", 8 * 12, 1024, 64)
        t.gemm("proj", tok, h, h)
        t.mem("resid1", act * 3)
        t.mem("ln2", act * 3)
        t.gemm("fc1", tok, 4 * h, h)
        t.mem("gelu", act * 4 * 2)
        t.gemm("fc2", tok, h, 4 * h)
        t.mem("resid2", act * 3)
    t.mem("lnf", act * 3)
    t.gemm("lm_head", tok, v, h, variants="o")
    t.mem("xent", tok * v * 2 * 2)
    t.gemm("lm_head_dx", tok, h, v, variants="o")
    t.gemm("lm_head_dw", h, v, tok, variants="o")
    for l in range(12):
        t.mem("resid2_b", act * 3)
        t.gemm("fc2_dx", tok, 4 * h, h)
        t.gemm("fc2_dw", 4 * h, h, tok)
        t.mem("gelu_b", act * 4 * 3)
        t.gemm("fc1_dx", tok, h, 4 * h)
        t.gemm("fc1_dw", h, 4 * h, tok)
        t.mem("ln2_b", act * 4)
        t.gemm("proj_dx", tok, h, h)
        t.gemm("proj_dw", h, h, tok)
        t.attn("attn_bwd", 8 * 12, 1024, 64, True)
        t.gemm("qkv_dx", tok, h, 3 * h)
        t.gemm("qkv_dw", h, 3 * h, tok)
        t.mem("ln1_b", act * 4)
    t.mem("adamw", 124e6 * 16)
    t.write("GPT-2 (124M) training step, batch 8 x 1024 tokens")

def resnet_train():
    # ResNet-50 training step, batch 64, 224x224, channels-last FP16.
    t = Trace("resnet50-train", 14, 0)
    n = 64
    stages = [(3, 56, 64, 256), (4, 28, 128, 512), (6, 14, 256, 1024), (3, 7, 512, 2048)]
    convs = [("stem", n * 112 * 112, 64, 7 * 7 * 3)]
    cin = 64
    for si, (blocks, hw, mid, out) in enumerate(stages):
        for b in range(blocks):
            convs.append(("s%d_c1" % si, n * hw * hw, mid, cin))
            convs.append(("s%d_c2" % si, n * hw * hw, mid, mid * 9))
            convs.append(("s%d_c3" % si, n * hw * hw, out, mid))
            if b == 0:
                convs.append(("s%d_down" % si, n * hw * hw, out, cin))
            cin = out
    for (tag, m, nn, k) in convs:
        t.gemm(tag, m, nn, k)
        t.mem(tag + "_bn_relu", m * nn * 2 * 3)
    t.gemm("fc", n, 1000, 2048, (64, 64))
    for (tag, m, nn, k) in reversed(convs):
        t.mem(tag + "_bn_relu_b", m * nn * 2 * 4)
        t.gemm(tag + "_dgrad", m, k, nn)
        t.gemm(tag + "_wgrad", nn, k, m)
    t.mem("sgd", 25.6e6 * 12)
    t.write("ResNet-50 training step, batch 64")

def cuda_pair():
    # The CUDA C pair of the measured benchmark (tests/bench/pairs/pair-lc.cu,
    # pair-be.cu): blocks of 256 threads that spin on %globaltimer, so their
    # durations are exact (no jitter); one full wave is 8 blocks per SM.
    # LC: each request is 8 kernels of 25 us over the whole GPU, launched
    # back to back; BE: back-to-back kernels of one wave of 1 ms blocks,
    # built with PTX, so the rewrite offers every form (osp, and f: FLUSH).
    grid = 8 * SMS
    for (name, kid, n, ns, var, what) in [
            ("cuda-c-lc", 0x2001, 8, 25000, "o",
             "the CUDA C pair's LC request: 8 kernels of 25 us blocks over the whole GPU"),
            ("cuda-c-be", 0x2000, 1, 1000000, "ospf",
             "the CUDA C pair's BE step: one kernel of one wave of 1 ms blocks, with PTX")]:
        t = Trace(name, 1)
        t.rows = [(kid, grid, 256, 32, 0, ns, 0, var)] * n
        t.write(what)

bert_infer("bert-b1-infer", 0, "BERT-base batch-1 inference, CUDA-graph style (no host gaps)")
bert_infer("bert-b1-eager", 8000,
           "BERT-base batch-1 inference, eager: 8 us of host time per launch")
resnet_infer()
bert_infer("bert-b8-graph", 0,
           "BERT-base batch-8 inference, CUDA graph (kernels back to back, no host gaps)", 8)
resnet_infer(8)
gpt2_train()
resnet_train()
cuda_pair()
