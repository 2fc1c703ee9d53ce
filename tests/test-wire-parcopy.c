/* test-wire-parcopy.c: the guest's split copy of very large shm messages.
 *
 * On hosts with >= 4 online CPUs the guest copies a message of at least
 * WIRE__PAR_COPY_MIN bytes into the shared-memory data region with two
 * threads: the caller and the connection's background thread claim
 * WIRE__PAR_COPY_SLICE slices from an atomic counter
 * (wire__par_work, guest.c par_run).  This machine has 2 CPUs, so the tests
 * force the path with TALLY_WIRE_PAR_COPY=1 and check that (1) every slice
 * runs exactly once when two threads race for them, and (2) whole calls
 * through the harness daemon come back byte for byte, for sizes around the
 * threshold and for a payload spread over several iovecs with odd lengths
 * (slices that straddle iovec boundaries).  Speed is wire-bench's job.
 */
#include "tests/test-wire-harness.h"
#include "wire/wire-int.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#define SLICES 1000

typedef struct count_job {
  atomic_int hits[SLICES];
  atomic_int by_helper;
} count_job;

static _Thread_local bool is_helper;

static void count_slice(void *arg, size_t i) {
  count_job *j = arg;
  atomic_fetch_add(&j->hits[i], 1);
  if (is_helper)
    atomic_fetch_add(&j->by_helper, 1);
}

static void *helper(void *arg) {
  is_helper = true;
  wire__par_work(arg);
  return NULL;
}

static void par_work_runs_every_slice_exactly_once(void **state) {
  static count_job j;
  wire__par job = {.fn = count_slice, .arg = &j, .n = SLICES};
  pthread_t t;
  int i;
  (void)state;
  atomic_init(&job.next, 0);
  assert_int_equal(pthread_create(&t, NULL, helper, &job), 0);
  wire__par_work(&job);
  assert_int_equal(pthread_join(t, NULL), 0);
  for (i = 0; i < SLICES; i++)
    assert_int_equal(atomic_load(&j.hits[i]), 1);
  assert_true(atomic_load(&j.by_helper) <= SLICES);
}

static void par_copy_follows_cpu_count_unless_told(void **state) {
  (void)state;
  unsetenv("TALLY_WIRE_PAR_COPY");
  assert_int_equal(wire__par_enabled(), sysconf(_SC_NPROCESSORS_ONLN) >= 4);
  setenv("TALLY_WIRE_PAR_COPY", "0", 1);
  assert_false(wire__par_enabled());
  setenv("TALLY_WIRE_PAR_COPY", "1", 1);
  assert_true(wire__par_enabled());
}

static wire_conn_t *open_shm(harness *h) {
  wire_hello_t hello = {.tenant = "parcopy", .prio = WIRE_PRIO_BEST_EFFORT};
  wire_conn_t *c = NULL;
  char err[256];
  int rc = wire_conn_open(&c, h->url_shm, &hello, NULL, err, sizeof(err));
  if (rc)
    fail_msg("open %s: %s", h->url_shm, err);
  return c;
}

/* Echoes `total` bytes sent as cnt iovecs of the given lengths. */
static void echo_iovecs(wire_conn_t *c, const size_t *lens, int cnt, unsigned seed) {
  struct iovec q[4];
  size_t total = 0, n = 0, i, k;
  uint8_t *back, *all;
  int v;
  for (v = 0; v < cnt; v++)
    total += lens[v];
  all = malloc(total);
  back = malloc(total);
  assert_non_null(all);
  assert_non_null(back);
  for (i = 0; i < total; i++)
    all[i] = (uint8_t)(i * 167 + seed + (i >> 20));
  /* 'Q' first: not one of the harness's special request letters. */
  all[0] = 'Q';
  for (v = 0, k = 0; v < cnt; v++) {
    q[v].iov_base = all + k;
    q[v].iov_len = lens[v];
    k += lens[v];
  }
  {
    struct iovec r = {back, total};
    assert_int_equal(wire_conn_call(c, q, cnt, &r, 1, &n), 0);
  }
  assert_int_equal(n, total);
  assert_memory_equal(all, back, total);
  free(all);
  free(back);
}

