/* entry.c: the first entry points of libcuda.so.1.
 *
 * cuDriverGetVersion is answered locally (cudart and CuPy call it before
 * anything else, facts/direct-symbols-*.txt).  cuInit will connect to tallyd;
 * until that lands it reports CUDA_ERROR_NO_DEVICE with one log line, which
 * is exactly what an application sees when the daemon is unreachable.
 */
#include "guestlib/guest.h"

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

GUEST_EXPORT CUresult cuDriverGetVersion(int *version) {
  if (version == NULL)
    return CUDA_ERROR_INVALID_VALUE;
  *version = GUEST_DRIVER_VERSION;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuInit(unsigned int flags) {
  const char *host = getenv(GUEST_ENV_HOST);
  if (flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  fprintf(stderr, "tally: cannot reach tallyd at %s: this guest library cannot connect yet\n",
          host && *host ? host : "the local UNIX socket");
  return CUDA_ERROR_NO_DEVICE;
}
