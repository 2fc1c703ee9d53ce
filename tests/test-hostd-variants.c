/* test-hostd-variants.c: slice and PTB variants of PTX kernels in tallyd
 * (hostd/variants.c, hostd/sched.c) on the recording device.
 *
 * The recording device "compiles" PTX by keeping it (counted as a JIT),
 * loads PTX modules with their entries' parameter layouts, and logs the
 * original block indices every launch runs (slices and PTB workers as
 * rewrite/rw.h defines them; a PTB launch takes indices from its control
 * block in device memory and stops at its flag).  So the block log says
 * whether hostd covered every block once, in order, across slices and
 * across a preemption and its resumed launch.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "hostd/gpu.h"
#include "hostd/guard.h"
#include "hostd/hostd-int.h"
#include "hostd/sched.h"
#include "hostd/variants.h"

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry ok(.param .u64 p, .param .u32 n)\n{\n"
                          ".reg .b32 %r<3>;\nmov.u32 %r1, %ctaid.x;\nld.param.u32 %r2, [n];\n"
                          "ret;\n}\n"
                          ".visible .entry uses_smid(.param .u64 p)\n{\n.reg .b32 %r<2>;\n"
                          "mov.u32 %r1, %smid;\nret;\n}\n";
static char state[64];
static uint64_t cid, ok_f;
static _Atomic uint64_t vclock = 1000000000ull;
static uint64_t vnow(void) {
  return vclock;
}

static int ok_func(void *arg, const hostd_func_info_t *f) {
  if (strcmp(f->name, "ok") == 0)
    *(uint64_t *)arg = f->handle;
  return 0;
}

/* The scheduler with policy tally, the given forms, `resident` blocks per
 * wave (so grids of a few dozen blocks take several slices). */
static uint32_t start_be_sms; /* --be-sms of the next start (0: no partition) */
static bool start_flag_memset; /* --flag-memset 1 at the next start */
static const char *start_profiles; /* the profiles file of the next start (NULL: none) */
static void start_cache(unsigned forms, uint32_t resident, bool cache) {
  hostd_sched_config_t cfg;
  hostd__sched_config_init(&cfg);
  assert_int_equal(hostd__sched_parse_policy(&cfg, "tally"), 0);
  cfg.be_sms = start_be_sms;
  cfg.flag_memset = start_flag_memset;
  if (start_profiles)
    snprintf(cfg.profiles, sizeof(cfg.profiles), "%s", start_profiles);
  cfg.pol.default_resident = resident;
  cfg.var.forms = forms;
  if (cache)
    snprintf(cfg.var.cache_dir, sizeof(cfg.var.cache_dir), "%s/variants", state);
  assert_int_equal(hostd__sched_init(&cfg), 0);
}

static void start(unsigned forms, uint32_t resident) {
  start_cache(forms, resident, true);
}

static int setup(void **st) {
  uint64_t mod;
  (void)st;
  snprintf(state, sizeof(state), "/tmp/tally-var-test.XXXXXX");
  if (!mkdtemp(state) || hostd__gpu.init(0, &hostd__snapshot) != CUDA_SUCCESS ||
      hostd__gpu.thread_enter() != CUDA_SUCCESS)
    return -1;
  hostd__modcache_init(state);
  cid = XXH3_64bits(ptx, sizeof(ptx) - 1);
  if (hostd__modcache_put(cid, ptx, sizeof(ptx) - 1) != 0 ||
      hostd__gpu.module_load(&mod, 0, ptx, sizeof(ptx) - 1) != CUDA_SUCCESS ||
      hostd__gpu.module_functions(mod, 0, false, ok_func, &ok_f) != CUDA_SUCCESS || !ok_f)
    return -1;
  hostd__sched_set_clock(vnow);
  return 0;
}

static int teardown(void **st) {
  char cmd[128];
  (void)st;
  hostd__sched_set_clock(NULL);
  hostd__modcache_close();
  hostd__gpu.shutdown();
  snprintf(cmd, sizeof(cmd), "rm -rf %s", state);
  return system(cmd) == 0 ? 0 : -1;
}

/* Loads, builds, unloads: the disk cache serves the second build and a
 * new scheduler (a restarted daemon) on the same folder. */
