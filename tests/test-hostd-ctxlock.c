/* test-hostd-ctxlock.c: hostd/ctxlock.c, the shared context's reader-writer
 * lock (readers mark their own slot; the writer raises a flag and uses the
 * asymmetric barrier, barrier.c).
 *
 * What is checked, with the barrier on where the kernel has it (else the
 * pthread rwlock it falls back to): a writer waits for a reader and a reader
 * for a writer; nested read sections keep the writer out until the
 * outermost ends; readers never see a pair of words the writer updates
 * together half-updated, over many rounds with several readers; a thread
 * that exits gives its slot back to the next one.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "hostd/hostd-int.h"

static atomic_int in_section; /* set by the helper thread once it holds the lock */

static void pause_ms(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

static void *write_once(void *arg) {
  (void)arg;
  hostd__ctxlock_wr();
  atomic_store(&in_section, 1);
  hostd__ctxlock_wr_done();
  return NULL;
}

static void *read_once(void *arg) {
  (void)arg;
  hostd__ctxlock_rd();
  atomic_store(&in_section, 1);
  hostd__ctxlock_rd_done();
  return NULL;
}

static void a_writer_waits_for_nested_readers(void **state) {
  pthread_t th;
  int early;
  (void)state;
  atomic_store(&in_section, 0);
  hostd__ctxlock_rd();
  hostd__ctxlock_rd(); /* nested */
  assert_int_equal(pthread_create(&th, NULL, write_once, NULL), 0);
  pause_ms(30);
  hostd__ctxlock_rd_done(); /* the inner one: still inside */
  pause_ms(30);
  early = atomic_load(&in_section);
  hostd__ctxlock_rd_done();
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(early, 0);
  assert_int_equal(atomic_load(&in_section), 1);
}

static void a_reader_waits_for_the_writer(void **state) {
  pthread_t th;
  (void)state;
  atomic_store(&in_section, 0);
  int early;
  hostd__ctxlock_wr();
  assert_int_equal(pthread_create(&th, NULL, read_once, NULL), 0);
  pause_ms(30);
  early = atomic_load(&in_section);
  hostd__ctxlock_wr_done(); /* before any assertion: a failed one must not leave it held */
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(early, 0);
  assert_int_equal(atomic_load(&in_section), 1);
}

#define READERS 3
#define WRITES  300

static int pair_a, pair_b; /* written together by the writer, plainly */
static atomic_int stop_readers;
static atomic_long torn, reads;

static void *reader_loop(void *arg) {
  (void)arg;
  while (!atomic_load(&stop_readers)) {
    hostd__ctxlock_rd();
    int a = *(volatile int *)&pair_a, b = *(volatile int *)&pair_b;
    hostd__ctxlock_rd_done();
    if (a != b)
      atomic_fetch_add(&torn, 1);
    atomic_fetch_add(&reads, 1);
  }
  return NULL;
}

static void readers_never_see_a_half_done_write(void **state) {
  pthread_t th[READERS];
  (void)state;
  atomic_store(&stop_readers, 0);
  for (int i = 0; i < READERS; i++)
    assert_int_equal(pthread_create(&th[i], NULL, reader_loop, NULL), 0);
  while (atomic_load(&reads) < READERS) /* the readers are at it before the first write */
    sched_yield();
  for (int i = 0; i < WRITES; i++) {
    long before = atomic_load(&reads);
    hostd__ctxlock_wr();
    *(volatile int *)&pair_a = i + 1;
    for (volatile int spin = 0; spin < 2000; spin++) /* a reader would catch the gap */
      ;
    *(volatile int *)&pair_b = i + 1;
    hostd__ctxlock_wr_done();
    /* Writers are preferred: on a loaded host back-to-back writes would
     * starve the readers, so each write waits for a read after the last. */
    while (atomic_load(&reads) == before)
      sched_yield();
  }
  atomic_store(&stop_readers, 1);
  for (int i = 0; i < READERS; i++)
    assert_int_equal(pthread_join(th[i], NULL), 0);
  assert_int_equal(atomic_load(&torn), 0);
  assert_true(atomic_load(&reads) > 0);
}

static void threads_that_came_and_went_do_not_hold_the_writer(void **state) {
  pthread_t th;
  (void)state;
  /* Threads one after the other: each reads once and exits; the writer
   * after them must not wait for a slot of a thread that is gone. */
  for (int i = 0; i < 64; i++) {
    assert_int_equal(pthread_create(&th, NULL, read_once, NULL), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
  }
  hostd__ctxlock_wr();
  hostd__ctxlock_wr_done();
}

static int setup(void **state) {
  (void)state;
  (void)hostd__barrier_init(); /* as tallyd does at start */
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_writer_waits_for_nested_readers),
      cmocka_unit_test(a_reader_waits_for_the_writer),
      cmocka_unit_test(readers_never_see_a_half_done_write),
      cmocka_unit_test(threads_that_came_and_went_do_not_hold_the_writer),
  };
  return cmocka_run_group_tests_name("hostd-ctxlock", tests, setup, NULL);
}
