"""numba_kernels.py: numba-cuda kernels through the driver API.

usage: python3 numba_kernels.py
A @cuda.jit kernel over device arrays (to_device, device_array,
copy_to_host), a shared-memory block reduction with atomics, and
numba's own cuda.reduce.  Results are rounded to 4 decimals (fp32 sums in
a fixed order on one GPU give the same bits).  The atomic reduction adds
block partial sums in any order, so run to run its last bits differ even
natively (163838.47 against 163838.48 seen on an H200): it prints whether
it is within 1e-5 (relative) of the host's float64 sum instead.
Prints "done" at the end.  On NumPy 2, numpy.row_stack (removed there, and
still called by numba-cuda) is aliased to numpy.vstack before numba loads.
"""
import numpy as np

if not hasattr(np, "row_stack"):
    # the numba-cuda installed here still calls numpy.row_stack, which NumPy 2 removed;
    # vstack is the same function under its kept name.
    np.row_stack = np.vstack

from numba import cuda, float32  # noqa: E402  (after the shim above)


@cuda.jit
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def block_sum(x, total):
    buf = cuda.shared.array(256, dtype=float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    buf[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    s = 128
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        cuda.atomic.add(total, 0, buf[0])


def main():
    n = 1 << 16
    x = np.arange(n, dtype=np.float32) / n
    y = np.ones(n, dtype=np.float32)
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    dout = cuda.device_array(n, dtype=np.float32)
    axpy[(n + 255) // 256, 256](np.float32(3.0), dx, dy, dout)
    out = dout.copy_to_host()
    print("axpy sum", f"{float(out.astype(np.float64).sum()):.4f}")
    print("axpy matches host", bool(np.allclose(out, 3.0 * x + y)))
    total = cuda.to_device(np.zeros(1, dtype=np.float32))
    block_sum[(n + 255) // 256, 256](dout, total)
    got, want = float(total.copy_to_host()[0]), float(out.astype(np.float64).sum())
    print("block sum within 1e-5 of the host's", abs(got - want) <= 1e-5 * abs(want))
    red = cuda.reduce(lambda a, b: a + b)
    print("reduce", f"{float(red(dx)):.2f}")
    cuda.synchronize()


if __name__ == "__main__":
    main()
    print("done")
