/* guest-rdma-none.c: the RDMA transport's place when configure did not find
 * rdma-core (chosen in wire/local.mk instead of guest-rdma.c): rdma:// URLs
 * are refused with a message saying why.
 */
#include "wire/wire-int.h"

#include <stdio.h>

int wire__gtp_rdma_open(wire__gtp **out, const char *hostport, const uint8_t *hello_frame,
                        size_t hello_len, uint32_t timeout_ms, wire__welcome *w, char *why,
                        size_t why_len) {
  *out = NULL;
  snprintf(why, why_len, "this build has no RDMA transport (configure did not find rdma-core)");
  return -EPROTONOSUPPORT;
}
