// guest-gpu-link-a.cu: with guest-gpu-link-b.cu, compiled to PTX with -rdc=true for the
// two-input cuLink case of guest-gpu-drv.c (iota_sq here calls sq, defined there).
extern __device__ unsigned sq(unsigned x);

extern "C" __global__ void iota_sq(unsigned *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] += sq((unsigned)i);
}
