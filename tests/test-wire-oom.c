/* test-wire-oom.c: fail each allocation once (libuv's test-loop-oom.c).
 *
 * malloc/calloc/realloc are wrapped at link time (-Wl,--wrap=...): on the
 * armed thread, allocation number fail_at returns NULL.  For each _init/_new
 * and the assembler we fail allocation 0, 1, 2 ... and expect -ENOMEM (and no
 * crash; leaks are caught by the --enable-sanitizers build's LeakSanitizer)
 * until the call succeeds without hitting the failure.  Only allocations made
 * by the calling thread count, so the harness daemon's own thread is not
 * disturbed while a guest is opened against it.
 */
#include "tests/test-wire-harness.h"
#include "wire/wire-int.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);

static __thread long fail_at = -1; /* -1: never */
static __thread long seen;
static __thread bool hit;

static bool should_fail(void) {
  if (fail_at < 0)
    return false;
  if (seen++ == fail_at) {
    hit = true;
    return true;
  }
  return false;
}
void *__wrap_malloc(size_t n) {
  return should_fail() ? NULL : __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t m) {
  return should_fail() ? NULL : __real_calloc(n, m);
}
void *__wrap_realloc(void *p, size_t n) {
  return should_fail() ? NULL : __real_realloc(p, n);
}

static void arm(long n) {
  fail_at = n;
  seen = 0;
  hit = false;
}
static void disarm(void) {
  fail_at = -1;
}

static void buf_growth_failure_is_sticky_enomem(void **state) {
  wire_buf_t b;
  (void)state;
  wire_buf_init(&b);
  arm(0);
  assert_int_equal(wire_buf_put_u32(&b, 1), -ENOMEM);
  disarm();
  assert_int_equal(wire_buf_put_u32(&b, 1), -ENOMEM); /* sticky */
  assert_int_equal(wire_buf_status(&b), -ENOMEM);
  wire_buf_reset(&b);
  assert_int_equal(wire_buf_put_u32(&b, 1), 0);
  wire_buf_close(&b);
}

static int count_msgs(void *ctx, const wire__msg *m) {
  (*(int *)ctx)++;
  return 0;
}

static void rx_fails_each_allocation_once(void **state) {
  wire_buf_t s;
  uint8_t body[5000];
  struct iovec v = {body, sizeof(body)};
  long n;
  (void)state;
  memset(body, 3, sizeof(body));
  wire_buf_init(&s);
  /* A chunked message and a compressed chunk, fed in two split pieces. */
  wire__send_frames(1, WIRE__K_CALL, 1, &v, 1, sizeof(body), 1000, NULL, wire__emit_to_buf, &s);
  {
    wire__zstate zs = {0};
    wire__send_frames(1, WIRE__K_CALL, 2, &v, 1, sizeof(body), 4096, &zs, wire__emit_to_buf, &s);
  }
  for (n = 0;; n++) {
    wire__rx rx;
    size_t used;
    int got = 0, rc;
    wire__rx_init(&rx, 1 << 20, 0xffffffffu, count_msgs, &got);
    rx.zstd_ok = true;
    arm(n);
    rc = wire__rx_feed(&rx, s.data, 10, &used);
    if (rc == 0)
      rc = wire__rx_feed(&rx, s.data + 10, s.len - 10, &used);
    disarm();
    wire__rx_close(&rx);
    if (!hit) {
      assert_int_equal(rc, 0);
      assert_int_equal(got, 2);
      break;
    }
    assert_int_equal(rc, -ENOMEM);
  }
  assert_true(n >= 1); /* the message buffer (reused for the second) */
  wire_buf_close(&s);
}

static void conn_open_fails_each_allocation_once(bool tcp) {
  harness h;
  wire_hello_t hello = {.tenant = "oom", .prio = WIRE_PRIO_BEST_EFFORT};
  wire_conn_opts_t o = {.no_thread = true};
  long n;

  assert_int_equal(harness_start(&h, NULL), 0);
  for (n = 0;; n++) {
    wire_conn_t *c = NULL;
    int rc;
    arm(n);
    rc = wire_conn_open(&c, tcp ? h.url_tcp : h.url_shm, &hello, &o, NULL, 0);
    disarm();
    if (!hit) {
      assert_int_equal(rc, 0);
      assert_int_equal(wire_conn_call(c, NULL, 0, NULL, 0, NULL), 0);
      wire_conn_close(c);
      break;
    }
    assert_int_equal(rc, -ENOMEM);
    assert_null(c);
  }
  assert_true(n > 3);
  harness_stop(&h);
}
static void shm_conn_open_fails_each_allocation_once(void **s) {
  conn_open_fails_each_allocation_once(false);
}
static void tcp_conn_open_fails_each_allocation_once(void **s) {
  conn_open_fails_each_allocation_once(true);
}

static void server_new_fails_each_allocation_once(void **state) {
  long n;
  (void)state;
  for (n = 0;; n++) {
    uv_loop_t loop;
    wire_server_t *s = NULL;
    /* Spinning on (it allocates on some hosts only): every path, everywhere. */
    wire_server_opts_t o = {.tcp_addr = "127.0.0.1:0", .shm_spin_us = 50, .tcp_spin_us = 50};
    int rc;
    char path[108];
    snprintf(path, sizeof(path), "/tmp/tally-wire-oom-%d.sock", (int)getpid());
    o.unix_path = path;
    uv_loop_init(&loop);
    arm(n);
    rc = wire_server_new(&s, &loop, &o, &h_cb, NULL);
    disarm();
    if (rc == 0)
      wire_server_close(s);
    uv_run(&loop, UV_RUN_DEFAULT); /* lets the handles close */
    assert_int_equal(uv_loop_close(&loop), 0);
    if (!hit) {
      assert_int_equal(rc, 0);
      break;
    }
    assert_int_equal(rc, -ENOMEM);
  }
  assert_true(n >= 2);
}

int main(void) {
  /* Watchdog: a hang (a bug that keeps a call waiting) fails the program
   * after 120 s instead of stalling make check; the suite takes seconds. */
  alarm(120);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(buf_growth_failure_is_sticky_enomem),
      cmocka_unit_test(rx_fails_each_allocation_once),
      cmocka_unit_test(shm_conn_open_fails_each_allocation_once),
      cmocka_unit_test(tcp_conn_open_fails_each_allocation_once),
      cmocka_unit_test(server_new_fails_each_allocation_once),
  };
  return cmocka_run_group_tests_name("wire-oom", tests, NULL, NULL);
}
