"""cupy_libs.py: CuPy's CUDA libraries and kernels through the driver API.

usage: python3 cupy_libs.py fft|random|solver|sparse|sort|rawkernel|texture
  fft        cuFFT: fft/ifft of a 1-D signal, rfft2 of an image
  random     cuRAND with a fixed seed (uniform, normal, integers)
  solver     cuSOLVER: linalg.solve, eigh and svd of small well-conditioned matrices
  sparse     cuSPARSE: a CSR matrix times a vector and times a dense matrix
  sort       sort, argsort, unique
  rawkernel  a RawKernel (NVRTC-compiled) with a grid-stride loop
  texture    cupy.cuda.texture: a 2-D CUDA array filled from the host, a texture
             object over it, a RawKernel sampling it (tex2D, point filtering),
             and a surface-free read back of the array
Results are rounded to 4 decimals (floating point: the same library kernels
on the same GPU give the same bits; 4 decimals only hide printing noise) and
integers are exact.  Prints "done" at the end.
"""
import sys

import cupy as cp


def r4(x):
    return f"{float(x):.4f}"


def fft():
    t = cp.linspace(0, 1, 1024, dtype=cp.float64)
    sig = cp.sin(2 * cp.pi * 50 * t) + 0.5 * cp.cos(2 * cp.pi * 120 * t)
    f = cp.fft.fft(sig)
    print("peak bins", sorted(int(i) for i in cp.argsort(cp.abs(f[:512]))[-2:].get()))
    print("roundtrip err <1e-9", bool(cp.abs(cp.fft.ifft(f).real - sig).max() < 1e-9))
    img = cp.arange(64 * 64, dtype=cp.float32).reshape(64, 64) % 7
    print("rfft2 |sum|", r4(cp.abs(cp.fft.rfft2(img)).sum() / 1e4))


def random():
    rs = cp.random.RandomState(seed=1234)
    print("uniform", r4(rs.uniform(size=10000).mean()))
    print("normal", r4(rs.standard_normal(size=10000).std()))
    print("ints", int(rs.randint(0, 100, size=1000).sum()))


def solver():
    rs = cp.random.RandomState(seed=7)
    a = rs.standard_normal((32, 32)) + 32 * cp.eye(32)
    b = rs.standard_normal(32)
    x = cp.linalg.solve(a, b)
    print("solve residual <1e-9", bool(cp.abs(a @ x - b).max() < 1e-9))
    print("solve sum", r4(x.sum()))
    s = a + a.T
    w, v = cp.linalg.eigh(s)
    print("eigh min max", r4(w.min()), r4(w.max()))
    print("eigh orthonormal", bool(cp.abs(v.T @ v - cp.eye(32)).max() < 1e-9))
    sv = cp.linalg.svd(a, compute_uv=False)
    print("svd max", r4(sv.max()))


def sparse():
    import cupyx.scipy.sparse as sp

    rows = cp.array([0, 0, 1, 2, 2, 3], dtype=cp.int32)
    cols = cp.array([0, 3, 1, 0, 2, 3], dtype=cp.int32)
    vals = cp.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    m = sp.csr_matrix((vals, (rows, cols)), shape=(4, 4))
    v = cp.arange(4, dtype=cp.float64)
    print("matvec", [r4(e) for e in (m @ v).get()])
    d = cp.arange(16, dtype=cp.float64).reshape(4, 4)
    print("matmul sum", r4((m @ d).sum()))
    print("nnz", int(m.nnz))


def sort():
    rs = cp.random.RandomState(seed=3)
    a = rs.randint(0, 1000, size=100000)
    s = cp.sort(a)
    print("sorted", bool((s[1:] >= s[:-1]).all()))
    print("argsort first", int(a[cp.argsort(a)[0]]))
    print("unique", int(cp.unique(a).size))


def rawkernel():
    k = cp.RawKernel(r"""
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = a * x[i] + y[i];
}""", "saxpy")
    n = 1 << 20
    x = cp.arange(n, dtype=cp.float32) / n
    y = cp.ones(n, dtype=cp.float32)
    k((64,), (256,), (cp.float32(2.0), x, y, cp.int32(n)))
    print("saxpy sum", r4(y.sum() / n))


def texture():
    from cupy.cuda import texture as tx

    h, w = 8, 16
    host = (cp.arange(h * w, dtype=cp.float32).reshape(h, w) * 0.25).get()
    ch = tx.ChannelFormatDescriptor(32, 0, 0, 0, cp.cuda.runtime.cudaChannelFormatKindFloat)
    arr = tx.CUDAarray(ch, w, h)
    arr.copy_from(host)
    res = tx.ResourceDescriptor(cp.cuda.runtime.cudaResourceTypeArray, cuArr=arr)
    tdesc = tx.TextureDescriptor((cp.cuda.runtime.cudaAddressModeClamp,) * 2,
                                 cp.cuda.runtime.cudaFilterModePoint,
                                 cp.cuda.runtime.cudaReadModeElementType)
    tobj = tx.TextureObject(res, tdesc)
    k = cp.RawKernel(r"""
extern "C" __global__ void sample(cudaTextureObject_t t, float *out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h)
    out[y * w + x] = tex2D<float>(t, x + 0.5f, y + 0.5f) * 2.0f;
}""", "sample")
    out = cp.zeros((h, w), dtype=cp.float32)
    k((1, h), (w,), (tobj, out, cp.int32(w), cp.int32(h)))
    print("sampled sum", r4(out.sum()))
    print("matches host", bool(cp.allclose(out, cp.asarray(host) * 2)))
    back = cp.empty((h, w), dtype=cp.float32).get()
    arr.copy_to(back)
    print("array round trip", bool((back == host).all()))


if __name__ == "__main__":
    {"fft": fft, "random": random, "solver": solver, "sparse": sparse, "sort": sort,
     "rawkernel": rawkernel, "texture": texture}[sys.argv[1]]()
    print("done")