static void split_copy_calls_round_trip_around_the_threshold(void **state) {
  harness h;
  wire_conn_t *c;
  size_t below = WIRE__PAR_COPY_MIN - 1, at = WIRE__PAR_COPY_MIN,
         odd = WIRE__PAR_COPY_MIN + WIRE__PAR_COPY_SLICE * 4 + 12345;
  (void)state;
  setenv("TALLY_WIRE_PAR_COPY", "1", 1);
  assert_int_equal(harness_start(&h, NULL), 0);
  c = open_shm(&h);
  echo_iovecs(c, &below, 1, 1);
  echo_iovecs(c, &at, 1, 2);
  echo_iovecs(c, &odd, 1, 3);
  wire_conn_close(c);
  harness_stop(&h);
}

static void split_copy_handles_slices_across_iovecs(void **state) {
  harness h;
  wire_conn_t *c;
  /* Boundaries at one slice + 1 and inside later slices. */
  size_t lens[4] = {WIRE__PAR_COPY_SLICE + 1, 3, WIRE__PAR_COPY_SLICE * 6 + 7,
                    WIRE__PAR_COPY_SLICE * 3 / 2 + 999};
  (void)state;
  setenv("TALLY_WIRE_PAR_COPY", "1", 1);
  assert_int_equal(harness_start(&h, NULL), 0);
  c = open_shm(&h);
  echo_iovecs(c, lens, 4, 4);
  wire_conn_close(c);
  harness_stop(&h);
}

/* A reply of >= 64 MiB comes back as 8 MiB spans (server-shm.c), each
 * placed into the caller's buffers by two threads (guest.c on_copy_in):
 * the bytes must land in order across reply iovecs with odd lengths. */
static void large_reply_is_placed_by_two_threads(void **state) {
  harness h;
  wire_conn_t *c;
  size_t total = ((size_t)64 << 20) + 12345, a = WIRE__PAR_COPY_SLICE * 5 + 3, b = 7, n = 0, i;
  uint8_t *req = malloc(total), *rep = malloc(total + 64);
  struct iovec q = {req, total}, r[3];
  (void)state;
  assert_non_null(req);
  assert_non_null(rep);
  for (i = 0; i < total; i++)
    req[i] = (uint8_t)(i * 2654435761u >> 13);
  memset(rep, 0xa5, total + 64);
  /* Gaps of 16 bytes between the pieces must stay untouched. */
  r[0] = (struct iovec){rep, a};
  r[1] = (struct iovec){rep + a + 16, b};
  r[2] = (struct iovec){rep + a + b + 32, total - a - b};
  setenv("TALLY_WIRE_PAR_COPY", "1", 1);
  assert_int_equal(harness_start(&h, NULL), 0);
  c = open_shm(&h);
  assert_int_equal(wire_conn_call(c, &q, 1, r, 3, &n), 0);
  assert_int_equal(n, total);
  assert_memory_equal(rep, req, a);
  assert_int_equal(rep[a], 0xa5);
  assert_memory_equal(rep + a + 16, req + a, b);
  assert_int_equal(rep[a + 16 + b], 0xa5);
  assert_memory_equal(rep + a + b + 32, req + a + b, total - a - b);
  wire_conn_close(c);
  harness_stop(&h);
  free(req);
  free(rep);
}

int main(void) {
  /* Watchdog: a lost helper wakeup would hang a call; fail instead. */
  alarm(120);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(par_work_runs_every_slice_exactly_once),
      cmocka_unit_test(par_copy_follows_cpu_count_unless_told),
      cmocka_unit_test(split_copy_calls_round_trip_around_the_threshold),
      cmocka_unit_test(split_copy_handles_slices_across_iovecs),
      cmocka_unit_test(large_reply_is_placed_by_two_threads),
  };
  return cmocka_run_group_tests_name("wire-parcopy", tests, NULL, NULL);
}