static void variants_built_once_then_from_the_cache(void **st) {
  hostd_var_stats_t vs;
  unsigned forms;
  const hostd_var_kernel_t *k;
  unsigned long jit0 = hostd_record_count(HOSTD_RECORD_JIT);
  (void)st;
  start(3, 4);
  hostd__var_module_ref(cid);
  hostd__var_wait_idle();
  hostd__var_stats(&vs);
  assert_int_equal(vs.builds, 1);
  assert_int_equal(vs.jits, 1);
  assert_int_equal(vs.cache_hits, 0);
  assert_int_equal(vs.kernels, 1);   /* ok; uses_smid refused */
  assert_int_equal(vs.refused, 2);   /* uses_smid: sliced and PTB */
  assert_int_equal(vs.modules, 1);
  assert_int_equal(hostd_record_count(HOSTD_RECORD_JIT), jit0 + 1);
  assert_non_null(k = hostd__var_get(hostd__sched_kernel_id(cid, "ok"), &forms));
  assert_int_equal(forms, 3);
  assert_int_not_equal(k->fn[VAR_FORM_SLICE].f, 0);
  assert_int_equal(k->fn[VAR_FORM_SLICE].first_extra, 12); /* after p (8) and n (4) */
  hostd__var_put(k);
  assert_null(hostd__var_get(hostd__sched_kernel_id(cid, "uses_smid"), &forms));
  hostd__var_module_unref(cid); /* the last reference: the module goes */
  hostd__var_stats(&vs);
  assert_int_equal(vs.sets, 0);
  assert_int_equal(vs.modules, 0);
  hostd__var_module_ref(cid); /* again: from the disk cache */
  hostd__var_wait_idle();
  hostd__var_stats(&vs);
  assert_int_equal(vs.cache_hits, 1);
  assert_int_equal(hostd_record_count(HOSTD_RECORD_JIT), jit0 + 1);
  hostd__var_module_unref(cid);
  hostd__sched_shutdown();
  start(3, 4); /* a new daemon on the same state folder */
  hostd__var_module_ref(cid);
  hostd__var_wait_idle();
  hostd__var_stats(&vs);
  assert_int_equal(vs.cache_hits, 1);
  assert_int_equal(vs.jits, 0);
  assert_int_equal(hostd_record_count(HOSTD_RECORD_JIT), jit0 + 1);
  hostd__var_module_unref(cid);
  hostd__sched_shutdown();
}

static void wait_until(int (*pred)(void)) {
  struct timespec ts = {0, 1000000};
  for (int i = 0; i < 5000; i++) {
    if (pred())
      return;
    nanosleep(&ts, NULL);
  }
  fail_msg("not within 5 s");
}

static CUresult launch_ok(hostd_sched_stream_t *ss, const uint32_t grid[3]) {
  uint8_t args[12] = {0};
  hostd_sched_launch_t l = {.f = ok_f, .kernel_id = hostd__sched_kernel_id(cid, "ok"),
                            .block = {32, 1, 1}, .args = args, .argbytes = sizeof(args)};
  memcpy(l.grid, grid, sizeof(l.grid));
  return hostd__sched_launch(ss, &l);
}

/* Every block once, in order: the log is 0, 1, ..., total - 1. */
static void assert_blocks_in_order(uint64_t total) {
  static uint64_t log[1 << 16];
  size_t n = hostd_record_blocks(log, sizeof(log) / sizeof(log[0]));
  assert_int_equal(n, total);
  for (uint64_t i = 0; i < total; i++)
    assert_int_equal(log[i], i);
}

