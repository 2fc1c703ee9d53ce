/* hostd-call-fixture.h: the cmocka group fixture of the hostd tests that
 * drive tenants one call at a time on the recording device, all replies in
 * one buffer (test-hostd-array, -tmap, -vmm, -graph).
 *
 * Gives the program `reply` (the last reply), hc_fixture_setup and
 * hc_fixture_teardown for cmocka_run_group_tests (the daemon as tallyd sets
 * it up, the device shut down after the group), hc_call for a request that
 * must not be a protocol error, hc_call_ok for one that must succeed and
 * whose reply is decoded, and hc_assert_malformed for the rule that a
 * truncated or overlong request is one.  Include it once per test program,
 * after <cmocka.h>; a program that keeps its own reply buffers includes
 * tests/hostd-call-harness.h alone.
 */
#ifndef TALLY_TESTS_HOSTD_CALL_FIXTURE_H
#define TALLY_TESTS_HOSTD_CALL_FIXTURE_H

#include <errno.h>
#include <stdlib.h>

#include "tests/hostd-call-harness.h"

static wire_buf_t reply;

/* Group setup: the reply buffer, then the daemon (hc_daemon_setup).  0 or -1. */
static inline int hc_fixture_setup(void **state) {
  (void)state;
  wire_buf_init(&reply);
  return hc_daemon_setup();
}

/* Group teardown: the reply buffer, then the device.  Always 0. */
static inline int hc_fixture_teardown(void **state) {
  (void)state;
  wire_buf_close(&reply);
  hostd__gpu.shutdown();
  return 0;
}

/* Executes q of op on t as a call (never a protocol error); its CUresult. */
static inline uint32_t hc_call(hostd_tenant_t *t, uint32_t op, const void *q) {
  assert_int_equal(hc_exec(t, op, 0, q, &reply, NULL), 0);
  return hc_result(&reply);
}

/* Executes q of op on t, which must succeed, and decodes the reply into
 * *rep.  A macro, so that a failure names the test's line. */
#define hc_call_ok(t, op, q, rep)                                                                  \
  do {                                                                                             \
    assert_int_equal(hc_call((t), (op), (q)), CUDA_SUCCESS);                                       \
    assert_int_equal(hc_reply(&reply, (op), (rep)), 0);                                            \
  } while (0)

/* Each of the n ops, called with zero bytes one short of its request's
 * fixed part and then one past it, is a protocol error with a reason. */
static inline void hc_assert_malformed(hostd_tenant_t *t, const uint32_t *ops, size_t n) {
  for (size_t i = 0; i < n; i++) {
    size_t fixed = call_msg_fixed(call_req_msg(ops[i]));
    uint8_t *bytes = calloc(1, fixed + 1);
    const char *why = NULL;
    assert_non_null(bytes);
    assert_int_equal(hostd__tenant_exec(t, ops[i], 0, bytes, fixed - 1, &reply, &why), -EPROTO);
    assert_non_null(why);
    why = NULL;
    assert_int_equal(hostd__tenant_exec(t, ops[i], 0, bytes, fixed + 1, &reply, &why), -EPROTO);
    assert_non_null(why);
    free(bytes);
  }
}

#endif /* TALLY_TESTS_HOSTD_CALL_FIXTURE_H */
