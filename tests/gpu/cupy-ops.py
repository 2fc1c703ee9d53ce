#!/usr/bin/env python3
"""cupy-ops.py: CuPy array operations end to end, including a cuBLAS matrix product.

CuPy loads libcuda.so.1 by name, then cuBLAS, which asks the driver for private export
tables (facts/export-tables.txt): the matrix product is the check that Tally's emulated
tables carry cuBLAS through initialisation.  Operations: element-wise arithmetic, reductions,
scans, sort (CUB), indexing, an ElementwiseKernel and a RawKernel (NVRTC, loaded with
cuModuleLoadData), float32/float64 matrix products (cuBLAS GEMM) and a matrix-vector
product.  Inputs are integer-valued so every result is exact and independent of summation
order, and TF32 is off (CUPY_TF32=0, the default).  stdout carries only hashes and exact
sums (see e2e_util.py).  Exit 77 when CuPy is missing.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

os.environ.setdefault("CUPY_TF32", "0")
try:
    import numpy as np
    import cupy as cp
except ImportError as e:
    print("skip: %s" % e, file=sys.stderr)
    sys.exit(77)


def main():
    rng = np.random.default_rng(4321)

    def t_elementwise():
        a = rng.integers(-1000, 1000, size=1 << 20).astype(np.int32)
        b = rng.integers(1, 1000, size=1 << 20).astype(np.int32)
        da, db = cp.asarray(a), cp.asarray(b)
        r = cp.asnumpy((da * 3 + db) // 7 - (da % db))
        u.check(np.array_equal(r, (a * 3 + b) // 7 - (a % b)), "elementwise int32")
        print("elementwise:", u.digest(r))

    def t_reductions():
        a = rng.integers(-(10**6), 10**6, size=1 << 22).astype(np.int64)
        d = cp.asarray(a)
        print("sum:", int(d.sum()), "max:", int(d.max()), "argmin:", int(d.argmin()))
        u.check(int(d.sum()) == int(a.sum()), "sum")
        c = cp.asnumpy(cp.cumsum(d[:100000]))
        u.check(np.array_equal(c, np.cumsum(a[:100000])), "cumsum")
        print("cumsum:", u.digest(c))
        f = cp.asarray(a.astype(np.float64))
        print("float64 sum of integers:", float(f.sum()))

    def t_sort_and_index():
        a = rng.integers(0, 10**9, size=1 << 20).astype(np.int64)
        d = cp.asarray(a)
        s = cp.asnumpy(cp.sort(d))
        u.check(np.array_equal(s, np.sort(a)), "sort")
        print("sort:", u.digest(s))
        idx = rng.integers(0, 1 << 20, size=4096)
        g = cp.asnumpy(d[cp.asarray(idx)])
        u.check(np.array_equal(g, a[idx]), "gather")
        print("unique count:", int(cp.unique(d % 1000).size))

    def t_kernels():
        mix = cp.ElementwiseKernel(
            "uint32 x, uint32 k", "uint32 y", "y = (x ^ k) * 2654435761u; y ^= y >> 13;", "e2e_mix"
        )
        a = rng.integers(0, 2**32, size=1 << 20, dtype=np.uint32)
        r = cp.asnumpy(mix(cp.asarray(a), np.uint32(99)))
        x = (a ^ np.uint32(99)) * np.uint32(2654435761)
        u.check(np.array_equal(r, x ^ (x >> np.uint32(13))), "ElementwiseKernel")
        print("elementwise kernel:", u.digest(r))
        raw = cp.RawKernel(
            r"""
            extern "C" __global__ void e2e_rev(const int *in, int *out, int n) {
              int i = blockIdx.x * blockDim.x + threadIdx.x;
              if (i < n) out[n - 1 - i] = in[i] * 2 + 1;
            }""",
            "e2e_rev",
        )
        n = 100003
        v = rng.integers(-(10**6), 10**6, size=n).astype(np.int32)
        out = cp.empty(n, dtype=cp.int32)
        raw(((n + 255) // 256,), (256,), (cp.asarray(v), out, cp.int32(n)))
        r = cp.asnumpy(out)
        u.check(np.array_equal(r, (v * 2 + 1)[::-1]), "RawKernel")
        print("raw kernel:", u.digest(r))

    def t_matmul():
        # Integer values in [-8, 8]: each product of K=512 terms stays below 2^24 in magnitude,
        # so float32 results are exact whatever order cuBLAS sums them in.
        for dt in (np.float32, np.float64):
            a = rng.integers(-8, 9, size=(384, 512)).astype(dt)
            b = rng.integers(-8, 9, size=(512, 320)).astype(dt)
            r = cp.asnumpy(cp.asarray(a) @ cp.asarray(b))
            want = a.astype(np.int64) @ b.astype(np.int64)
            u.check(np.array_equal(r.astype(np.int64), want), "matmul %s" % np.dtype(dt).name)
            print("matmul %s:" % np.dtype(dt).name, u.digest(r), "trace", int(np.trace(r[:320])))
        a = rng.integers(-8, 9, size=(1000, 700)).astype(np.float32)
        v = rng.integers(-8, 9, size=700).astype(np.float32)
        r = cp.asnumpy(cp.asarray(a).dot(cp.asarray(v)))
        u.check(np.array_equal(r.astype(np.int64), a.astype(np.int64) @ v.astype(np.int64)), "gemv")
        print("gemv:", u.digest(r))
        # batched: one cuBLAS strided-batched call
        a = rng.integers(-4, 5, size=(8, 64, 96)).astype(np.float32)
        b = rng.integers(-4, 5, size=(8, 96, 32)).astype(np.float32)
        r = cp.asnumpy(cp.matmul(cp.asarray(a), cp.asarray(b)))
        u.check(np.array_equal(r.astype(np.int64), a.astype(np.int64) @ b.astype(np.int64)),
                "batched matmul")
        print("batched matmul:", u.digest(r))

    def t_streams():
        s = cp.cuda.Stream(non_blocking=True)
        with s:
            d = cp.arange(1 << 20, dtype=cp.int64) * 3
            e = s.record()
        e.synchronize()
        print("stream arange sum:", int(d.sum()))

    dev = cp.cuda.Device(0)
    print("devices:", cp.cuda.runtime.getDeviceCount())
    print("compute capability:", dev.compute_capability)
    u.section("elementwise", t_elementwise)
    u.section("reductions", t_reductions)
    u.section("sort and index", t_sort_and_index)
    u.section("kernels", t_kernels)
    u.section("matmul", t_matmul)
    u.section("streams", t_streams)
    u.finish()


if __name__ == "__main__":
    main()
