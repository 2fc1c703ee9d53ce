/* test-hostd-release.c: hostd/release.c, the releases made off the workers
 * (the recording device: module unloads and host unregistrations are
 * counted; nothing here waits for a GPU).
 *
 * What is checked: without the thread a release is made at once by the
 * caller; with it, releases are made on that thread (with the context
 * current) and drain returns once they are; stop makes
 * what is still queued before it returns; a release the driver refuses is
 * logged and the next one is still made.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostd/gpu.h"
#include "hostd/hostd-int.h"

static const char img[] = "TALLYREC\nkernel k 4,8\n";

/* A page of anonymous memory registered with the device. */
static void *registered_page(void) {
  void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(p != MAP_FAILED);
  assert_int_equal(hostd__gpu.host_register(p, 4096), CUDA_SUCCESS);
  return p;
}

/* Whether [p, p + 4096) is still mapped (msync says ENOMEM when not). */
static bool mapped(void *p) {
  return msync(p, 4096, MS_ASYNC) == 0;
}

static uint64_t module(void) {
  uint64_t h = 0;
  assert_int_equal(hostd__gpu.module_load(&h, 0, img, sizeof(img)), CUDA_SUCCESS);
  return h;
}

static void without_the_thread_a_release_is_made_at_once(void **state) {
  long reg = hostd__record_registered;
  unsigned long del = hostd_record_count(HOSTD_RECORD_MODULE_DEL);
  void *p = registered_page();
  (void)state;
  hostd__release_host(p, 4096, true);
  assert_int_equal(hostd__record_registered, reg);
  assert_false(mapped(p));
  hostd__release_module(module(), 0);
  assert_int_equal(hostd_record_count(HOSTD_RECORD_MODULE_DEL), del + 1);
  hostd__release_drain(); /* no thread: returns at once */
}

static void the_thread_makes_them_and_drain_waits_for_them(void **state) {
  enum { N = 64 };
  long reg = hostd__record_registered;
  unsigned long del = hostd_record_count(HOSTD_RECORD_MODULE_DEL);
  unsigned long stale = hostd_record_count(HOSTD_RECORD_STALE);
  void *p[N];
  (void)state;
  assert_int_equal(hostd__release_start(), 0);
  assert_int_equal(hostd__release_start(), 0); /* a second start: the same thread */
  for (int i = 0; i < N; i++) {
    p[i] = registered_page();
    hostd__release_host(p[i], 4096, true);
    hostd__release_module(module(), 0);
  }
  hostd__release_drain();
  assert_int_equal(hostd__record_registered, reg);
  assert_int_equal(hostd_record_count(HOSTD_RECORD_MODULE_DEL), del + N);
  for (int i = 0; i < N; i++)
    assert_false(mapped(p[i]));
  /* The thread made its calls with the served context current. */
  assert_int_equal(hostd_record_count(HOSTD_RECORD_STALE), stale);
  hostd__release_stop();
}

static void stop_makes_what_is_queued(void **state) {
  enum { N = 200 };
  unsigned long del = hostd_record_count(HOSTD_RECORD_MODULE_DEL);
  uint64_t h[N];
  (void)state;
  for (int i = 0; i < N; i++)
    h[i] = module();
  assert_int_equal(hostd__release_start(), 0);
  for (int i = 0; i < N; i++)
    hostd__release_module(h[i], 0);
  hostd__release_stop();
  assert_int_equal(hostd_record_count(HOSTD_RECORD_MODULE_DEL), del + N);
  hostd__release_stop(); /* stopped already: nothing */
  hostd__release_module(module(), 0); /* after the stop: at once */
  assert_int_equal(hostd_record_count(HOSTD_RECORD_MODULE_DEL), del + N + 1);
}

static void a_refused_release_does_not_stop_the_next(void **state) {
  unsigned long del = hostd_record_count(HOSTD_RECORD_MODULE_DEL);
  void *p = registered_page();
  long reg = hostd__record_registered;
  (void)state;
  assert_int_equal(hostd__release_start(), 0);
  hostd__release_module(0x5eed0000u, 0); /* no such module: logged */
  hostd__release_host(p, 4096, true);
  hostd__release_drain();
  assert_int_equal(hostd__record_registered, reg - 1);
  assert_false(mapped(p));
  assert_int_equal(hostd_record_count(HOSTD_RECORD_MODULE_DEL), del + 1); /* counted, refused */
  hostd__release_stop();
}

static int setup(void **state) {
  (void)state;
  hostd__log_level = HOSTD_LOG_ERROR;
  return hostd__gpu.init(0, &hostd__snapshot) == CUDA_SUCCESS &&
                 hostd__gpu.thread_enter() == CUDA_SUCCESS
             ? 0
             : -1;
}

static int teardown(void **state) {
  (void)state;
  hostd__gpu.shutdown();
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(without_the_thread_a_release_is_made_at_once),
      cmocka_unit_test(the_thread_makes_them_and_drain_waits_for_them),
      cmocka_unit_test(stop_makes_what_is_queued),
      cmocka_unit_test(a_refused_release_does_not_stop_the_next),
  };
  return cmocka_run_group_tests_name("hostd-release", tests, setup, teardown);
}
