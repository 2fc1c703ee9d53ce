/* hostd-call-harness.h: drives a hostd tenant directly with requests
 * encoded by the call vocabulary (wire/call.def), as the guest encodes them,
 * so no test writes a request layout by hand.  Header-only, for cmocka tests
 * that link hostd's archive and the recording GPU backend.
 */
#ifndef TALLY_TESTS_HOSTD_CALL_HARNESS_H
#define TALLY_TESTS_HOSTD_CALL_HARNESS_H

#include <stdint.h>
#include <string.h>

#include "hostd/gpu.h"
#include "hostd/hostd-int.h"
#include "wire/call.h"

/* The daemon's state as tallyd sets it up: the recording device, one
 * device served, quiet log, module cache in memory.  0 or -1. */
static inline int hc_daemon_setup(void) {
  if (hostd__gpu.init(0, &hostd__snapshot) != CUDA_SUCCESS)
    return -1;
  hostd__ndev = 1;
  hostd__log_level = HOSTD_LOG_ERROR;
  hostd__modcache_init(NULL);
  return 0;
}

/* Encodes q (op's request struct) and executes it on t; returns what
 * hostd__tenant_exec returns (why: its reason, may be NULL). */
static inline int hc_exec(hostd_tenant_t *t, uint32_t op, uint32_t flags, const void *q,
                          wire_buf_t *reply, const char **why) {
  wire_buf_t b;
  const char *w = NULL;
  int rc;
  wire_buf_init(&b);
  rc = call_put(call_req_msg(op), q, &b);
  if (rc == 0)
    rc = hostd__tenant_exec(t, op, flags, b.data, b.len, reply, &w);
  wire_buf_close(&b);
  if (why)
    *why = w;
  return rc;
}

/* The CUresult of the last reply. */
static inline uint32_t hc_result(const wire_buf_t *reply) {
  call_reply_hdr_t h;
  if (reply->len < CALL_REPLY_HDR_LEN)
    return 0xffffffffu;
  call_reply_hdr_read(reply->data, &h);
  return h.result;
}

/* Decodes the last reply's results as op's reply struct; 0 or -EPROTO. */
static inline int hc_reply(const wire_buf_t *reply, uint32_t op, void *rep) {
  if (reply->len < CALL_REPLY_HDR_LEN)
    return -EPROTO;
  return call_decode(call_rep_msg(op), reply->data + CALL_REPLY_HDR_LEN,
                     reply->len - CALL_REPLY_HDR_LEN, rep, NULL, NULL);
}

/* A tenant after a successful HELLO (NULL on failure). */
static inline hostd_tenant_t *hc_tenant(uint32_t id, wire_buf_t *reply) {
  call_hello_req_t q;
  hostd_tenant_t *t = hostd__tenant_new(id, false);
  memset(&q, 0, sizeof(q));
  q.version = CALL_PROTO_VERSION;
  q.priority = 1;
  if (t && (hc_exec(t, CALL_OP_HELLO, 0, &q, reply, NULL) != 0 || hc_result(reply) != 0)) {
    hostd__tenant_free(t);
    return NULL;
  }
  return t;
}

#endif /* TALLY_TESTS_HOSTD_CALL_HARNESS_H */
