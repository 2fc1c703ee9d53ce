/* test-hostd-sched.c: tallyd's scheduler (hostd/sched.c) on the recording
 * device, on virtual time.
 *
 * The recording device runs a kernel when its stream reaches it, so what a
 * test reads back from device memory says in which order work ran.  The
 * policy sees a clock the test sets (hostd__sched_set_clock): "the LC tenant
 * was idle long enough" happens when the test says so, never by waiting.
 * The scheduler runs on its own thread, so a test waits for it to have
 * processed something by polling its counters (bounded: a liveness check,
 * not a timing one).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostd/gpu.h"
#include "hostd/hostd-int.h"
#include "hostd/sched.h"
#include "hostd/tenant-int.h" /* hostd__tenant_synced */

static _Atomic uint64_t vclock = 1000000000ull;
static uint64_t vnow(void) {
  return vclock;
}

static const char img[] = "TALLYREC\nkernel fill_u32 8,4,8\n";
static uint64_t fill; /* the fill_u32(ptr, value, count) kernel */

static int first_func(void *arg, const hostd_func_info_t *f) {
  *(uint64_t *)arg = f->handle;
  return 0;
}

/* Polls the scheduler's counters until pred holds; fails after 5 s. */
static void wait_stats(int (*pred)(const hostd_sched_stats_t *, uint64_t), uint64_t v) {
  hostd_sched_stats_t st;
  struct timespec ts = {0, 1000000};
  for (int i = 0; i < 5000; i++) {
    hostd__sched_stats(&st);
    if (pred(&st, v))
      return;
    nanosleep(&ts, NULL);
  }
  fail_msg("the scheduler did not get there within 5 s");
}
static int issued_at_least(const hostd_sched_stats_t *st, uint64_t v) {
  return st->issued >= v;
}
static int submitted_at_least(const hostd_sched_stats_t *st, uint64_t v) {
  return st->submitted >= v;
}
static int completed_at_least(const hostd_sched_stats_t *st, uint64_t v) {
  return st->completed >= v;
}

static int setup(void **state) {
  hostd_sched_config_t cfg;
  uint64_t mod;
  (void)state;
  if (hostd__gpu.init(0, &hostd__snapshot) != CUDA_SUCCESS ||
      hostd__gpu.thread_enter() != CUDA_SUCCESS)
    return -1;
  hostd__sched_set_clock(vnow);
  hostd__sched_config_init(&cfg);
  if (hostd__sched_parse_policy(&cfg, "tally") != 0 || hostd__sched_init(&cfg) != 0)
    return -1;
  if (hostd__gpu.module_load(&mod, 0, img, sizeof(img) - 1) != CUDA_SUCCESS ||
      hostd__gpu.module_functions(mod, 0, false, first_func, &fill) != CUDA_SUCCESS)
    return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  hostd__sched_shutdown();
  hostd__sched_set_clock(NULL);
  hostd__gpu.shutdown();
  return 0;
}

/* fill_u32's arguments: p, value (padded to 8), n. */
static void fill_args(uint8_t args[24], uint64_t p, uint32_t value, uint64_t n) {
  memcpy(args, &p, 8);
  memcpy(args + 8, &value, 4);
  memset(args + 12, 0, 4);
  memcpy(args + 16, &n, 8);
}

static CUresult launch_fill(hostd_sched_stream_t *ss, uint64_t p, uint32_t value, uint64_t n) {
  uint8_t args[24];
  hostd_sched_launch_t l = {.f = fill, .kernel_id = 42, .grid = {1, 1, 1}, .block = {32, 1, 1},
                            .args = args, .argbytes = sizeof(args)};
  fill_args(args, p, value, n);
  return hostd__sched_launch(ss, &l);
}

static uint32_t read_u32(uint64_t p, uint64_t s) {
  uint32_t v = 0;
  assert_int_equal(hostd__gpu.dtoh(&v, p, 4, s), CUDA_SUCCESS);
  return v;
}

/* A BE launch goes through the queue; a copy after it on the same stream,
 * fenced, runs after the kernel; a copy before it, before. */
