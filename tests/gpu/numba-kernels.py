#!/usr/bin/env python3
"""numba-kernels.py: numba-cuda kernels, end to end (PTX through the driver's JIT linker).

numba-cuda compiles Python kernels to PTX with NVVM and loads them through the driver's JIT
linker (cuLinkCreate/cuLinkAddData/cuLinkComplete, then cuModuleLoadData), so this checks
that path through Tally.  Kernels: element-wise integer arithmetic, a device function, a
2D grid, a shared-memory block reduction, integer atomics, float32 arithmetic on integer
values (exact, so the result does not depend on rounding order), kernels on a stream with
async copies, and a kernel re-specialised for a second argument type.  stdout carries only
hashes and exact sums (see e2e_util.py).  Exit 77 when numba or its CUDA target is missing.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

try:
    import numpy as np

    # The GPU machine pairs numba 0.68 with a NumPy that dropped np.row_stack (an alias of
    # np.vstack), which numba's import still touches: measured there, "module 'numpy' has no
    # attribute 'row_stack'".  Restore the alias so numba imports; kernels never use it.
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
    from numba import cuda
except ImportError as e:
    print("skip: %s" % e, file=sys.stderr)
    sys.exit(77)


MASK32 = np.uint64(0xFFFFFFFF)


@cuda.jit(device=True)
def mix(x, k):
    # numba widens 32-bit integer arithmetic, so wrap to 32 bits explicitly (as uint32 would)
    y = ((np.uint64(x) ^ np.uint64(k)) * np.uint64(2654435761)) & MASK32
    return np.uint32(y ^ (y >> np.uint64(13)))


def mix_ref(a, k):
    y = ((a.astype(np.uint64) ^ np.uint64(k)) * np.uint64(2654435761)) & MASK32
    return (y ^ (y >> np.uint64(13))).astype(np.uint32)


@cuda.jit
def k_mix(a, out, k):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = mix(a[i], k)


@cuda.jit
def k_grid2d(out):
    x, y = cuda.grid(2)
    if x < out.shape[0] and y < out.shape[1]:
        out[x, y] = x * 1000 + y


@cuda.jit
def k_block_sum(a, out):
    s = cuda.shared.array(256, dtype=np.int64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = a[i] if i < a.size else 0
    cuda.syncthreads()
    step = 128
    while step > 0:
        if t < step:
            s[t] += s[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = s[0]


@cuda.jit
def k_histogram(a, hist):
    i = cuda.grid(1)
    if i < a.size:
        cuda.atomic.add(hist, a[i] % hist.size, 1)


@cuda.jit
def k_axpy(a, x, y):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = a * x[i] + y[i]


def main():
    rng = np.random.default_rng(1234)
    # E2E_N shrinks the inputs (a multiple of 256) for a dry run under numba's CUDA simulator
    # (NUMBA_ENABLE_CUDASIM=1), which runs kernels in Python; the e2e runner never sets it.
    n = int(os.environ.get("E2E_N", 1 << 20))
    a = rng.integers(0, 2**32, size=n, dtype=np.uint32)

    def t_mix():
        d = cuda.to_device(a)
        out = cuda.device_array_like(d)
        k_mix[(n + 255) // 256, 256](d, out, np.uint32(0x5EED))
        h = out.copy_to_host()
        want = mix_ref(a, 0x5EED)
        u.check(np.array_equal(h, want), "mix matches numpy")
        print("mix:", u.digest(h))

    def t_grid2d():
        out = cuda.device_array((300, 77), dtype=np.int32)
        k_grid2d[(19, 5), (16, 16)](out)
        h = out.copy_to_host()
        want = np.arange(300, dtype=np.int32)[:, None] * 1000 + np.arange(77, dtype=np.int32)
        u.check(np.array_equal(h, want), "grid2d")
        print("grid2d:", u.digest(h))

    def t_reduce():
        v = rng.integers(-(10**6), 10**6, size=n, dtype=np.int64)
        d = cuda.to_device(v)
        out = cuda.device_array(n // 256, dtype=np.int64)
        k_block_sum[n // 256, 256](d, out)
        h = out.copy_to_host()
        u.check(int(h.sum()) == int(v.sum()), "block sums add up")
        print("block sum total:", int(h.sum()), "digest:", u.digest(h))

    def t_atomics():
        v = rng.integers(0, 10**9, size=n, dtype=np.int32)
        hist = cuda.to_device(np.zeros(97, dtype=np.int32))
        k_histogram[(n + 255) // 256, 256](cuda.to_device(v), hist)
        h = hist.copy_to_host()
        u.check(np.array_equal(h, np.bincount(v % 97, minlength=97).astype(np.int32)), "atomics")
        print("histogram:", u.digest(h))

    def t_float_and_stream():
        s = cuda.stream()
        x = rng.integers(-1000, 1000, size=n).astype(np.float32)
        y = rng.integers(-1000, 1000, size=n).astype(np.float32)
        dx = cuda.to_device(x, stream=s)
        dy = cuda.to_device(y, stream=s)
        k_axpy[(n + 255) // 256, 256, s](np.float32(3.0), dx, dy)
        h = dy.copy_to_host(stream=s)
        s.synchronize()
        u.check(np.array_equal(h, np.float32(3.0) * x + y), "axpy float32 exact")
        print("axpy f32:", u.digest(h))
        # the same kernel specialised for float64
        x64 = x.astype(np.float64)
        dy64 = cuda.to_device(y.astype(np.float64))
        k_axpy[(n + 255) // 256, 256](np.float64(0.5), cuda.to_device(x64), dy64)
        h64 = dy64.copy_to_host()
        u.check(np.array_equal(h64, 0.5 * x64 + y), "axpy float64 exact")
        print("axpy f64:", u.digest(h64))

    def t_events():
        e0, e1 = cuda.event(), cuda.event()
        d = cuda.to_device(a)
        out = cuda.device_array_like(d)
        e0.record()
        k_mix[(n + 255) // 256, 256](d, out, np.uint32(1))
        e1.record()
        e1.synchronize()
        print("event elapsed >= 0:", e0.elapsed_time(e1) >= 0)

    def t_device():
        print("devices:", len(cuda.gpus))
        print("compute capability:", cuda.get_current_device().compute_capability)

    u.section("device", t_device)
    u.section("mix", t_mix)
    u.section("grid2d", t_grid2d)
    u.section("reduce", t_reduce)
    u.section("atomics", t_atomics)
    u.section("float and stream", t_float_and_stream)
    u.section("events", t_events)
    u.finish()


if __name__ == "__main__":
    main()
