/* rt-device.cu: device and context management through the CUDA runtime API.
 *
 * Covers what cudart asks of the driver when a program starts and manages devices: device
 * count, properties and attributes, set/get device, device flags, the primary context that
 * cudart retains, cudaDeviceSynchronize and cudaDeviceReset followed by fresh work, and the
 * driver/runtime versions.  Under Tally most of these are answered by the guest from the
 * snapshot taken at connect; the output must match the real driver's exactly.
 *
 * Prints only facts that do not change from run to run (no free memory, no clocks that the
 * driver may report differently under load, no PCI bus ids that a remote host may not share:
 * those are printed, because Tally is meant to report the serving GPU's own values).
 */
#include <cuda_runtime.h>

#include "e2e-common.h"

__global__ void add_one(unsigned *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] += 1u;
}

/* Runs one small kernel and returns the checksum of its result, proving the (possibly new)
 * primary context works. */
static void run_probe(const char *label) {
  const int n = 4096; /* 16 blocks of 256: small, but more than one block */
  unsigned *h = (unsigned *)malloc(n * sizeof(unsigned));
  unsigned *d = NULL;
  e2e_fill_u32(h, n, 7);
  E2E_RT(cudaMalloc(&d, n * sizeof(unsigned)));
  E2E_RT(cudaMemcpy(d, h, n * sizeof(unsigned), cudaMemcpyHostToDevice));
  add_one<<<n / 256, 256>>>(d, n);
  E2E_RT(cudaGetLastError());
  E2E_RT(cudaMemcpy(h, d, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
  E2E_RT(cudaFree(d));
  e2e_print_sum(label, h, n * sizeof(unsigned));
  free(h);
}

int main(void) {
  int count = -1, dev = -1, drv = 0, rt = 0;
  unsigned flags = 0;
  cudaDeviceProp prop;

  E2E_RT(cudaDriverGetVersion(&drv));
  E2E_RT(cudaRuntimeGetVersion(&rt));
  printf("driver version: %d\n", drv);
  printf("runtime version: %d\n", rt);

  E2E_RT(cudaGetDeviceCount(&count));
  printf("device count: %d\n", count);
  e2e_check(count >= 1, "at least one device");
  if (count < 1)
    return e2e_finish();

  E2E_RT(cudaSetDevice(0));
  E2E_RT(cudaGetDevice(&dev));
  printf("current device: %d\n", dev);

  memset(&prop, 0, sizeof(prop));
  E2E_RT(cudaGetDeviceProperties(&prop, 0));
  printf("name: %s\n", prop.name);
  printf("compute capability: %d.%d\n", prop.major, prop.minor);
  printf("multiprocessors: %d\n", prop.multiProcessorCount);
  printf("total global mem: %zu\n", prop.totalGlobalMem);
  printf("shared mem per block: %zu (optin %zu)\n", prop.sharedMemPerBlock,
         prop.sharedMemPerBlockOptin);
  printf("regs per block: %d\n", prop.regsPerBlock);
  printf("warp size: %d\n", prop.warpSize);
  printf("max threads per block: %d\n", prop.maxThreadsPerBlock);
  printf("max threads dim: %d %d %d\n", prop.maxThreadsDim[0], prop.maxThreadsDim[1],
         prop.maxThreadsDim[2]);
  printf("max grid size: %d %d %d\n", prop.maxGridSize[0], prop.maxGridSize[1],
         prop.maxGridSize[2]);
  printf("l2 cache size: %d\n", prop.l2CacheSize);
  printf("concurrent kernels: %d\n", prop.concurrentKernels);
  printf("unified addressing: %d\n", prop.unifiedAddressing);
  printf("async engines: %d\n", prop.asyncEngineCount);
  printf("pci bus/device/domain: %d/%d/%d\n", prop.pciBusID, prop.pciDeviceID, prop.pciDomainID);
  printf("uuid: ");
  for (int i = 0; i < 16; i++)
    printf("%02x", (unsigned char)prop.uuid.bytes[i]);
  printf("\n");

  /* A few attributes through the attribute call, which cudart forwards one by one. */
  {
    static const struct {
      cudaDeviceAttr attr;
      const char *name;
    } attrs[] = {
        {cudaDevAttrMaxThreadsPerBlock, "max threads per block"},
        {cudaDevAttrMultiProcessorCount, "multiprocessors"},
        {cudaDevAttrComputeCapabilityMajor, "cc major"},
        {cudaDevAttrComputeCapabilityMinor, "cc minor"},
        {cudaDevAttrMaxSharedMemoryPerBlockOptin, "smem optin"},
        {cudaDevAttrMaxRegistersPerMultiprocessor, "regs per sm"},
        {cudaDevAttrCooperativeLaunch, "cooperative launch"},
        {cudaDevAttrClusterLaunch, "cluster launch"},
        {cudaDevAttrMemoryPoolsSupported, "memory pools"},
    };
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
      int v = -1;
      E2E_RT(cudaDeviceGetAttribute(&v, attrs[i].attr, 0));
      printf("attr %s: %d\n", attrs[i].name, v);
    }
  }

  /* Device flags: set before the primary context is active, then read back. */
  E2E_RT(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
  E2E_RT(cudaGetDeviceFlags(&flags));
  printf("device flags blocking-sync: %s\n",
         (flags & cudaDeviceScheduleMask) == cudaDeviceScheduleBlockingSync ? "yes" : "no");

  {
    size_t lim = 0;
    E2E_RT(cudaDeviceSetLimit(cudaLimitStackSize, 4096));
    E2E_RT(cudaDeviceGetLimit(&lim, cudaLimitStackSize));
    printf("stack size limit: %zu\n", lim);
  }

  run_probe("probe before reset");
  E2E_RT(cudaDeviceSynchronize());

  /* cudaDeviceReset destroys the primary context; the next call creates a fresh one. */
  E2E_RT(cudaDeviceReset());
  E2E_RT(cudaGetDevice(&dev));
  printf("current device after reset: %d\n", dev);
  run_probe("probe after reset");

  {
    size_t freeb = 0, total = 0;
    E2E_RT(cudaMemGetInfo(&freeb, &total));
    printf("mem info total equals prop: %s\n", total == prop.totalGlobalMem ? "yes" : "no");
    e2e_check(freeb <= total, "free <= total");
  }

  E2E_RT(cudaDeviceSynchronize());
  return e2e_finish();
}
