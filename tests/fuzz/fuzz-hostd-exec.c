/* fuzz-hostd-exec.c: libFuzzer target for hostd's request decoder.
 *
 * The request bytes go through hostd__tenant_exec, which decodes them with
 * the call vocabulary's one decoder (wire/call.c) before any handler runs.
 * Input: a sequence of requests, each `u32 op | u32 flags | u16 len | len
 * bytes`, executed in order by one tenant (after a valid hello) on the
 * recording GPU backend.  Invariants: hostd__tenant_exec never crashes and
 * returns 0 or -EPROTO; when the tenant is freed, every byte of device memory
 * it allocated is released (a leak aborts, so the fuzzer reports it).
 * hostd_fuzz_exec_one() is also called by tests/test-hostd-exec.c, which
 * replays deterministic random inputs in make check.
 */
#include "hostd/gpu.h"
#include "hostd/hostd-int.h"
#include "wire/call.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int hostd_fuzz_exec_one(const uint8_t *data, size_t size);

int hostd_fuzz_exec_one(const uint8_t *data, size_t size) {
  static int inited;
  call_hello_req_t hello;
  wire_buf_t reply, hb;
  const char *why;
  hostd_tenant_t *t;
  uint64_t live;
  int bad = 0;

  if (!inited) {
    if (hostd__gpu.init(0, &hostd__snapshot) != CUDA_SUCCESS)
      abort();
    hostd__ndev = 1;
    hostd__log_level = HOSTD_LOG_ERROR;
    hostd__modcache_init(NULL);
    inited = 1;
  }
  live = hostd_record_live_bytes();
  t = hostd__tenant_new(1, false);
  if (!t)
    return 0;
  memset(&hello, 0, sizeof(hello));
  hello.version = CALL_PROTO_VERSION;
  wire_buf_init(&reply);
  wire_buf_init(&hb);
  if (call_hello_req_put(&hello, &hb) != 0 ||
      hostd__tenant_exec(t, CALL_OP_HELLO, 0, hb.data, hb.len, &reply, &why) != 0)
    abort();
  wire_buf_close(&hb);
  while (size >= 10) {
    uint32_t op, flags;
    uint16_t len;
    int rc;
    memcpy(&op, data, 4);
    memcpy(&flags, data + 4, 4);
    memcpy(&len, data + 8, 2);
    data += 10;
    size -= 10;
    if (len > size)
      len = (uint16_t)size;
    /* Copy to an exact-size buffer so ASan sees any over-read. */
    uint8_t *args = malloc(len ? len : 1);
    if (!args)
      break;
    memcpy(args, data, len);
    rc = hostd__tenant_exec(t, op % (CALL_OP_COUNT + 2), flags, args, len, &reply, &why);
    free(args);
    if (rc != 0 && rc != -EPROTO)
      abort();
    data += len;
    size -= len;
    if (rc == -EPROTO) {
      bad = 1;
      break; /* the server closes such a tenant */
    }
  }
  hostd__tenant_free(t);
  wire_buf_close(&reply);
  if (hostd_record_live_bytes() != live)
    abort(); /* the tenant leaked device memory */
  return bad;
}

#ifndef HOSTD_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)hostd_fuzz_exec_one(data, size);
  return 0;
}
#endif