/* Slices of grid, between min_slices and max_slices of them. */
static void sliced_grid_in(const uint32_t grid[3], uint64_t min_slices, uint64_t max_slices) {
  hostd_sched_tenant_t *lc, *be;
  hostd_sched_stream_t *ss;
  hostd_sched_stats_t s0, s1;
  uint64_t s, n_sliced = 0, n_ptb = 0;
  unsigned long part0;
  CUresult r;
  start(1u << VAR_FORM_SLICE, 4);
  hostd__var_module_ref(cid);
  hostd__var_wait_idle();
  assert_non_null(lc = hostd__sched_tenant_new(1, "lc", 0, 1)); /* idle: BE goes, explored */
  assert_non_null(be = hostd__sched_tenant_new(2, "be", 1, 1));
  hostd__sched_tenant_count_forms(be, &n_sliced, &n_ptb, NULL);
  assert_int_equal(hostd__gpu.stream_new(&s, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  assert_non_null(ss = hostd__sched_stream_new(be, s, &r));
  hostd__sched_stats(&s0);
  part0 = hostd__record_part_launches;
  (void)hostd_record_blocks(NULL, 0);
  assert_int_equal(launch_ok(ss, grid), CUDA_SUCCESS);
  assert_int_equal(hostd__sched_fence(ss), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(s), CUDA_SUCCESS);
  hostd__sched_stats(&s1);
  /* Beside a partition (start_be_sms), every slice ran outside it. */
  assert_int_equal(s1.whole_forms - s0.whole_forms, start_be_sms ? s1.sliced - s0.sliced : 0);
  assert_int_equal(s1.whole, s0.whole);
  assert_int_equal(hostd__record_part_launches, part0);
  assert_true(s1.sliced - s0.sliced >= min_slices); /* several slices, no original */
  assert_true(s1.sliced - s0.sliced <= max_slices);
  assert_int_equal(n_sliced, s1.sliced - s0.sliced); /* the tenant's own count (tallyctl) */
  assert_int_equal(n_ptb, 0);
  assert_blocks_in_order((uint64_t)grid[0] * grid[1] * grid[2]);
  hostd__sched_tenant_close(be);
  hostd__sched_tenant_close(lc);
  hostd__sched_tenant_free(be);
  hostd__sched_tenant_free(lc);
  assert_int_equal(hostd__gpu.stream_del(s), CUDA_SUCCESS);
  hostd__var_module_unref(cid);
  hostd__sched_shutdown();
}

static void sliced_grid(const uint32_t grid[3]) {
  sliced_grid_in(grid, 2, UINT64_MAX);
}

/* With a best-effort partition (--be-sms), slices run on the whole GPU
 * beside it, in the stream's order (sliced_grid_in checks both): the policy
 * sized them for the whole GPU's resident blocks, and the partition would
 * only keep SMs from them. */
static void slices_run_on_the_whole_gpu_beside_a_partition(void **st) {
  const uint32_t g[3] = {37, 1, 1};
  (void)st;
  start_be_sms = 20;
  sliced_grid(g);
  start_be_sms = 0;
}

/* With the driver's occupancy (here 2 blocks on each of 132 SMs), a wave is
 * 264 blocks, not the 4 the policy assumes without it: 600 blocks go in at
 * most 3 slices instead of 150. */
static void slices_follow_the_occupancy(void **st) {
  const uint32_t g[3] = {600, 1, 1};
  (void)st;
  hostd__record_blocks_per_sm = 2;
  sliced_grid_in(g, 2, 3);
  hostd__record_blocks_per_sm = 0;
}

static void slices_cover_a_1d_grid_once_in_order(void **st) {
  const uint32_t g[3] = {37, 1, 1};
  (void)st;
  sliced_grid(g);
}

static void slices_cover_a_3d_grid_once_in_order(void **st) {
  const uint32_t g[3] = {5, 3, 4};
  (void)st;
  sliced_grid(g);
}

static int preempted(void) {
  hostd_sched_stats_t s;
  hostd__sched_stats(&s);
  return s.preempts >= 1 && s.turnarounds >= 1;
}
static int two_completed(void) {
  hostd_sched_stats_t s;
  hostd__sched_stats(&s);
  return s.completed >= 2;
}
static int ptb_in_flight(void) {
  hostd_sched_stats_t s;
  hostd__sched_stats(&s);
  return s.ptb >= 1;
}

/* An LC and a BE tenant of the scheduler, a stream each (the LC's at high
 * priority): what the preemption tests start from. */
typedef struct vpair {
  hostd_sched_tenant_t *lc, *be;
  hostd_sched_stream_t *lss, *bss;
  uint64_t ls, bs;
} vpair_t;

static void vpair_open(vpair_t *p) {
  CUresult r;
  assert_non_null(p->lc = hostd__sched_tenant_new(1, "lc", 0, 1));
  assert_non_null(p->be = hostd__sched_tenant_new(2, "be", 1, 1));
  assert_int_equal(hostd__gpu.stream_new(&p->ls, CU_STREAM_NON_BLOCKING, -5), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_new(&p->bs, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  assert_non_null(p->lss = hostd__sched_stream_new(p->lc, p->ls, &r));
  assert_non_null(p->bss = hostd__sched_stream_new(p->be, p->bs, &r));
}

/* Closes both tenants (be NULL: closed by the test), the streams, the
 * module reference and the scheduler. */
static void vpair_close(vpair_t *p) {
  if (p->be)
    hostd__sched_tenant_close(p->be);
  hostd__sched_tenant_close(p->lc);
  hostd__sched_tenant_free(p->be);
  hostd__sched_tenant_free(p->lc);
  assert_int_equal(hostd__gpu.stream_del(p->ls), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_del(p->bs), CUDA_SUCCESS);
  hostd__var_module_unref(cid);
  hostd__sched_shutdown();
}

/* The preemption tests' start: the scheduler offering forms, an LC and a
 * BE tenant (x), the BE kernel launched with the recording device's hold on
 * and seen in flight (pred), then the LC's launch, which raises its flag. */
static void preempt_mid_launch(vpair_t *x, unsigned forms, const uint32_t g[3],
                               int (*pred)(void)) {
  const uint32_t one[3] = {1, 1, 1};
  start(forms, 4);
  hostd__var_module_ref(cid);
  hostd__var_wait_idle();
  vpair_open(x);
  (void)hostd_record_blocks(NULL, 0);
  hostd_record_ptb_hold(true);
  assert_int_equal(launch_ok(x->bss, g), CUDA_SUCCESS);
  wait_until(pred);
  hostd__record_memset_prio = 0;
  unsigned long raised = hostd__record_hi_memsets, words = hostd__record_word_writes;
  assert_int_equal(launch_ok(x->lss, one), CUDA_SUCCESS); /* the LC arrives: preempt */
  /* Its worker raised the flag before it launched, not the scheduler after. */
  assert_true(hostd__record_hi_launch_memsets > raised);
  /* By the front end's word write, unless --flag-memset. */
  if (start_flag_memset)
    assert_int_equal(hostd__record_word_writes, words);
  else
    assert_true(hostd__record_word_writes > words);
  hostd__sched_tenant_quiet(x->lc); /* its worker's quiet point: the event its end is seen by */
  wait_until(preempted);
  /* The LC's end seen too, before the test moves the clock past its idle
   * window: an end stamped after the move would open a window the clock
   * never leaves. */
  wait_until(two_completed);
  hostd_record_ptb_hold(false);
}

/* --flag-memset 1: the same preemption, the flags written by memsets. */
static void flag_memset_raises_flags_with_a_memset(void **st) {
  const uint32_t g[3] = {16, 2, 2};
  vpair_t x;
  (void)st;
  start_flag_memset = true;
  preempt_mid_launch(&x, 3, g, ptb_in_flight);
  start_flag_memset = false;
  vclock += 10000000;
  assert_int_equal(hostd__sched_fence(x.bss), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(x.bs), CUDA_SUCCESS);
  vpair_close(&x);
}

/* The block log is BE 0..k-1, the LC's own block 0, then BE k..63 once. */
static void assert_log_split_at(uint64_t k) {
  static uint64_t log[256];
  size_t n = hostd_record_blocks(log, 256);
  assert_int_equal(n, 65);
  for (uint64_t i = 0; i < k; i++)
    assert_int_equal(log[i], i);
  assert_int_equal(log[k], 0);
  for (uint64_t i = k; i < 64; i++)
    assert_int_equal(log[i + 1], i);
}

/* A PTB launch is preempted when the LC tenant launches: the flag is
 * written on the high-priority stream, the launch stops after its static
 * blocks, and the resumed launch runs exactly the rest. */
static void preempted_ptb_resumes_the_remaining_blocks(void **st) {
  const uint32_t g[3] = {16, 2, 2};
  hostd_sched_stats_t s1;
  vpair_t x;
  (void)st;
  /* 4 workers run their static blocks 0..3, then hold */
  preempt_mid_launch(&x, 3, g, ptb_in_flight);
  assert_int_equal(hostd__record_memset_prio, hostd__snapshot.prio_greatest);
  vclock += 10000000; /* the LC stays idle: the rest goes */
  assert_int_equal(hostd__sched_fence(x.bss), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(x.bs), CUDA_SUCCESS);
  hostd__sched_stats(&s1);
  assert_true(s1.ptb + s1.sliced >= 2);
  assert_int_equal(s1.ctl_inuse, 0);
  assert_log_split_at(4);
  vpair_close(&x);
}

static int no_flush_slots(void) {
  hostd_sched_stats_t s;
  hostd__sched_stats(&s);
  return s.fl_inuse == 0;
}
static int flush_in_flight(void) {
  hostd_sched_stats_t s;
  hostd__sched_stats(&s);
  return s.flush >= 1;
}

/* With only the FLUSH form offered, a BE kernel runs as one FLUSH launch of
 * its whole grid; the LC tenant's launch raises its flag: the blocks that
 * had committed (the first half, on the recording device) finish, the rest
 * give up and are listed, and the redo launch runs exactly those, once. */
static void preempted_flush_reruns_the_blocks_that_gave_up(void **st) {
  const uint32_t g[3] = {16, 2, 2};
  hostd_sched_stats_t s1;
  vpair_t x;
  (void)st;
  /* blocks 0..31 committed and finished; 32..63 running */
  preempt_mid_launch(&x, 1u << VAR_FORM_FLUSH, g, flush_in_flight);
  assert_int_equal(hostd__record_memset_prio, hostd__snapshot.prio_greatest);
  vclock += 10000000; /* the LC stays idle: the redo goes */
  assert_int_equal(hostd__sched_fence(x.bss), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(x.bs), CUDA_SUCCESS);
  wait_until(no_flush_slots); /* the redo's end seen: the list and its block returned */
  hostd__sched_stats(&s1);
  assert_int_equal(s1.flush, 2);
  assert_int_equal(s1.redos, 1);
  assert_int_equal(s1.given_up, 32);
  assert_int_equal(s1.fl_inuse, 0);
  assert_log_split_at(32);
  vpair_close(&x);
}

/* The policy's FLUSH drain is the device's flag-write-to-end time (the
 * recording device times every event pair at 1 ms), not the host's: here
 * the virtual clock did not move between the raise and the end. */
static void flush_drain_is_the_device_turnaround(void **st) {
  const uint32_t g[3] = {16, 2, 2};
  char path[96];
  pol_profiles_t *pp;
  const char *why = NULL;
  vpair_t x;
  (void)st;
  snprintf(path, sizeof(path), "%s/profiles.bin", state);
  start_profiles = path;
  preempt_mid_launch(&x, 1u << VAR_FORM_FLUSH, g, flush_in_flight);
  start_profiles = NULL;
  vclock += 10000000;
  assert_int_equal(hostd__sched_fence(x.bss), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(x.bs), CUDA_SUCCESS);
  wait_until(no_flush_slots);
  vpair_close(&x); /* saves the profiles */
  assert_int_equal(pol_profiles_new(&pp), 0);
  assert_int_equal(pol_profiles_load(pp, path, &why), 0);
  pol_profile_key_t key = {.kernel_id = hostd__sched_kernel_id(cid, "ok"),
                           .grid = {16, 2, 2}, .block = {32, 1, 1}};
  const pol_profile_t *p = pol_profiles_find(pp, &key);
  assert_non_null(p);
  assert_int_equal(p->flush_drain_samples, 1);
  assert_int_equal(p->flush_drain_ns, 1000001);
  pol_profiles_free(pp);
  unlink(path);
}

/* A tenant closed after its FLUSH launch gave up blocks, before the redo
 * (the LC is still active): the list is returned, the submission dropped,
 * and every control block is free again. */
static void close_before_redo_frees_the_list(void **st) {
  const uint32_t g[3] = {64, 1, 1};
  hostd_sched_stats_t s1;
  vpair_t x;
  (void)st;
  preempt_mid_launch(&x, 1u << VAR_FORM_FLUSH, g, flush_in_flight);
  assert_int_equal(hostd__gpu.stream_sync(x.bs), CUDA_SUCCESS);
  for (int i = 0; i < 5000; i++) { /* the give-up seen: its list is kept */
    hostd__sched_stats(&s1);
    if (s1.given_up == 32)
      break;
    usleep(1000);
  }
  assert_int_equal(s1.given_up, 32);
  assert_int_equal(s1.fl_inuse, 1);
  hostd__sched_tenant_close(x.be); /* the clock stands: the LC is active, no redo yet */
  hostd__sched_stats(&s1);
  assert_int_equal(s1.redos, 0);
  assert_int_equal(s1.fl_inuse, 0);
  assert_true(s1.dropped >= 1);
  hostd__sched_tenant_free(x.be);
  x.be = NULL;
  vpair_close(&x);
}

static void *closer(void *arg) {
  hostd__sched_tenant_close(arg);
  return NULL;
}

/* A tenant closed while its PTB launch runs: the close waits for it, then
 * its control block is free and its variant module unloaded. */
static void close_mid_ptb_frees_control_blocks_and_variants(void **st) {
  hostd_sched_tenant_t *lc, *be;
  hostd_sched_stream_t *bss;
  hostd_sched_stats_t s1;
  hostd_var_stats_t vs;
  const uint32_t g[3] = {64, 1, 1};
  pthread_t th;
  uint64_t bs;
  CUresult r;
  (void)st;
  start(3, 4);
  hostd__var_module_ref(cid);
  hostd__var_wait_idle();
  assert_non_null(lc = hostd__sched_tenant_new(1, "lc", 0, 1));
  assert_non_null(be = hostd__sched_tenant_new(2, "be", 1, 1));
  assert_int_equal(hostd__gpu.stream_new(&bs, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  assert_non_null(bss = hostd__sched_stream_new(be, bs, &r));
  hostd_record_ptb_hold(true);
  assert_int_equal(launch_ok(bss, g), CUDA_SUCCESS);
  launch_ok(bss, g); /* a second one, still queued: dropped */
  wait_until(ptb_in_flight);
  hostd__sched_stats(&s1);
  assert_int_equal(s1.ctl_inuse, 1);
  assert_int_equal(pthread_create(&th, NULL, closer, be), 0);
  usleep(20000);
  hostd_record_ptb_hold(false); /* the launch ends */
  assert_int_equal(pthread_join(th, NULL), 0);
  hostd__sched_stats(&s1);
  assert_int_equal(s1.ctl_inuse, 0);
  assert_true(s1.dropped >= 1);
  hostd__sched_tenant_free(be);
  hostd__sched_tenant_close(lc);
  hostd__sched_tenant_free(lc);
  assert_int_equal(hostd__gpu.stream_del(bs), CUDA_SUCCESS);
  hostd__var_module_unref(cid); /* what tenant_release does for the module's tenant */
  hostd__var_stats(&vs);
  assert_int_equal(vs.modules, 0);
  assert_int_equal(vs.sets, 0);
  hostd__sched_shutdown();
}

/* A module without PTX (TALLYREC text) and an image whose kernels are all
 * refused: no variants, originals only. */
static void modules_without_variants_keep_originals(void **st) {
  static const char rec[] = "TALLYREC\nkernel fill_u32 8,4,8\n";
  uint64_t rid = XXH3_64bits(rec, sizeof(rec) - 1);
  hostd_var_stats_t vs;
  unsigned forms;
  (void)st;
  assert_int_equal(hostd__modcache_put(rid, rec, sizeof(rec) - 1), 0);
  start(3, 4);
  hostd__var_module_ref(rid);
  hostd__var_wait_idle();
  hostd__var_stats(&vs);
  assert_int_equal(vs.no_ptx, 1);
  assert_int_equal(vs.modules, 0);
  assert_null(hostd__var_get(hostd__sched_kernel_id(rid, "fill_u32"), &forms));
  hostd__var_module_unref(rid);
  hostd__sched_shutdown();
}

/* ---- recovery, refusals logged once, hostile launches ---- */

/* A context-corrupting error: hostd__var_reset forgets every variant
 * without a GPU call (no module unload, not even when a launch puts its
 * reference later), and the next load of the module builds again. */
static void reset_forgets_variants_without_the_gpu_and_later_loads_rebuild(void **st) {
  hostd_var_stats_t vs;
  unsigned forms;
  const hostd_var_kernel_t *k, *k2;
  uint64_t kid = hostd__sched_kernel_id(cid, "ok");
  unsigned long unloads;
  (void)st;
  start(3, 4);
  hostd__var_module_ref(cid);
  hostd__var_module_ref(cid); /* a second tenant's load of the same module */
  hostd__var_wait_idle();
  assert_non_null(k = hostd__var_get(kid, &forms)); /* as a queued launch holds it */
  unloads = hostd_record_count(HOSTD_RECORD_MODULE_DEL);
  hostd__var_reset();
  hostd__var_stats(&vs);
  assert_int_equal(vs.sets, 0);
  assert_int_equal(vs.modules, 0);
  assert_int_equal(vs.kernels, 0);
  assert_null(hostd__var_get(kid, &forms));
  hostd__var_module_unref(cid); /* the tenants' releases: no-ops now */
  hostd__var_module_unref(cid);
  hostd__var_put(k);            /* the launch's reference: the set's memory goes */
  assert_int_equal(hostd_record_count(HOSTD_RECORD_MODULE_DEL), unloads);
  /* A load after the reset builds again (from the disk cache). */
  hostd__var_module_ref(cid);
  hostd__var_wait_idle();
  hostd__var_stats(&vs);
  assert_int_equal(vs.builds, 2);
  assert_int_equal(vs.modules, 1);
  assert_non_null(k2 = hostd__var_get(kid, &forms));
  assert_int_equal(forms, 3);
  hostd__var_put(k2);
  hostd__var_module_unref(cid);
  assert_int_equal(hostd_record_count(HOSTD_RECORD_MODULE_DEL), unloads + 1);
  hostd__sched_shutdown();
}

/* Runs f with the daemon's stderr (hostd__log) captured into buf. */
static void capture_log(void (*f)(void), char *buf, size_t cap) {
  char path[96];
  int fd, saved;
  ssize_t n;
  snprintf(path, sizeof(path), "%s/log.txt", state);
  fflush(stderr);
  assert_true((fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600)) >= 0);
  assert_true((saved = dup(2)) >= 0);
  assert_int_equal(dup2(fd, 2), 2);
  f();
  fflush(stderr);
  assert_int_equal(dup2(saved, 2), 2);
  close(saved);
  assert_true((n = pread(fd, buf, cap - 1, 0)) >= 0);
  buf[n] = 0;
  close(fd);
}

static size_t count_of(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
    n++;
  return n;
}

static void build_twice_uncached(void) {
  start_cache(3, 4, false); /* no disk cache: both loads compile, both see the refusals */
  for (int i = 0; i < 2; i++) {
    hostd__var_module_ref(cid);
    hostd__var_wait_idle();
    hostd__var_module_unref(cid);
  }
}

/* rewrite/ refuses uses_smid in both forms; two compiles count four
 * refusals but log one line per form. */
static void refusals_are_logged_once_per_kernel_and_form(void **st) {
  static char log[1 << 16];
  hostd_var_stats_t vs;
  (void)st;
  capture_log(build_twice_uncached, log, sizeof(log));
  hostd__var_stats(&vs);
  assert_int_equal(vs.jits, 2);
  assert_int_equal(vs.refused, 4);
  assert_int_equal(count_of(log, "variants: kernel uses_smid has no sliced form"), 1);
  assert_int_equal(count_of(log, "variants: kernel uses_smid has no PTB form"), 1);
  assert_int_equal(count_of(log, "variants: kernel ok has no"), 0);
  hostd__sched_shutdown();
}

/* One BE launch through the scheduler with every variant ready: returns
 * the variant launches it made and the error its tenant was left with. */
static uint64_t one_be_launch(const uint32_t grid[3], const uint32_t block[3], CUresult *err,
                              CUresult *launched) {
  hostd_sched_tenant_t *lc, *be;
  hostd_sched_stream_t *ss;
  hostd_sched_stats_t s1;
  uint8_t args[12] = {0};
  hostd_sched_launch_t l = {.f = ok_f, .kernel_id = hostd__sched_kernel_id(cid, "ok"),
                            .args = args, .argbytes = sizeof(args)};
  uint64_t s;
  CUresult r;
  memcpy(l.grid, grid, sizeof(l.grid));
  memcpy(l.block, block, sizeof(l.block));
  start(3, 4);
  hostd__var_module_ref(cid);
  hostd__var_wait_idle();
  assert_non_null(lc = hostd__sched_tenant_new(1, "lc", 0, 1));
  assert_non_null(be = hostd__sched_tenant_new(2, "be", 1, 1));
  assert_int_equal(hostd__gpu.stream_new(&s, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  assert_non_null(ss = hostd__sched_stream_new(be, s, &r));
  *launched = hostd__sched_launch(ss, &l);
  assert_int_equal(hostd__sched_fence(ss), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(s), CUDA_SUCCESS);
  *err = hostd__sched_tenant_flush(be);
  hostd__sched_stats(&s1);
  hostd__sched_tenant_close(be);
  hostd__sched_tenant_close(lc);
  hostd__sched_tenant_free(be);
  hostd__sched_tenant_free(lc);
  assert_int_equal(hostd__gpu.stream_del(s), CUDA_SUCCESS);
  hostd__var_module_unref(cid);
  hostd__sched_shutdown();
  return s1.sliced + s1.ptb;
}

/* A grid or block with a zero dimension is refused at once, as the driver
 * refuses it (queued, policy/ would have no block to issue and the fence
 * after it would wait forever); the scheduler goes on. */
static void zero_grid_is_refused_at_once(void **st) {
  const uint32_t g[3] = {0, 4, 1}, b[3] = {32, 1, 1}, g2[3] = {37, 1, 1}, b0[3] = {32, 0, 1};
  CUresult err, launched;
  (void)st;
  assert_int_equal(one_be_launch(g, b, &err, &launched), 0);
  assert_int_equal(launched, CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(err, CUDA_SUCCESS);
  assert_int_equal(one_be_launch(g2, b0, &err, &launched), 0);
  assert_int_equal(launched, CUDA_ERROR_INVALID_VALUE);
  assert_true(one_be_launch(g2, b, &err, &launched) > 0); /* a sound launch gets variants */
  assert_int_equal(launched, CUDA_SUCCESS);
  assert_int_equal(err, CUDA_SUCCESS);
}

static int max_threads_of_variants(int v) {
  const hostd_var_kernel_t *k;
  unsigned forms;
  int rc = 0;
  start(3, 4);
  hostd__var_module_ref(cid);
  hostd__var_wait_idle();
  k = hostd__var_get(hostd__sched_kernel_id(cid, "ok"), &forms);
  for (int form = 0; k && form < 2; form++)
    rc |= hostd__gpu.func_set_attr(k->fn[form].f, 0, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, v);
  hostd__var_put(k);
  return k ? rc : -1;
}

/* The transform adds registers and shared memory, so a variant may take
 * fewer threads per block than the original: a launch whose block does
 * not fit the variant runs the original (recording device: the variant
 * functions report a limit of 16 threads). */
static void block_too_large_for_the_variant_runs_the_original(void **st) {
  const uint32_t g[3] = {37, 1, 1}, b[3] = {32, 1, 1};
  hostd_sched_tenant_t *lc, *be;
  hostd_sched_stream_t *ss;
  hostd_sched_stats_t s1;
  uint8_t args[12] = {0};
  hostd_sched_launch_t l = {.f = ok_f, .kernel_id = hostd__sched_kernel_id(cid, "ok"),
                            .args = args, .argbytes = sizeof(args)};
  uint64_t s;
  CUresult r;
  (void)st;
  memcpy(l.grid, g, sizeof(g));
  memcpy(l.block, b, sizeof(b));
  assert_int_equal(max_threads_of_variants(16), 0); /* the scheduler runs, variants loaded */
  assert_non_null(lc = hostd__sched_tenant_new(1, "lc", 0, 1));
  assert_non_null(be = hostd__sched_tenant_new(2, "be", 1, 1));
  assert_int_equal(hostd__gpu.stream_new(&s, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  assert_non_null(ss = hostd__sched_stream_new(be, s, &r));
  (void)hostd_record_blocks(NULL, 0);
  assert_int_equal(hostd__sched_launch(ss, &l), CUDA_SUCCESS);
  assert_int_equal(hostd__sched_fence(ss), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(s), CUDA_SUCCESS);
  assert_int_equal(hostd__sched_tenant_flush(be), CUDA_SUCCESS);
  hostd__sched_stats(&s1);
  assert_int_equal(s1.sliced + s1.ptb, 0);
  assert_int_equal(s1.issued, 1); /* one launch: the whole original */
  hostd__sched_tenant_close(be);
  hostd__sched_tenant_close(lc);
  hostd__sched_tenant_free(be);
  hostd__sched_tenant_free(lc);
  assert_int_equal(hostd__gpu.stream_del(s), CUDA_SUCCESS);
  hostd__var_module_unref(cid);
  hostd__sched_shutdown();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(variants_built_once_then_from_the_cache),
      cmocka_unit_test(slices_cover_a_1d_grid_once_in_order),
      cmocka_unit_test(slices_follow_the_occupancy),
      cmocka_unit_test(slices_cover_a_3d_grid_once_in_order),
      cmocka_unit_test(slices_run_on_the_whole_gpu_beside_a_partition),
      cmocka_unit_test(flag_memset_raises_flags_with_a_memset),
      cmocka_unit_test(flush_drain_is_the_device_turnaround),
      cmocka_unit_test(preempted_ptb_resumes_the_remaining_blocks),
      cmocka_unit_test(preempted_flush_reruns_the_blocks_that_gave_up),
      cmocka_unit_test(close_before_redo_frees_the_list),
      cmocka_unit_test(close_mid_ptb_frees_control_blocks_and_variants),
      cmocka_unit_test(modules_without_variants_keep_originals),
      cmocka_unit_test(reset_forgets_variants_without_the_gpu_and_later_loads_rebuild),
      cmocka_unit_test(refusals_are_logged_once_per_kernel_and_form),
      cmocka_unit_test(zero_grid_is_refused_at_once),
      cmocka_unit_test(block_too_large_for_the_variant_runs_the_original),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
