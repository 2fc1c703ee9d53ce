/* server-rdma-none.c: the daemon's RDMA listener when configure did not find
 * rdma-core (chosen in wire/local.mk instead of server-rdma.c).
 */
#include "wire/wire-int.h"

int wire__rdma_listen(wire_server_t *s, const char *addr, void **listener) {
  *listener = NULL;
  return -EPROTONOSUPPORT;
}

void wire__rdma_unlisten(void *listener) {}
