/* oom-harness.h: "every allocation fails once" for single-threaded tests.
 *
 * Include it in exactly one test program linked with
 *   -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc -Wl,--wrap=free
 * and call oom_every_failure(scenario, min_failures) from a cmocka test.
 * The wrappers count live allocations and fail allocation number N;
 * oom_every_failure runs the scenario with N = 0, 1, 2, ... until it runs
 * through, and fails the test when a run leaks (live allocations differ from
 * before the run), when the scenario returns anything but 0 or -ENOMEM, or
 * when it needed fewer than min_failures injected failures to get through
 * (so a scenario that stops allocating cannot pass vacuously).  After
 * libuv's test/test-loop-oom.c.  The counters are plain
 * statics: the scenario must allocate on the test thread only.
 */
#ifndef TALLY_TESTS_OOM_HARNESS_H
#define TALLY_TESTS_OOM_HARNESS_H

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *old, size_t n);
void __wrap_free(void *p);

/* Test thread only: the countdown and the count of live allocations. */
static long oom_fail_at = -1, oom_seen, oom_live;

static bool oom_should_fail(void) {
  return oom_fail_at >= 0 && oom_seen++ == oom_fail_at;
}

void *__wrap_malloc(size_t n) {
  void *p = oom_should_fail() ? NULL : __real_malloc(n);
  oom_live += p != NULL;
  return p;
}
void *__wrap_calloc(size_t n, size_t m) {
  void *p = oom_should_fail() ? NULL : __real_calloc(n, m);
  oom_live += p != NULL;
  return p;
}
void *__wrap_realloc(void *old, size_t n) {
  void *p = oom_should_fail() ? NULL : __real_realloc(old, n);
  oom_live += (p != NULL && old == NULL);
  return p;
}
void __wrap_free(void *p) {
  oom_live -= p != NULL;
  __real_free(p);
}

/* Runs scenario (0 = ran through, -ENOMEM = ran out) once per allocation
 * it makes, failing that allocation; see the top comment. */
static void oom_every_failure(int (*scenario)(void), int min_failures) {
  const long limit = 100000; /* far above any scenario here: a loop bound, not a tuning knob */
  long n;
  int failures = 0;
  for (n = 0; n < limit; n++) {
    long before = oom_live;
    oom_fail_at = n;
    oom_seen = 0;
    int rc = scenario();
    oom_fail_at = -1;
    if (oom_live != before)
      fail_msg("allocation %ld failed: %ld allocations leaked", n, oom_live - before);
    if (rc == 0)
      break;
    if (rc != -ENOMEM)
      fail_msg("allocation %ld failed: scenario returned %d, not -ENOMEM", n, rc);
    failures++;
  }
  print_message("# %d allocation failures injected, all -ENOMEM, none leaked\n", failures);
  assert_true(failures >= min_failures);
  assert_true(n < limit);
}

#endif /* TALLY_TESTS_OOM_HARNESS_H */
