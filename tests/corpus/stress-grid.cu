/* stress-grid.cu: grid geometry -- 3-D grids and blocks, grids with more
 * than 2^16 blocks (x up to 300k; y at its hardware maximum 65535, so
 * x*y > 2^16 with y in use), and kernels that read %nctaid to size their
 * own loops.  Slicing must virtualise all three %ctaid/%nctaid components.
 */
#include "corpus.cuh"

/* Each block writes its own 3-D coordinates and the grid shape. */
__global__ void grid3d_coords(unsigned *out) {
  unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned nt = blockDim.x * blockDim.y * blockDim.z;
  out[b * nt + t] = (blockIdx.x * 7 + blockIdx.y * 131 + blockIdx.z * 1031) ^
                    (gridDim.x << 20 ^ gridDim.y << 10 ^ gridDim.z) ^ (t << 3);
}

/* Grid-stride loop: the stride comes from %nctaid. */
template <typename T> __global__ void grid_stride_axpy(T a, const T *x, T *y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = a * x[i] + y[i];
}

/* 2-D tiled transpose over a grid whose y extent may reach 65535. */
__global__ void transpose_tile(const float *in, float *out, int w, int h) {
  __shared__ float tile[32][33];
  int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
  if (x < w && y < h)
    tile[threadIdx.y][threadIdx.x] = in[(size_t)y * w + x];
  __syncthreads();
  x = blockIdx.y * 32 + threadIdx.x;
  y = blockIdx.x * 32 + threadIdx.y;
  if (x < h && y < w)
    out[(size_t)y * h + x] = tile[threadIdx.x][threadIdx.y];
}

/* Big y: one thread per block, 3 x 65535 blocks. */
__global__ void tall_grid(unsigned *out) {
  out[blockIdx.y * gridDim.x + blockIdx.x] = blockIdx.x * 100000u + blockIdx.y;
}

CORPUS_CASE(grid_3d) {
  dim3 grid((unsigned)corpus_size(1, 40), (unsigned)corpus_size(1, 30),
            (unsigned)corpus_size(1, 20));
  dim3 block((unsigned)corpus_size(1, 8), (unsigned)corpus_size(1, 8), (unsigned)corpus_size(1, 4));
  size_t n = (size_t)grid.x * grid.y * grid.z * block.x * block.y * block.z;
  unsigned *out = corpus_device_zero<unsigned>(n);
  grid3d_coords<<<grid, block>>>(out);
  CORPUS_CUDA(cudaDeviceSynchronize());
  std::vector<unsigned> o = corpus_to_host(out, n);
  bool ok = true;
  unsigned nt = block.x * block.y * block.z;
  for (unsigned z = 0; z < grid.z && ok; z++)
    for (unsigned y = 0; y < grid.y && ok; y++)
      for (unsigned x = 0; x < grid.x && ok; x++) {
        unsigned b = x + grid.x * (y + grid.y * z);
        ok = o[b * nt + 1 % nt] == ((x * 7 + y * 131 + z * 1031) ^
                                    (grid.x << 20 ^ grid.y << 10 ^ grid.z) ^ ((1 % nt) << 3));
      }
  corpus_check(ok, "grid3d_coords");
  cudaFree(out);
}

CORPUS_CASE(grid_tall_y) {
  dim3 grid(3, 65535, 1);
  unsigned *out = corpus_device_zero<unsigned>(3 * 65535);
  tall_grid<<<grid, 1>>>(out);
  CORPUS_CUDA(cudaDeviceSynchronize());
  std::vector<unsigned> o = corpus_to_host(out, 3 * 65535);
  corpus_check(o[65534 * 3 + 2] == 2 * 100000u + 65534, "tall_grid");
  cudaFree(out);
}

CORPUS_CASE(grid_wide_x) {
  long long n = (long long)corpus_size(70000, 300000) * 64;
  float *x = corpus_to_device(corpus_host_random<float>(n));
  float *y = corpus_to_device(corpus_host_random<float>(n));
  grid_stride_axpy<float><<<(unsigned)(n / 64), 64>>>(1.5f, x, y, n);
  double *xd = corpus_to_device(corpus_host_random<double>(n / 8));
  double *yd = corpus_to_device(corpus_host_random<double>(n / 8));
  grid_stride_axpy<double><<<(unsigned)corpus_size(1, 500), 128>>>(-0.25, xd, yd, n / 8);
  CORPUS_CUDA(cudaDeviceSynchronize());
  cudaFree(x);
  cudaFree(y);
  cudaFree(xd);
  cudaFree(yd);
}

CORPUS_CASE(grid_transpose_tall) {
  int w = (int)corpus_size(1, 64), h = (int)corpus_size(30000, 65535 * 32 / 8);
  float *in = corpus_to_device(corpus_host_random<float>((size_t)w * h));
  float *out = corpus_device_zero<float>((size_t)w * h);
  transpose_tile<<<dim3((w + 31) / 32, (h + 31) / 32), dim3(32, 32)>>>(in, out, w, h);
  CORPUS_CUDA(cudaDeviceSynchronize());
  cudaFree(in);
  cudaFree(out);
}