static void held_launch_keeps_stream_order(void **state) {
  hostd_sched_tenant_t *t = hostd__sched_tenant_new(1, "be", 1, 1);
  uint64_t s, p;
  uint32_t nine = 9, five = 5;
  hostd_sched_stream_t *ss;
  CUresult r;
  hostd_sched_stats_t st0;
  (void)state;
  assert_non_null(t);
  hostd__sched_stats(&st0);
  assert_int_equal(hostd__gpu.stream_new(&s, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.mem_alloc(&p, 64), CUDA_SUCCESS);
  assert_non_null(ss = hostd__sched_stream_new(t, s, &r));
  assert_int_equal(hostd__gpu.htod(p + 4, &five, 4, s, 1), CUDA_SUCCESS); /* before: overwritten */
  assert_int_equal(launch_fill(ss, p, 7, 16), CUDA_SUCCESS);
  assert_int_equal(hostd__sched_fence(ss), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.htod(p, &nine, 4, s, 1), CUDA_SUCCESS); /* after the kernel */
  assert_int_equal(hostd__gpu.stream_sync(s), CUDA_SUCCESS);
  assert_int_equal(read_u32(p, s), 9);
  assert_int_equal(read_u32(p + 4, s), 7);
  assert_int_equal(read_u32(p + 60, s), 7);
  hostd_sched_stats_t st;
  hostd__sched_stats(&st);
  assert_int_equal(st.held, st0.held + 1);
  assert_int_equal(st.issued, st0.issued + 1);
  assert_true(st.fences >= st0.fences + 1);
  hostd__sched_tenant_close(t);
  hostd__sched_tenant_free(t);
  assert_int_equal(hostd__gpu.stream_del(s), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.mem_free(p), CUDA_SUCCESS);
}

/* BE launches of one kernel: while its profile still needs samples every
 * launch is timed, then about 1 in time_every (16); each completes either
 * way.  Before, every BE launch took two timing events. */
static void be_launches_of_a_profiled_kernel_are_timed_by_sample(void **state) {
  enum { N = 400 };
  hostd_sched_tenant_t *t = hostd__sched_tenant_new(60, "be", 1, 1);
  hostd_sched_stats_t st0, st;
  hostd_sched_stream_t *ss;
  uint64_t s, p;
  CUresult r;
  (void)state;
  assert_non_null(t);
  assert_int_equal(hostd__gpu.stream_new(&s, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.mem_alloc(&p, 64), CUDA_SUCCESS);
  assert_non_null(ss = hostd__sched_stream_new(t, s, &r));
  hostd__sched_stats(&st0);
  for (uint32_t i = 0; i < N; i++)
    assert_int_equal(launch_fill(ss, p, i, 1), CUDA_SUCCESS);
  assert_int_equal(hostd__sched_fence(ss), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(s), CUDA_SUCCESS);
  assert_int_equal(read_u32(p, s), N - 1);
  wait_stats(completed_at_least, st0.completed + N);
  hostd__sched_stats(&st);
  assert_int_equal(st.issued - st0.issued, N);
  assert_true(st.timed - st0.timed >= 1);
  assert_true(st.timed - st0.timed <= N / 4); /* expected about 5 + N / 16 */
  hostd__sched_tenant_close(t);
  hostd__sched_tenant_free(t);
  assert_int_equal(hostd__gpu.stream_del(s), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.mem_free(p), CUDA_SUCCESS);
}

/* An LC and a BE tenant, a stream each, and 64 bytes of device memory. */
typedef struct pair {
  hostd_sched_tenant_t *lc, *be;
  uint64_t ls, bs, p;
  hostd_sched_stream_t *lss, *bss;
} pair_t;

static void pair_open(pair_t *x, uint32_t id) {
  CUresult r;
  assert_non_null(x->lc = hostd__sched_tenant_new(id, "lc", 0, 1));
  assert_non_null(x->be = hostd__sched_tenant_new(id + 1, "be", 1, 1));
  assert_int_equal(hostd__gpu.stream_new(&x->ls, CU_STREAM_NON_BLOCKING, -5), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_new(&x->bs, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.mem_alloc(&x->p, 64), CUDA_SUCCESS);
  assert_non_null(x->lss = hostd__sched_stream_new(x->lc, x->ls, &r));
  assert_non_null(x->bss = hostd__sched_stream_new(x->be, x->bs, &r));
}

/* Closes what is left open (a NULL tenant was closed by the test). */
static void pair_close(pair_t *x) {
  hostd_sched_tenant_t *t[2] = {x->lc, x->be};
  for (int i = 0; i < 2; i++) {
    hostd__sched_tenant_close(t[i]);
    hostd__sched_tenant_free(t[i]);
  }
  assert_int_equal(hostd__gpu.stream_del(x->ls), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_del(x->bs), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.mem_free(x->p), CUDA_SUCCESS);
}

/* The LC tenant ran one kernel and its completion was seen: it is active
 * until the clock passes the resume time, so a BE launch now is held. */
static void lc_ran_once(pair_t *x, const hostd_sched_stats_t *st0) {
  assert_int_equal(launch_fill(x->lss, x->p, 1, 1), CUDA_SUCCESS);
  hostd__sched_tenant_quiet(x->lc);
  wait_stats(completed_at_least, st0->completed + 1);
}

/* While the LC tenant is active (it completed a kernel less than the resume
 * time ago), a BE launch stays held in tallyd; when the LC has been idle for
 * the resume time, it goes. */
static void be_waits_while_lc_active_and_goes_when_idle(void **state) {
  hostd_sched_stats_t st0, st;
  pol_config_t pc;
  pair_t x;
  (void)state;
  pol_config_init(&pc);
  pair_open(&x, 2);
  hostd__sched_stats(&st0);
  /* The LC launch runs at once (fast path); its worker's quiet point
   * records the event through which its completion is seen. */
  assert_int_equal(launch_fill(x.lss, x.p, 1, 1), CUDA_SUCCESS);
  assert_int_equal(read_u32(x.p, x.ls), 1);
  hostd__sched_tenant_quiet(x.lc);
  wait_stats(completed_at_least, st0.completed + 1);
  /* Now BE: submitted, but held while the clock stands still. */
  assert_int_equal(launch_fill(x.bss, x.p + 32, 2, 1), CUDA_SUCCESS);
  wait_stats(submitted_at_least, st0.submitted + 2);
  hostd__sched_stats(&st);
  assert_int_equal(st.issued, st0.issued);
  assert_int_equal(read_u32(x.p + 32, x.bs), 0);
  /* The LC has been idle past the resume time: BE goes. */
  vclock += pc.resume_idle_ns + 1000;
  wait_stats(issued_at_least, st0.issued + 1);
  assert_int_equal(hostd__sched_fence(x.bss), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(x.bs), CUDA_SUCCESS);
  assert_int_equal(read_u32(x.p + 32, x.bs), 2);
  pair_close(&x);
}

/* A fence on a stream whose launch is held blocks its worker until the
 * scheduler issues the launch; such fences are counted, with their time. */
static void *fence_thread(void *arg) {
  pair_t *x = arg;
  CUresult r = hostd__gpu.thread_enter(); /* a worker's thread, as in tallyd */
  hostd__cur_op = CALL_OP_LAUNCH; /* any request: what the exit line names */
  if (r == CUDA_SUCCESS)
    r = hostd__sched_fence(x->bss);
  return (void *)(intptr_t)r;
}

static void blocking_fence_is_counted_with_its_time(void **state) {
  hostd_sched_stats_t st0, st;
  pol_config_t pc;
  pthread_t th;
  void *rv;
  pair_t x;
  (void)state;
  pol_config_init(&pc);
  pair_open(&x, 40);
  hostd__sched_stats(&st0);
  lc_ran_once(&x, &st0);
  assert_int_equal(launch_fill(x.bss, x.p + 32, 2, 1), CUDA_SUCCESS); /* held */
  wait_stats(submitted_at_least, st0.submitted + 2);
  assert_int_equal(pthread_create(&th, NULL, fence_thread, &x), 0);
  usleep(20000); /* the fence waits for the held launch */
  hostd__sched_stats(&st);
  assert_int_equal(st.fences_blocked, st0.fences_blocked);
  vclock += pc.resume_idle_ns + 1000;
  assert_int_equal(pthread_join(th, &rv), 0);
  assert_int_equal((intptr_t)rv, CUDA_SUCCESS);
  hostd__sched_stats(&st);
  assert_int_equal(st.fences_blocked, st0.fences_blocked + 1);
  assert_true(st.fence_block_ns - st0.fence_block_ns >= 10000000u);
  /* The scheduler had issued it: a second fence does not block. */
  assert_int_equal(hostd__sched_fence(x.bss), CUDA_SUCCESS);
  hostd__sched_stats(&st);
  assert_int_equal(st.fences_blocked, st0.fences_blocked + 1);
  assert_int_equal(hostd__gpu.stream_sync(x.bs), CUDA_SUCCESS);
  assert_int_equal(read_u32(x.p + 32, x.bs), 2);
  pair_close(&x);
}

/* A memset behind a held launch is queued, not fenced: the call returns
 * while the launch is held, nothing blocks, and once the policy releases
 * them both run in stream order (the memset after the kernel). */
static void memset_behind_held_launch_is_queued_in_order(void **state) {
  hostd_sched_stats_t st0, st;
  pol_config_t pc;
  pair_t x;
  hostd_sched_launch_t ms = {.kernel_id = 77, .grid = {1, 1, 1}, .block = {1, 1, 1}};
  (void)state;
  pol_config_init(&pc);
  pair_open(&x, 44);
  hostd__sched_stats(&st0);
  lc_ran_once(&x, &st0);
  assert_int_equal(launch_fill(x.bss, x.p + 32, 7, 8), CUDA_SUCCESS); /* held: 32..63 = 7 */
  ms.memset.dst = x.p + 32;
  ms.memset.count = 2;
  ms.memset.value = 0x0909;
  ms.memset.elem = 2; /* 32..35 = 0x09090909 */
  assert_int_equal(hostd__sched_launch(x.bss, &ms), CUDA_SUCCESS);
  wait_stats(submitted_at_least, st0.submitted + 3);
  hostd__sched_stats(&st);
  assert_int_equal(st.issued, st0.issued);
  assert_int_equal(st.fences_blocked, st0.fences_blocked);
  assert_int_equal(read_u32(x.p + 32, x.bs), 0); /* neither ran */
  vclock += pc.resume_idle_ns + 1000;
  wait_stats(issued_at_least, st0.issued + 2);
  assert_int_equal(hostd__sched_fence(x.bss), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(x.bs), CUDA_SUCCESS);
  assert_int_equal(read_u32(x.p + 32, x.bs), 0x09090909);
  assert_int_equal(read_u32(x.p + 36, x.bs), 7);
  assert_int_equal(read_u32(x.p + 60, x.bs), 7);
  pair_close(&x);
}

/* A tenant that goes while its launches are held: they are dropped (never
 * run), its fences do not wait, and a new LC tenant can join afterwards. */
static void closing_drops_held_launches(void **state) {
  hostd_sched_stats_t st0, st;
  hostd_sched_tenant_t *lc;
  pair_t x;
  (void)state;
  pair_open(&x, 4);
  hostd__sched_stats(&st0);
  lc_ran_once(&x, &st0);
  for (uint32_t i = 0; i < 3; i++)
    assert_int_equal(launch_fill(x.bss, x.p + 32, 3 + i, 1), CUDA_SUCCESS);
  wait_stats(submitted_at_least, st0.submitted + 4);
  hostd__sched_tenant_close(x.be);
  hostd__sched_stats(&st);
  assert_int_equal(st.dropped, st0.dropped + 3);
  assert_int_equal(st.issued, st0.issued);
  assert_int_equal(hostd__sched_fence(x.bss), CUDA_SUCCESS); /* nothing left to wait for */
  assert_int_equal(read_u32(x.p + 32, x.bs), 0);              /* none of them ran */
  hostd__sched_tenant_free(x.be);
  x.be = NULL;
  hostd__sched_tenant_close(x.lc);
  hostd__sched_tenant_free(x.lc);
  x.lc = NULL;
  /* The LC slot is free again. */
  assert_non_null(lc = hostd__sched_tenant_new(6, "lc2", 0, 1));
  hostd__sched_tenant_close(lc);
  hostd__sched_tenant_free(lc);
  pair_close(&x);
}

/* A second latency-critical tenant is refused by the policy: NULL, and its
 * launches go straight to the GPU (the caller's fallback). */
static void second_lc_tenant_is_refused(void **state) {
  hostd_sched_tenant_t *a = hostd__sched_tenant_new(7, "lc", 0, 1);
  (void)state;
  assert_non_null(a);
  assert_null(hostd__sched_tenant_new(8, "lc-too", 0, 1));
  hostd__sched_tenant_close(a);
  hostd__sched_tenant_free(a);
}

/* The scheduler restarted with --be-sms 20, and BE tenant 9 with a stream s
 * (scheduled as *ss) and 64 bytes of device memory p. */
static hostd_sched_tenant_t *partition_tenant(uint64_t *s, uint64_t *p, hostd_sched_stream_t **ss) {
  hostd_sched_config_t cfg;
  hostd_sched_tenant_t *t;
  CUresult r;
  hostd__sched_shutdown();
  hostd__sched_config_init(&cfg);
  assert_int_equal(hostd__sched_parse_policy(&cfg, "tally"), 0);
  cfg.be_sms = 20;
  assert_int_equal(hostd__sched_init(&cfg), 0);
  assert_non_null(t = hostd__sched_tenant_new(9, "be", 1, 1));
  assert_int_equal(hostd__gpu.stream_new(s, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.mem_alloc(p, 64), CUDA_SUCCESS);
  assert_non_null(*ss = hostd__sched_stream_new(t, *s, &r));
  return t;
}

/* With --be-sms, a BE tenant's launch stream is in the partition (the
 * recording device rounds to 8 SMs, as Hopper does), and order still holds. */
static void be_launches_run_in_the_partition(void **state) {
  hostd_sched_tenant_t *t;
  hostd_sched_stream_t *ss;
  uint64_t s, p;
  uint32_t nine = 9;
  (void)state;
  hostd__record_part_sms = 0;
  t = partition_tenant(&s, &p, &ss);
  assert_int_equal(hostd__record_part_sms, 24);
  assert_int_equal(launch_fill(ss, p, 7, 16), CUDA_SUCCESS);
  assert_int_equal(hostd__sched_fence(ss), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.htod(p, &nine, 4, s, 1), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(s), CUDA_SUCCESS);
  assert_int_equal(read_u32(p, s), 9);
  assert_int_equal(read_u32(p + 4, s), 7);
  hostd__sched_tenant_close(t);
  hostd__sched_tenant_free(t);
  assert_int_equal(hostd__gpu.stream_del(s), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.mem_free(p), CUDA_SUCCESS);
}

/* A quiet point is due after any direct work on an LC stream (a memset as
 * much as a kernel) and not after it ran: the worker's state says so. */
static void quiet_due_follows_direct_work(void **state) {
  hostd_sched_launch_t ms = {.grid = {1, 1, 1}, .block = {1, 1, 1},
                             .memset = {.count = 4, .value = 5, .elem = 4}};
  pair_t x;
  (void)state;
  pair_open(&x, 19);
  assert_false(hostd__sched_tenant_quiet_due(x.lc));
  assert_false(hostd__sched_tenant_quiet_due(NULL));
  ms.memset.dst = x.p;
  assert_int_equal(hostd__sched_launch(x.lss, &ms), CUDA_SUCCESS);
  assert_true(hostd__sched_tenant_quiet_due(x.lc));
  hostd__sched_tenant_quiet(x.lc);
  assert_false(hostd__sched_tenant_quiet_due(x.lc));
  assert_int_equal(read_u32(x.p, x.ls), 5);
  assert_int_equal(launch_fill(x.lss, x.p, 6, 1), CUDA_SUCCESS);
  assert_true(hostd__sched_tenant_quiet_due(x.lc));
  hostd__sched_tenant_quiet(x.lc);
  assert_false(hostd__sched_tenant_quiet_due(x.lc));
  pair_close(&x);
}

/* LC launches run at once and nothing records behind them until a quiet
 * point of their worker: a flush (what a free or a capture does first)
 * returns without a record, since the scheduler never touches the stream;
 * the quiet point then records one event for all of them, on this thread,
 * through which the burst's completion is seen. */
static void flush_waits_for_direct_launches(void **state) {
  enum { N = 2000 };
  hostd_sched_stats_t st0, st;
  unsigned long recs0;
  pair_t x;
  (void)state;
  pair_open(&x, 11);
  hostd__sched_stats(&st0);
  recs0 = hostd_record_stream_records(x.ls, false);
  for (uint32_t i = 0; i < N; i++)
    assert_int_equal(launch_fill(x.lss, x.p, i, 1), CUDA_SUCCESS);
  assert_int_equal(hostd__sched_tenant_flush(x.lc), CUDA_SUCCESS);
  hostd__sched_stats(&st);
  assert_int_equal(st.lc_launches, st0.lc_launches + N);
  assert_int_equal(st.submitted, st0.submitted + 1);
  assert_int_equal(st.lc_events, st0.lc_events);
  assert_int_equal(st.completed, st0.completed);
  hostd__sched_tenant_quiet(x.lc);
  hostd__sched_tenant_quiet(x.lc); /* nothing moved since: no second record */
  wait_stats(completed_at_least, st0.completed + 1);
  hostd__sched_stats(&st);
  assert_int_equal(st.lc_events, st0.lc_events + 1);
  assert_int_equal(hostd_record_stream_records(x.ls, false), recs0 + 1);
  assert_int_equal(hostd_record_stream_records(x.ls, true), recs0 + 1); /* all by this thread */
  assert_int_equal(read_u32(x.p, x.ls), N - 1);
  pair_close(&x);
}

/* A synchronisation of an LC stream shows its launches done: nothing is
 * recorded before it (hostd__sched_fence_sync), and after it the flight
 * ends without an event (hostd__sched_synced); the quiet point after it
 * records nothing either. */
static void lc_sync_ends_burst_without_event(void **state) {
  hostd_sched_stats_t st0, st;
  unsigned long recs0;
  pol_config_t pc;
  pair_t x;
  (void)state;
  pol_config_init(&pc);
  pair_open(&x, 17);
  hostd__sched_stats(&st0);
  recs0 = hostd_record_stream_records(x.ls, false);
  for (uint32_t i = 0; i < 8; i++)
    assert_int_equal(launch_fill(x.lss, x.p, i + 1, 1), CUDA_SUCCESS);
  assert_int_equal(hostd__sched_fence_sync(x.lss), CUDA_SUCCESS);
  assert_int_equal(hostd_record_stream_records(x.ls, false), recs0);
  assert_int_equal(hostd__gpu.stream_sync(x.ls), CUDA_SUCCESS);
  hostd__sched_synced(x.lss);
  hostd__sched_tenant_quiet(x.lc);
  wait_stats(completed_at_least, st0.completed + 1);
  hostd__sched_stats(&st);
  assert_int_equal(st.lc_launches, st0.lc_launches + 8);
  assert_int_equal(st.submitted, st0.submitted + 1);
  assert_int_equal(st.lc_events, st0.lc_events);
  assert_int_equal(hostd_record_stream_records(x.ls, false), recs0);
  assert_int_equal(read_u32(x.p, x.ls), 8);
  /* A BE stream's fence_sync is its fence: the launch is issued first
   * (the LC idle for the resume time). */
  vclock += pc.resume_idle_ns + 1000;
  assert_int_equal(launch_fill(x.bss, x.p + 32, 2, 1), CUDA_SUCCESS);
  assert_int_equal(hostd__sched_fence_sync(x.bss), CUDA_SUCCESS);
  hostd__sched_stats(&st);
  assert_int_equal(st.issued, st0.issued + 1);
  assert_int_equal(hostd__gpu.stream_sync(x.bs), CUDA_SUCCESS);
  hostd__sched_synced(x.bss); /* nothing to say for a BE stream */
  assert_int_equal(read_u32(x.p + 32, x.bs), 2);
  pair_close(&x);
}

/* A synchronisation's notice waits for its reply (hostd__tenant_synced),
 * and is given once when the worker says the reply went out
 * (hostd__tenant_replied), or at once when another stream's notice comes
 * first: either way the flight then ends without an event, as when it was
 * given inside the request. */
static void sync_notice_is_given_after_the_reply(void **state) {
  hostd_sched_stats_t st0, st;
  hostd_tenant_t t; /* only its notice field is used: lost = 0 (CUDA_SUCCESS) */
  pair_t x;
  (void)state;
  memset(&t, 0, sizeof(t));
  pair_open(&x, 19);
  hostd__sched_stats(&st0);
  for (uint32_t i = 0; i < 4; i++)
    assert_int_equal(launch_fill(x.lss, x.p, i + 1, 1), CUDA_SUCCESS);
  assert_int_equal(hostd__sched_fence_sync(x.lss), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(x.ls), CUDA_SUCCESS);
  hostd__tenant_synced(&t, x.lss);
  assert_ptr_equal(t.synced, x.lss); /* kept: the reply goes first */
  hostd__tenant_replied(&t);
  assert_null(t.synced);
  hostd__tenant_replied(&t); /* given once */
  hostd__sched_tenant_quiet(x.lc);
  wait_stats(completed_at_least, st0.completed + 1);
  hostd__sched_stats(&st);
  assert_int_equal(st.lc_events, st0.lc_events); /* the notice ended the flight */
  /* A second notice before the reply gives the pending one at once. */
  hostd__sched_stats(&st0);
  assert_int_equal(launch_fill(x.lss, x.p, 9, 1), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(x.ls), CUDA_SUCCESS);
  hostd__tenant_synced(&t, x.lss);
  hostd__tenant_synced(&t, x.bss); /* another stream: x.lss's notice goes now */
  assert_ptr_equal(t.synced, x.bss);
  hostd__sched_tenant_quiet(x.lc);
  wait_stats(completed_at_least, st0.completed + 1);
  hostd__sched_stats(&st);
  assert_int_equal(st.lc_events, st0.lc_events);
  hostd__tenant_replied(&t); /* a BE stream's notice says nothing */
  assert_int_equal(read_u32(x.p, x.ls), 9);
  pair_close(&x);
}

/* With no BE work queued, an LC launch's submission reaches the scheduler
 * by the worker's quiet point at the latest; with a BE launch held, the next
 * LC burst's launch wakes it at once (no quiet point needed).  Whether the
 * first launch alone woke it depends on whether the thread was asleep, so
 * that is not asserted. */
static void lc_launch_wakes_scheduler_only_for_be_work(void **state) {
  pol_config_t pc;
  hostd_sched_stats_t st0;
  pair_t x;
  (void)state;
  pol_config_init(&pc);
  pair_open(&x, 18);
  hostd__sched_stats(&st0);
  assert_int_equal(launch_fill(x.lss, x.p, 1, 1), CUDA_SUCCESS);
  hostd__sched_tenant_quiet(x.lc);
  wait_stats(completed_at_least, st0.completed + 1);
  assert_int_equal(launch_fill(x.bss, x.p + 32, 2, 1), CUDA_SUCCESS); /* held: LC active */
  wait_stats(submitted_at_least, st0.submitted + 2);
  assert_int_equal(launch_fill(x.lss, x.p, 3, 1), CUDA_SUCCESS);
  wait_stats(submitted_at_least, st0.submitted + 3); /* no quiet point needed */
  hostd__sched_tenant_quiet(x.lc);
  wait_stats(completed_at_least, st0.completed + 2);
  vclock += pc.resume_idle_ns + 1000;
  wait_stats(issued_at_least, st0.issued + 1);
  assert_int_equal(hostd__sched_fence(x.bss), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(x.bs), CUDA_SUCCESS);
  assert_int_equal(read_u32(x.p + 32, x.bs), 2);
  pair_close(&x);
}

/* Reads the whole file at path into buf (NUL-terminated). */
static void slurp(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t n = fread(buf, 1, cap - 1, f);
  buf[n] = 0;
  fclose(f);
}

/* A launch whose shape the policy refuses (2048 threads a block) is
 * answered at the call: queued, it would never be issued and the stream's
 * fence would wait for it forever.  Launches the scheduler issues and the
 * device refuses (a function it does not know): the tenant's flush returns
 * the error, and tallyd's log has one warning for the tenant that names the
 * kernel, its shape and the driver's result; the second failure is a debug
 * line, not a second warning. */
/* Tallyd's log lines at INFO and above, from log_begin to log_end, into
 * buf (stderr is a temporary file meanwhile). */
typedef struct log_cap {
  char path[32];
  int fd, saved;
  hostd_log_level_t level;
} log_cap_t;

static void log_begin(log_cap_t *c) {
  snprintf(c->path, sizeof(c->path), "/tmp/tally-sched-log-XXXXXX");
  assert_true((c->fd = mkstemp(c->path)) >= 0);
  fflush(stderr);
  assert_true((c->saved = dup(2)) >= 0);
  assert_true(dup2(c->fd, 2) >= 0);
  c->level = hostd__log_level;
  hostd__log_level = HOSTD_LOG_INFO;
}

static void log_end(log_cap_t *c, char *buf, size_t cap) {
  fflush(stderr);
  assert_true(dup2(c->saved, 2) >= 0);
  close(c->saved);
  hostd__log_level = c->level;
  slurp(c->path, buf, cap);
  close(c->fd);
  unlink(c->path);
}

/* At shutdown tallyd's log says how the policy chose: here one BE launch
 * of a kernel not yet profiled, beside an idle LC tenant. */
static void shutdown_line_says_how_the_policy_chose(void **state) {
  hostd_sched_config_t cfg;
  hostd_sched_stats_t st0;
  log_cap_t cap;
  char buf[8192];
  pair_t x;
  (void)state;
  hostd__sched_shutdown(); /* a scheduler of its own: the policy's counts start at 0 */
  hostd__sched_config_init(&cfg);
  assert_int_equal(hostd__sched_parse_policy(&cfg, "tally"), 0);
  assert_int_equal(hostd__sched_init(&cfg), 0);
  pair_open(&x, 60);
  hostd__sched_stats(&st0);
  assert_int_equal(launch_fill(x.bss, x.p, 3, 2), CUDA_SUCCESS);
  wait_stats(completed_at_least, st0.completed + 1);
  assert_int_equal(hostd__sched_fence(x.bss), CUDA_SUCCESS);
  pair_close(&x);
  log_begin(&cap);
  hostd__sched_shutdown();
  log_end(&cap, buf, sizeof(buf));
  assert_non_null(strstr(buf, "scheduler: policy: 1 launches, 1 of kernels not yet profiled, 0 "
                              "fallbacks (no form fit the threshold), 0 profiles reset for drift"));
  hostd__sched_config_init(&cfg);
  assert_int_equal(hostd__sched_parse_policy(&cfg, "tally"), 0);
  assert_int_equal(hostd__sched_init(&cfg), 0);
}

static void refused_launches_are_answered_and_named_once(void **state) {
  hostd_sched_tenant_t *t = hostd__sched_tenant_new(77, "be", 1, 1);
  uint8_t args[24] = {0};
  hostd_sched_launch_t l = {.f = fill, .kernel_id = 0x4242, .grid = {2, 1, 1},
                            .block = {2048, 1, 1}, .args = args, .argbytes = sizeof(args)};
  log_cap_t cap;
  char buf[4096];
  const char *want = "tallyd warn: tenant 77: a launch of kernel 0000000000004242 (grid 2,1,1, "
                     "block 64,1,1, 0 bytes of shared memory) failed at the call: "
                     "CUDA_ERROR_INVALID_HANDLE (400); its next synchronising call returns it";
  hostd_sched_stats_t st0, st;
  hostd_sched_stream_t *ss;
  uint64_t s;
  CUresult r;
  (void)state;
  assert_non_null(t);
  assert_int_equal(hostd__gpu.stream_new(&s, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  assert_non_null(ss = hostd__sched_stream_new(t, s, &r));
  hostd__sched_stats(&st0);
  assert_int_equal(hostd__sched_launch(ss, &l), CUDA_ERROR_INVALID_VALUE);
  l.block[0] = 1025;
  assert_int_equal(hostd__sched_launch(ss, &l), CUDA_ERROR_INVALID_VALUE);
  hostd__sched_stats(&st);
  assert_int_equal(st.submitted, st0.submitted); /* nothing queued */
  assert_int_equal(hostd__sched_fence(ss), CUDA_SUCCESS);
  l.block[0] = 64;
  l.f = fill + 0x10000; /* no such function */
  log_begin(&cap);
  assert_int_equal(hostd__sched_launch(ss, &l), CUDA_SUCCESS);
  assert_int_equal(hostd__sched_launch(ss, &l), CUDA_SUCCESS);
  assert_int_equal(hostd__sched_fence(ss), CUDA_SUCCESS);
  r = hostd__sched_tenant_flush(t);
  log_end(&cap, buf, sizeof(buf));
  assert_int_equal(r, CUDA_ERROR_INVALID_HANDLE);
  assert_non_null(strstr(buf, want));
  assert_null(strstr(strstr(buf, want) + strlen(want), "tenant 77:")); /* one for two */
  hostd__sched_tenant_close(t);
  hostd__sched_tenant_free(t);
  assert_int_equal(hostd__gpu.stream_del(s), CUDA_SUCCESS);
}

/* A launch the partition refuses (a cluster its SMs cannot co-schedule)
 * runs on the whole GPU in the launch stream's order, is no error for the
 * tenant, and is logged once. */
static void launches_the_partition_refuses_run_whole(void **state) {
  hostd_sched_tenant_t *t;
  hostd_sched_stream_t *ss;
  hostd_sched_stats_t st0, st;
  log_cap_t cap;
  CUlaunchAttribute cl = {.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION};
  uint8_t args[24];
  hostd_sched_launch_t l = {.f = fill, .kernel_id = 0x77, .grid = {2, 1, 1}, .block = {32, 1, 1},
                            .args = args, .argbytes = sizeof(args), .attrs = &cl, .nattr = 1};
  char buf[4096];
  const char *want = "tenant 9: a launch of kernel 0000000000000077 (grid 2,1,1, block 32,1,1, 0 "
                     "bytes of shared memory) cannot run on the best-effort partition of 24 SMs: "
                     "it runs on the whole GPU";
  uint64_t s, p, n = 8;
  uint32_t eight = 8;
  unsigned long streams, dels;
  CUresult r;
  (void)state;
  hostd__record_part_cluster_max = 1;
  t = partition_tenant(&s, &p, &ss);
  hostd__sched_stats(&st0);
  streams = hostd_record_count(HOSTD_RECORD_STREAM);
  fill_args(args, p, eight, n);
  cl.value.clusterDim.x = 2;
  cl.value.clusterDim.y = cl.value.clusterDim.z = 1;
  log_begin(&cap);
  assert_int_equal(launch_fill(ss, p, 7, 16), CUDA_SUCCESS); /* all 16 words */
  assert_int_equal(hostd__sched_launch(ss, &l), CUDA_SUCCESS); /* the first 8, whole GPU */
  assert_int_equal(hostd__sched_launch(ss, &l), CUDA_SUCCESS); /* again: logged once */
  assert_int_equal(launch_fill(ss, p, 9, 4), CUDA_SUCCESS);    /* the first 4 */
  assert_int_equal(hostd__sched_fence(ss), CUDA_SUCCESS);
  r = hostd__sched_tenant_flush(t);
  log_end(&cap, buf, sizeof(buf));
  hostd__record_part_cluster_max = 0;
  assert_int_equal(r, CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(s), CUDA_SUCCESS);
  assert_int_equal(read_u32(p, s), 9);
  assert_int_equal(read_u32(p + 12, s), 9);
  assert_int_equal(read_u32(p + 16, s), 8);
  assert_int_equal(read_u32(p + 28, s), 8);
  assert_int_equal(read_u32(p + 32, s), 7);
  assert_int_equal(read_u32(p + 60, s), 7);
  hostd__sched_stats(&st);
  assert_int_equal(st.whole, st0.whole + 2);
  assert_non_null(strstr(buf, want));
  assert_null(strstr(strstr(buf, want) + strlen(want), "tenant 9:"));
  /* The whole-GPU stream was made once and goes with the tenant's stream. */
  assert_int_equal(hostd_record_count(HOSTD_RECORD_STREAM), streams + 1);
  dels = hostd_record_count(HOSTD_RECORD_STREAM_DEL);
  hostd__sched_tenant_close(t);
  hostd__sched_tenant_free(t);
  assert_int_equal(hostd_record_count(HOSTD_RECORD_STREAM_DEL), dels + 2);
  assert_int_equal(hostd__gpu.stream_del(s), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.mem_free(p), CUDA_SUCCESS);
}

/* A BE launch of kernel 0x78 with clusters of 2 (value into x->p + 48). */
static CUresult launch_cluster(pair_t *x, uint32_t value) {
  CUlaunchAttribute cl = {.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION};
  uint8_t args[24];
  hostd_sched_launch_t l = {.f = fill, .kernel_id = 0x78, .grid = {2, 1, 1}, .block = {32, 1, 1},
                            .args = args, .argbytes = sizeof(args), .attrs = &cl, .nattr = 1};
  fill_args(args, x->p + 48, value, 1);
  cl.value.clusterDim.x = 2;
  cl.value.clusterDim.y = cl.value.clusterDim.z = 1;
  return hostd__sched_launch(x->bss, &l);
}

/* --be-sms-hold 0: the partition is made at start and the policy does not
 * hold the BE for the LC (a BE launch goes while the LC is active); without
 * --be-sms the option is refused.  A kernel the partition refused once runs
 * on the whole GPU, so its next launch waits while the LC is active and
 * goes when the LC's idle window has passed. */
static void be_sms_hold_0_runs_be_beside_an_active_lc(void **state) {
  hostd_sched_config_t cfg;
  hostd_sched_stats_t st0, st1, st;
  pol_config_t pc;
  pair_t x;
  (void)state;
  pol_config_init(&pc);
  hostd__sched_shutdown();
  hostd__sched_config_init(&cfg);
  assert_true(cfg.be_sms_hold);
  assert_int_equal(hostd__sched_parse_policy(&cfg, "tally"), 0);
  cfg.be_sms_hold = false;
  assert_int_equal(hostd__sched_init(&cfg), -EINVAL); /* no --be-sms */
  cfg.be_sms = 20;
  hostd__record_part_sms = 0;
  assert_int_equal(hostd__sched_init(&cfg), 0);
  assert_int_equal(hostd__record_part_sms, 24); /* made at start */
  pair_open(&x, 30);
  hostd__sched_stats(&st0);
  lc_ran_once(&x, &st0); /* the LC is active until the resume time passes */
  assert_int_equal(launch_fill(x.bss, x.p + 32, 5, 1), CUDA_SUCCESS);
  wait_stats(issued_at_least, st0.issued + 1); /* not held: the clock never moved */
  assert_int_equal(hostd__sched_fence(x.bss), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(x.bs), CUDA_SUCCESS);
  assert_int_equal(read_u32(x.p + 32, x.bs), 5);
  hostd__record_part_cluster_max = 1;
  hostd__sched_stats(&st0);
  assert_int_equal(launch_cluster(&x, 6), CUDA_SUCCESS); /* not known yet: goes, whole GPU */
  wait_stats(completed_at_least, st0.completed + 1);
  hostd__sched_stats(&st1);
  assert_int_equal(st1.whole, st0.whole + 1);
  lc_ran_once(&x, &st1);
  assert_int_equal(launch_cluster(&x, 7), CUDA_SUCCESS);
  wait_stats(submitted_at_least, st1.submitted + 2);
  hostd__sched_stats(&st);
  assert_int_equal(st.issued, st1.issued); /* held while the LC is active */
  vclock += pc.resume_idle_ns + 1000;
  wait_stats(issued_at_least, st1.issued + 1);
  assert_int_equal(hostd__sched_fence(x.bss), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(x.bs), CUDA_SUCCESS);
  hostd__record_part_cluster_max = 0;
  assert_int_equal(read_u32(x.p + 48, x.bs), 7);
  hostd__sched_stats(&st);
  assert_int_equal(st.whole, st0.whole + 2);
  pair_close(&x);
  hostd__sched_shutdown();
  hostd__sched_config_init(&cfg);
  assert_int_equal(hostd__sched_parse_policy(&cfg, "tally"), 0);
  assert_int_equal(hostd__sched_init(&cfg), 0);
}

/* --trace: a burst of three LC launches (direct: held=0), one line that
 * names its first kernel and counts them (launches=3), a BE launch the
 * policy holds while the LC is active (held=1), one it issues at once when
 * the LC is idle (held=0); each kernel named once, the name cleaned. */
static void trace_says_held_and_names_kernels(void **state) {
  hostd_sched_config_t cfg;
  hostd_sched_stats_t st0;
  pol_config_t pc;
  char path[] = "/tmp/tally-sched-trace-XXXXXX", text[4096];
  int fd = mkstemp(path);
  pair_t x;
  (void)state;
  assert_true(fd >= 0);
  close(fd);
  pol_config_init(&pc);
  hostd__sched_shutdown();
  hostd__sched_config_init(&cfg);
  assert_int_equal(hostd__sched_parse_policy(&cfg, "tally"), 0);
  snprintf(cfg.trace, sizeof(cfg.trace), "%s", path);
  assert_int_equal(hostd__sched_init(&cfg), 0);
  hostd__sched_trace_kernel(42, "fill_u32");
  hostd__sched_trace_kernel(42, "fill_u32");
  hostd__sched_trace_kernel(43, "bad name\n# injected");
  pair_open(&x, 20);
  hostd__sched_stats(&st0);
  assert_int_equal(launch_fill(x.lss, x.p, 1, 1), CUDA_SUCCESS);
  assert_int_equal(launch_fill(x.lss, x.p, 1, 1), CUDA_SUCCESS);
  lc_ran_once(&x, &st0); /* the third, then the quiet point: one flight */
  assert_int_equal(launch_fill(x.bss, x.p + 32, 2, 1), CUDA_SUCCESS); /* held */
  wait_stats(submitted_at_least, st0.submitted + 2);
  vclock += pc.resume_idle_ns + 1000;
  wait_stats(completed_at_least, st0.completed + 2);
  assert_int_equal(launch_fill(x.bss, x.p + 32, 3, 1), CUDA_SUCCESS); /* at once */
  wait_stats(completed_at_least, st0.completed + 3);
  pair_close(&x);
  hostd__sched_shutdown();
  slurp(path, text, sizeof(text));
  unlink(path);
  assert_non_null(strstr(text, "# kernel 0x000000000000002a fill_u32\n"));
  assert_null(strstr(strstr(text, "fill_u32\n") + 1, "# kernel 0x000000000000002a"));
  assert_non_null(strstr(text, "# kernel 0x000000000000002b bad?name???injected\n"));
  const char *lc = strstr(text, "\nlc 0x000000000000002a ");
  const char *be1 = strstr(text, "\nbe 0x000000000000002a ");
  assert_non_null(lc);
  assert_non_null(be1);
  const char *be2 = strstr(be1 + 1, "\nbe 0x000000000000002a ");
  assert_non_null(be2);
  assert_non_null(strstr(lc, "class=lc form=original blocks=0+1 held=0 graph=0 submit="));
  assert_non_null(strstr(lc, " launches=3\n"));
  assert_null(strstr(lc + 1, "\nlc ")); /* the burst is one line */
  assert_non_null(strstr(be1, "class=be form=original blocks=0+1 held=1 graph=0 submit="));
  assert_non_null(strstr(be2, "class=be form=original blocks=0+1 held=0 graph=0 submit="));
  hostd__sched_config_init(&cfg);
  assert_int_equal(hostd__sched_parse_policy(&cfg, "tally"), 0);
  assert_int_equal(hostd__sched_init(&cfg), 0);
}

static void reached_nothing(void *arg, uint32_t value) {
  (void)arg, (void)value;
}

/* Every event record on the LC stream so far was made by its worker (the
 * thread that made the stream: the test's), none by the scheduler thread. */
static void lc_stream_recorded_by_worker_only(const pair_t *x) {
  assert_int_equal(hostd_record_stream_records(x->ls, true),
                   hostd_record_stream_records(x->ls, false));
}

/* Holds the LC stream behind a closed host gate: what is launched on it
 * after this waits until the test opens the gate (hostd__gpu.gate_open). */
static void *gate_lc_stream(pair_t *x) {
  void *g = NULL;
  assert_int_equal(hostd__gpu.gate_new(&g, 1), CUDA_SUCCESS);
  int word = 0;
  assert_int_equal(hostd__gpu.host_fn(x->ls, g, 0, 1, reached_nothing, NULL, &word),
                   CUDA_SUCCESS);
  return g;
}

/* The end of a gated LC test: the LC stream was recorded on only by its
 * worker; the pair and the gate go. */
static void pair_close_gated(pair_t *x, void *g) {
  lc_stream_recorded_by_worker_only(x);
  pair_close(x);
  hostd__gpu.gate_del(g, 1);
}

/* A burst of LC launches behind a closed gate (the GPU busy with them), in
 * K batches each ending in a quiet point: one submission for the burst and
 * one record per quiet point, all made by the worker.  The policy sees the
 * LC tenant busy until the newest completes, so a BE launch is held all
 * along, even when the clock moves on; after the last LC launch completes,
 * the BE launch goes once the LC has been idle for the resume time.  A
 * flush meanwhile returns without waiting for the GPU or recording. */
static void lc_burst_costs_one_item(void **state) {
  enum { N = 1000, K = 4 };
  hostd_sched_stats_t st0, st;
  unsigned long recs0;
  pol_config_t pc;
  void *g;
  pair_t x;
  (void)state;
  pol_config_init(&pc);
  pair_open(&x, 12);
  g = gate_lc_stream(&x);
  hostd__sched_stats(&st0);
  recs0 = hostd_record_stream_records(x.ls, false);
  for (uint32_t b = 0; b < K; b++) {
    for (uint32_t i = 0; i < N / K; i++)
      assert_int_equal(launch_fill(x.lss, x.p, b * (N / K) + i + 1, 1), CUDA_SUCCESS);
    hostd__sched_tenant_quiet(x.lc);
    hostd__sched_tenant_quiet(x.lc); /* nothing moved: no record */
  }
  wait_stats(submitted_at_least, st0.submitted + 1);
  hostd__sched_stats(&st);
  assert_int_equal(st.lc_launches, st0.lc_launches + N);
  assert_int_equal(st.submitted, st0.submitted + 1);
  assert_int_equal(st.lc_events, st0.lc_events + K);
  assert_int_equal(hostd_record_stream_records(x.ls, false), recs0 + K);
  assert_int_equal(st.completed, st0.completed);
  /* BE is held while the LC tenant is busy, however long. */
  assert_int_equal(launch_fill(x.bss, x.p + 32, 2, 1), CUDA_SUCCESS);
  wait_stats(submitted_at_least, st0.submitted + 2);
  vclock += 10 * pc.resume_idle_ns;
  assert_int_equal(launch_fill(x.lss, x.p, N + 1, 1), CUDA_SUCCESS);
  /* A flush with the gate still closed: no record, no wait for the GPU. */
  assert_int_equal(hostd__sched_tenant_flush(x.lc), CUDA_SUCCESS);
  hostd__sched_stats(&st);
  assert_int_equal(st.submitted, st0.submitted + 2);
  assert_int_equal(st.issued, st0.issued);
  assert_int_equal(st.completed, st0.completed);
  assert_int_equal(st.lc_events, st0.lc_events + K);
  assert_int_equal(read_u32(x.p + 32, x.bs), 0);
  /* The fence before other work on the stream is a quiet point too. */
  assert_int_equal(hostd__sched_fence(x.lss), CUDA_SUCCESS);
  hostd__sched_stats(&st);
  assert_int_equal(st.lc_events, st0.lc_events + K + 1);
  /* The GPU finishes the burst: the LC completion is seen, BE still waits
   * the resume time (the clock stands still), then goes. */
  hostd__gpu.gate_open(g, 0, 1);
  wait_stats(completed_at_least, st0.completed + 1);
  assert_int_equal(read_u32(x.p, x.ls), N + 1);
  hostd__sched_stats(&st);
  assert_int_equal(st.issued, st0.issued);
  assert_int_equal(st.lc_events, st0.lc_events + K + 1);
  lc_stream_recorded_by_worker_only(&x);
  vclock += pc.resume_idle_ns + 1000;
  wait_stats(issued_at_least, st0.issued + 1);
  assert_int_equal(hostd__sched_fence(x.bss), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(x.bs), CUDA_SUCCESS);
  assert_int_equal(read_u32(x.p + 32, x.bs), 2);
  /* The next LC launch starts a new burst: one more submission, which the
   * scheduler takes at the worker's quiet point (no BE work is queued, so
   * the launch itself does not wake it). */
  assert_int_equal(launch_fill(x.lss, x.p, 5, 1), CUDA_SUCCESS);
  hostd__sched_tenant_quiet(x.lc);
  wait_stats(submitted_at_least, st0.submitted + 3);
  wait_stats(completed_at_least, st0.completed + 3);
  pair_close_gated(&x, g);
}

/* A burst over two batches whose first batch's event completes before the
 * second batch's quiet point: the flight sees that event complete, but it
 * does not cover the launches made since, so the LC tenant stays busy (BE
 * held, the clock past the resume time) until the second batch's event is
 * recorded and completes. */
static void lc_busy_until_last_batch_completes(void **state) {
  hostd_sched_stats_t st0, st;
  struct timespec ms = {0, 1000000};
  pol_config_t pc;
  void *g;
  pair_t x;
  (void)state;
  pol_config_init(&pc);
  pair_open(&x, 16);
  g = gate_lc_stream(&x);
  hostd__sched_stats(&st0);
  for (uint32_t i = 0; i < 10; i++) /* batch 1, behind the gate */
    assert_int_equal(launch_fill(x.lss, x.p, i + 1, 1), CUDA_SUCCESS);
  hostd__sched_tenant_quiet(x.lc);
  for (uint32_t i = 0; i < 10; i++) /* batch 2: no quiet point yet */
    assert_int_equal(launch_fill(x.lss, x.p, 11 + i, 1), CUDA_SUCCESS);
  assert_int_equal(launch_fill(x.bss, x.p + 32, 2, 1), CUDA_SUCCESS);
  wait_stats(submitted_at_least, st0.submitted + 2);
  hostd__gpu.gate_open(g, 0, 1); /* everything so far runs, batch 1's event completes */
  assert_int_equal(read_u32(x.p, x.ls), 20);
  vclock += 10 * pc.resume_idle_ns;
  for (int i = 0; i < 50; i++) /* the scheduler polls meanwhile: nothing ends */
    nanosleep(&ms, NULL);
  hostd__sched_stats(&st);
  assert_int_equal(st.completed, st0.completed);
  assert_int_equal(st.issued, st0.issued);
  assert_int_equal(st.lc_events, st0.lc_events + 1);
  /* Batch 2's quiet point: its event completes at once, the burst ends. */
  hostd__sched_tenant_quiet(x.lc);
  wait_stats(completed_at_least, st0.completed + 1);
  hostd__sched_stats(&st);
  assert_int_equal(st.submitted, st0.submitted + 2);
  assert_int_equal(st.issued, st0.issued);
  vclock += pc.resume_idle_ns + 1000;
  wait_stats(issued_at_least, st0.issued + 1);
  pair_close_gated(&x, g);
}

/* An LC tenant that closes while its burst is still on the GPU: close waits
 * for the event it follows, and freeing the stream afterwards (the scheduler
 * done with it) does not hang; a stream freed right after a burst records a
 * last event (no quiet point came) and waits for its flight. */
static void lc_close_and_free_while_busy(void **state) {
  hostd_sched_stats_t st0, st;
  hostd_sched_stream_t *ss;
  uint64_t s2;
  CUresult r;
  void *g;
  pair_t x;
  (void)state;
  pair_open(&x, 14);
  hostd__sched_stats(&st0);
  assert_int_equal(hostd__gpu.stream_new(&s2, CU_STREAM_NON_BLOCKING, -5), CUDA_SUCCESS);
  assert_non_null(ss = hostd__sched_stream_new(x.lc, s2, &r));
  for (uint32_t i = 0; i < 100; i++)
    assert_int_equal(launch_fill(ss, x.p + 16, i, 1), CUDA_SUCCESS);
  assert_int_equal(hostd__sched_tenant_flush(x.lc), CUDA_SUCCESS);
  hostd__sched_stream_free(ss);
  hostd__sched_stats(&st);
  assert_int_equal(st.lc_events, st0.lc_events + 1);
  assert_int_equal(hostd_record_stream_records(s2, true), 1);
  assert_int_equal(hostd_record_stream_records(s2, false), 1);
  assert_int_equal(hostd__gpu.stream_del(s2), CUDA_SUCCESS);
  assert_int_equal(read_u32(x.p + 16, x.ls), 99);
  g = gate_lc_stream(&x);
  for (uint32_t i = 0; i < 100; i++)
    assert_int_equal(launch_fill(x.lss, x.p, i, 1), CUDA_SUCCESS);
  hostd__sched_tenant_quiet(x.lc);
  hostd__gpu.gate_open(g, 0, 1);
  hostd__sched_tenant_close(x.lc);
  hostd__sched_tenant_free(x.lc);
  x.lc = NULL;
  assert_int_equal(read_u32(x.p, x.ls), 99);
  pair_close_gated(&x, g);
}

/* An LC tenant that closes with launches no quiet point recorded behind:
 * its flight has no event to wait for and ends, so close returns.  (No BE
 * work is queued, so the burst's submission may wait in the inbox until the
 * close wakes the scheduler; it is taken first.) */
static void lc_close_before_any_record(void **state) {
  hostd_sched_stats_t st0, st;
  pair_t x;
  (void)state;
  pair_open(&x, 18);
  hostd__sched_stats(&st0);
  for (uint32_t i = 0; i < 10; i++)
    assert_int_equal(launch_fill(x.lss, x.p, i, 1), CUDA_SUCCESS);
  hostd__sched_tenant_close(x.lc);
  hostd__sched_stats(&st);
  assert_int_equal(st.submitted, st0.submitted + 1);
  assert_int_equal(st.lc_events, st0.lc_events);
  hostd__sched_tenant_free(x.lc); /* the stream's last record, nobody to take it: pooled */
  x.lc = NULL;
  hostd__sched_stats(&st);
  assert_int_equal(st.lc_events, st0.lc_events + 1);
  lc_stream_recorded_by_worker_only(&x);
  pair_close(&x);
}

/* ALONE MODE (be_alone): a BE tenant alone launches on its own stream (no
 * queue); once another tenant is open its launches are held by the policy
 * again, in stream order after the direct ones; when it is alone again its
 * next launch first waits for the queued one to be issued.  The scheduler
 * is restarted with be_alone for this test, and as before after it. */
static void be_tenant_alone_launches_straight(void **state) {
  hostd_sched_config_t cfg;
  hostd_sched_stats_t st0, st;
  hostd_sched_tenant_t *be, *lc;
  hostd_sched_stream_t *bss, *lss;
  uint64_t bs, ls, p;
  CUresult r;
  (void)state;
  hostd__sched_shutdown();
  hostd__sched_config_init(&cfg);
  cfg.be_alone = true;
  assert_int_equal(hostd__sched_parse_policy(&cfg, "tally"), 0);
  assert_int_equal(hostd__sched_init(&cfg), 0);
  assert_non_null(be = hostd__sched_tenant_new(90, "be", 1, 1));
  assert_int_equal(hostd__gpu.stream_new(&bs, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.mem_alloc(&p, 64), CUDA_SUCCESS);
  assert_non_null(bss = hostd__sched_stream_new(be, bs, &r));
  hostd__sched_stats(&st0);
  /* Alone: made at once on the tenant's stream, no item, no fence. */
  assert_int_equal(launch_fill(bss, p, 7, 16), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(bs), CUDA_SUCCESS);
  assert_int_equal(read_u32(p + 60, bs), 7);
  hostd__sched_stats(&st);
  assert_int_equal(st.alone, st0.alone + 1);
  assert_int_equal(st.submitted, st0.submitted);
  assert_int_equal(st.fences, st0.fences);
  /* An LC tenant comes and is active: the BE launch is held. */
  assert_non_null(lc = hostd__sched_tenant_new(91, "lc", 0, 1));
  assert_int_equal(hostd__gpu.stream_new(&ls, CU_STREAM_NON_BLOCKING, -5), CUDA_SUCCESS);
  assert_non_null(lss = hostd__sched_stream_new(lc, ls, &r));
  assert_int_equal(launch_fill(lss, p, 1, 1), CUDA_SUCCESS);
  hostd__sched_tenant_quiet(lc);
  wait_stats(completed_at_least, st0.completed + 1);
  assert_int_equal(launch_fill(bss, p, 8, 16), CUDA_SUCCESS);
  wait_stats(submitted_at_least, st0.submitted + 2);
  hostd__sched_stats(&st);
  assert_int_equal(st.issued, st0.issued);
  assert_int_equal(st.alone, st0.alone + 1);
  assert_int_equal(read_u32(p + 60, bs), 7);
  /* The LC goes: alone again.  The next launch waits for the held one to
   * be issued, and runs after it. */
  hostd__sched_tenant_close(lc);
  hostd__sched_tenant_free(lc);
  assert_int_equal(launch_fill(bss, p + 4, 9, 15), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(bs), CUDA_SUCCESS);
  assert_int_equal(read_u32(p, bs), 8);
  assert_int_equal(read_u32(p + 4, bs), 9);
  assert_int_equal(read_u32(p + 60, bs), 9);
  hostd__sched_stats(&st);
  assert_int_equal(st.issued, st0.issued + 1);
  assert_int_equal(st.alone, st0.alone + 2);
  hostd__sched_tenant_close(be);
  hostd__sched_tenant_free(be);
  assert_int_equal(hostd__gpu.stream_del(bs), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_del(ls), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.mem_free(p), CUDA_SUCCESS);
  hostd__sched_shutdown();
  hostd__sched_config_init(&cfg);
  assert_int_equal(hostd__sched_parse_policy(&cfg, "tally"), 0);
  assert_int_equal(hostd__sched_init(&cfg), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(held_launch_keeps_stream_order),
      cmocka_unit_test(be_launches_of_a_profiled_kernel_are_timed_by_sample),
      cmocka_unit_test(be_waits_while_lc_active_and_goes_when_idle),
      cmocka_unit_test(blocking_fence_is_counted_with_its_time),
      cmocka_unit_test(memset_behind_held_launch_is_queued_in_order),
      cmocka_unit_test(closing_drops_held_launches),
      cmocka_unit_test(second_lc_tenant_is_refused),
      cmocka_unit_test(be_launches_run_in_the_partition),
      cmocka_unit_test(quiet_due_follows_direct_work),
      cmocka_unit_test(flush_waits_for_direct_launches),
      cmocka_unit_test(lc_sync_ends_burst_without_event),
      cmocka_unit_test(sync_notice_is_given_after_the_reply),
      cmocka_unit_test(lc_launch_wakes_scheduler_only_for_be_work),
      cmocka_unit_test(trace_says_held_and_names_kernels),
      cmocka_unit_test(lc_burst_costs_one_item),
      cmocka_unit_test(lc_busy_until_last_batch_completes),
      cmocka_unit_test(lc_close_and_free_while_busy),
      cmocka_unit_test(lc_close_before_any_record),
      cmocka_unit_test(be_tenant_alone_launches_straight),
      cmocka_unit_test(refused_launches_are_answered_and_named_once),
      cmocka_unit_test(launches_the_partition_refuses_run_whole),
      cmocka_unit_test(shutdown_line_says_how_the_policy_chose),
      cmocka_unit_test(be_sms_hold_0_runs_be_beside_an_active_lc),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
