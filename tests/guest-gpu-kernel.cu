// guest-gpu-kernel.cu: compiled to PTX (nvcc -ptx) for guest-gpu-drv.c.
extern "C" __global__ void iota_sq(unsigned *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] += (unsigned)i * (unsigned)i;
}
