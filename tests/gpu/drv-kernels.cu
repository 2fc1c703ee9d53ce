/* drv-kernels.cu: device code loaded by the driver-API programs (drv-module.c).
 *
 * The build turns this one file into three images: PTX (drv-kernels.ptx, JIT-compiled by the
 * driver at cuModuleLoadData), a cubin for sm_90 (drv-kernels.cubin) and a fatbin holding
 * both (drv-kernels.fatbin).  The programs load all three and must get identical results.
 * Kernels are extern "C" so their names are not mangled; globals are looked up by name.
 */
#include <stdint.h>

extern "C" {

__device__ uint32_t drv_global_scale;
__device__ uint32_t drv_global_table[32];

/* y[i] = a * x[i] + y[i] + drv_global_scale, on 32-bit words (wrapping arithmetic). */
__global__ void drv_saxpy_u32(uint32_t a, const uint32_t *x, uint32_t *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = a * x[i] + y[i] + drv_global_scale;
}

/* A kernel with a mixed-width parameter list, to exercise parameter layouts and the
 * CU_LAUNCH_PARAM_BUFFER_POINTER form of cuLaunchKernel. */
__global__ void drv_mixed_params(uint8_t a, uint64_t b, uint16_t c, double d, uint32_t e,
                                 uint64_t *out) {
  out[0] = a;
  out[1] = b;
  out[2] = c;
  out[3] = (uint64_t)(int64_t)(d * 1024.0);
  out[4] = e;
  out[5] = drv_global_table[e & 31];
}

/* Block-level reduction with dynamic shared memory. */
__global__ void drv_block_sum(const uint32_t *in, uint32_t *out, int n) {
  extern __shared__ uint32_t s[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? in[i] : 0u;
  __syncthreads();
  for (unsigned step = blockDim.x / 2; step > 0; step >>= 1) {
    if (threadIdx.x < step)
      s[threadIdx.x] += s[threadIdx.x + step];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    out[blockIdx.x] = s[0];
}

/* Spins for the given number of GPU clock cycles (makes "not ready" deterministic). */
__global__ void drv_spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

} /* extern "C" */
