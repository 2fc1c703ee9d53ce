/* rw-diff-variants.c: runs one intercepted launch as every variant and
 * compares, or times, them (the procedure is in rw-diff.h).
 *
 * Variants (the PTX conventions are the transformations', in rewrite/rw.h):
 *   orig-ptx   the untransformed entry, JIT-compiled from the registered PTX
 *   slice S    NAME__tally_slice launched ceil(total/S) times with S blocks
 *              and block offsets 0, S, 2S...; S in {1, 7, ceil(total/3)},
 *              skipping sizes that would need more than 4096 launches
 *   ptb W B    NAME__tally_ptb with W in {1, 5, min(total, one wave)}
 *              workers and batches of up to B in 1..4 indices (random), as a
 *              daemon launches it: the first launch runs
 *              indices [0, S) statically (S = min(W, total), control word 0
 *              set to S); in diff mode the preempt flag is set at a random
 *              moment by an async copy from pinned memory on a
 *              high-priority stream, then cleared and the kernel relaunched
 *              (randomly with or without statics from the resume point)
 *              until the control block says all blocks ran
 *   flush S    NAME__tally_flush in slices of S = min(total, one wave)
 *              blocks; in diff mode the give-up flag is raised at a random
 *              moment during each of the first three slices, and every
 *              slice is run again with tally_redo naming its control block
 *              until no block gave up (rewrite/rw.h)
 * Bench mode times native, orig-ptx, slice (one wave per slice) and ptb
 * (min(total, one wave) workers, a fresh launch with statics, the batch
 * size bench() explains) as medians of
 * RW_BENCH_REPS runs with CUDA events, and
 * measures preemption latency: host time from issuing the flag copy to the
 * worker stream draining (cuStreamSynchronize returning); and the same for
 * the FLUSH form's first slice (giveup_*: counted when a block gave up).
 *
 * A failed launch or sync leaves the context unusable, so it ends the
 * program with exit 1 after naming the kernel and variant.
 */
#include "tests/gpu/rw-diff.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Hook-owned resources, created on the first tested launch. */
static CUstream hs;          /* low-priority stream for variants */
static CUstream ps;          /* highest-priority stream for the preempt flag */
static CUdeviceptr ctl;      /* PTB control block, 16 bytes */
static uint32_t *one_pinned; /* pinned host word holding 1: the flag value */
static CUevent ev0, ev1;
static uint64_t rng;

/* PTB control block layout (rewrite/rw.h): u64 next at 0, u32 flag at 8. */
#define CTL_NEXT 0
#define CTL_FLAG 8
#define CTL_SIZE 16

/* PTB parameters after the original ones (rewrite/rw.h): gx, gy, gz, ctl,
 * first, nstatic, batch. */
#define PTB_EXTRA 7

/* Arguments of one PTB launch: the kernel's own, then PTB_EXTRA. */
typedef struct ptb_args {
  uint32_t gx, gy, gz, nstatic, batch;
  uint64_t first;
  void *kp[4096 + PTB_EXTRA];
} ptb_args_t;

/* Slices needing more launches than this are skipped: 4096 launches of a
 * few us each keep one variant under ~50 ms. */
#define MAX_SLICE_LAUNCHES 4096

static uint64_t rnd(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545F4914F6CDD1DULL;
}

static int restore(int which);

static void die(rwd_kernel_t *k, const char *variant, const char *what) {
  printf("FAIL     %s variant %s: %s (context unusable, stopping)\n", k->name, variant, what);
  fflush(stdout);
  _exit(1);
}

static void restore_or_die(rwd_kernel_t *k, int which, const char *variant) {
  if (restore(which) < 0)
    die(k, variant, "restoring device state failed");
}

static void sync_or_die(rwd_kernel_t *k, const char *variant) {
  CUresult r;
  rwd_watch("%s variant %s", k->name, variant);
  r = cuCtxSynchronize();
  rwd_unwatch();
  if (r != CUDA_SUCCESS) {
    const char *s = NULL;
    cuGetErrorName(r, &s);
    die(k, variant, s ? s : "sync failed");
  }
}

static int setup(void) {
  int least, greatest;
  CUcontext ctx = NULL;

  if (hs != NULL)
    return 0;
  cuCtxGetCurrent(&ctx);
  if (ctx == NULL) {
    cudaFree(NULL); /* makes cudart create and bind the primary context */
    cuCtxGetCurrent(&ctx);
  }
  if (ctx == NULL || rwd_cu(cuCtxGetStreamPriorityRange(&least, &greatest), "priority range") ||
      /* hs is a blocking stream: it orders after the legacy-stream copies
       * that restore device state (cuMemcpyDtoD does not wait for them). */
      rwd_cu(cuStreamCreateWithPriority(&hs, CU_STREAM_DEFAULT, least), "stream") ||
      rwd_cu(cuStreamCreateWithPriority(&ps, CU_STREAM_NON_BLOCKING, greatest), "stream") ||
      rwd_cu(cuMemAlloc(&ctl, CTL_SIZE), "cuMemAlloc ctl") ||
      rwd_cu(cuMemAllocHost((void **)&one_pinned, sizeof(*one_pinned)), "cuMemAllocHost") ||
      rwd_cu(cuEventCreate(&ev0, CU_EVENT_DEFAULT), "event") ||
      rwd_cu(cuEventCreate(&ev1, CU_EVENT_DEFAULT), "event"))
    return -1;
  *one_pinned = 1;
  rng = rwd_cfg.seed ^ 0x9E3779B97F4A7C15ULL;
  return 0;
}

/* ---- snapshots ---- */

/* which 0: ptr -> before; 1: ptr -> ref and host_ref; 2: ptr -> host_out */
static int snap(int which) {
  rwd_alloc_t *a;
  for (a = rwd_allocs; a != NULL; a = a->next) {
    if (which == 0) {
      if (a->before == 0 && rwd_cu(cuMemAlloc(&a->before, a->size), "snapshot alloc"))
        return -1;
      if (rwd_cu(cuMemcpyDtoD(a->before, a->ptr, a->size), "snapshot"))
        return -1;
    } else if (which == 1) {
      if (a->ref == 0 && rwd_cu(cuMemAlloc(&a->ref, a->size), "snapshot alloc"))
        return -1;
      if (a->host_ref == NULL && (a->host_ref = malloc(a->size)) == NULL)
        return -1;
      if (rwd_cu(cuMemcpyDtoD(a->ref, a->ptr, a->size), "snapshot") ||
          rwd_cu(cuMemcpyDtoH(a->host_ref, a->ptr, a->size), "snapshot"))
        return -1;
      if (a->mask != NULL)
        memset(a->mask, 0, a->size);
    } else {
      if (a->host_out == NULL && (a->host_out = malloc(a->size)) == NULL)
        return -1;
      if (rwd_cu(cuMemcpyDtoH(a->host_out, a->ptr, a->size), "snapshot"))
        return -1;
    }
  }
  /* device-to-device copies return before they finish: wait for them */
  return rwd_cu(cuCtxSynchronize(), "snapshot sync");
}

static int restore(int which) {
  rwd_alloc_t *a;
  for (a = rwd_allocs; a != NULL; a = a->next)
    if (rwd_cu(cuMemcpyDtoD(a->ptr, which == 0 ? a->before : a->ref, a->size), "restore"))
      return -1;
  return rwd_cu(cuCtxSynchronize(), "restore sync");
}

/* Compares host_out with host_ref outside masked bytes.  Returns the number
 * of differing bytes in allocations that are not scratch and describes the
 * first in where; *scratch gets the count in scratch allocations (rw-diff.h:
 * reported, not failed) and scratch_where the first of those. */
static size_t compare2(char *where, size_t where_len, size_t *scratch, char *scratch_where,
                       size_t scratch_where_len) {
  rwd_alloc_t *a;
  size_t bad = 0, sbad = 0;
  for (a = rwd_allocs; a != NULL; a = a->next) {
    if (memcmp(a->host_out, a->host_ref, a->size) == 0)
      continue;
    for (size_t i = 0; i < a->size; i++) {
      if (a->host_out[i] == a->host_ref[i] || (a->mask && a->mask[i]))
        continue;
      size_t *n = a->scratch ? &sbad : &bad;
      char *w = a->scratch ? scratch_where : where;
      size_t wl = a->scratch ? scratch_where_len : where_len;
      if ((*n)++ == 0 && w != NULL)
        snprintf(w, wl, "%sallocation %#llx+%zu (of %zu): got %02x want %02x",
                 a->scratch ? "scratch " : "", (unsigned long long)a->ptr, i, a->size,
                 a->host_out[i], a->host_ref[i]);
    }
  }
  if (scratch != NULL)
    *scratch = sbad;
  return bad;
}

/* Every differing byte, scratch included (native against native). */
static size_t compare(char *where, size_t where_len) {
  size_t sbad = 0, bad = compare2(where, where_len, &sbad, where, where_len);
  return bad + sbad;
}

/* Marks bytes where host_out differs from host_ref as nondeterministic. */
static size_t mask_differences(void) {
  rwd_alloc_t *a;
  size_t n = 0;
  for (a = rwd_allocs; a != NULL; a = a->next) {
    if (memcmp(a->host_out, a->host_ref, a->size) == 0)
      continue;
    if (a->mask == NULL && (a->mask = calloc(1, a->size)) == NULL)
      continue;
    for (size_t i = 0; i < a->size; i++)
      if (a->host_out[i] != a->host_ref[i]) {
        a->mask[i] = 1;
        n++;
      }
  }
  return n;
}

/* ---- variants ---- */

typedef struct variant_fns {
  CUfunction orig, slice, ptb, flush;
  unsigned nparams;
} variant_fns_t;

static unsigned param_count(CUfunction f) {
  size_t off, size;
  unsigned i;
  /* cuFuncGetParamInfo (CUDA 12.4+) fails past the last parameter; PTX
   * allows at most 4 KiB of parameters, so 4096 bounds the loop. */
  for (i = 0; i < 4096; i++)
    if (cuFuncGetParamInfo(f, i, &off, &size) != CUDA_SUCCESS)
      break;
  return i;
}

static const char *reason_for(rwd_kernel_t *k, int kind) {
  rwd_fatbin_t *fb = k->fb;
  if (fb == NULL)
    return "kernel not registered with a fatbin";
  if (!fb->have_xform)
    return fb->why[0] ? fb->why : "variant unavailable";
  for (size_t i = 0; i < fb->report.n_entries; i++) {
    rw_xform_entry_report_t *e = &fb->report.entries[i];
    if (e->name == NULL || strcmp(e->name, k->name) != 0)
      continue;
    if (e->status[kind] == 0)
      return NULL;
    return e->reason[kind][0] ? e->reason[kind] : "refused";
  }
  return "entry not in the transformation report";
}

static void find_fns(rwd_kernel_t *k, variant_fns_t *v, size_t shmem) {
  char name[4096];
  memset(v, 0, sizeof(*v));
  rwd_fatbin_load(k->fb);
  if (k->fb == NULL || k->fb->mod == NULL) {
    snprintf(k->unavailable[0], sizeof(k->unavailable[0]), "%s",
             k->fb && k->fb->why[0] ? k->fb->why : "no module");
    snprintf(k->unavailable[1], sizeof(k->unavailable[1]), "%s", k->unavailable[0]);
    return;
  }
  if (cuModuleGetFunction(&v->orig, k->fb->mod, k->name) != CUDA_SUCCESS) {
    v->orig = NULL;
    snprintf(k->unavailable[0], sizeof(k->unavailable[0]), "entry not found in the PTX module");
    snprintf(k->unavailable[1], sizeof(k->unavailable[1]), "entry not found in the PTX module");
    return;
  }
  for (int kind = 0; kind < 2; kind++) {
    const char *why = reason_for(k, kind);
    CUfunction f = NULL;
    if (why == NULL) {
      snprintf(name, sizeof(name), "%s%s", k->name, kind == 0 ? "__tally_slice" : "__tally_ptb");
      if (cuModuleGetFunction(&f, k->fb->mod, name) != CUDA_SUCCESS) {
        f = NULL;
        why = "transformed entry missing from the loaded module";
      }
    }
    if (why != NULL)
      snprintf(k->unavailable[kind], sizeof(k->unavailable[kind]), "%s", why);
    if (kind == 0)
      v->slice = f;
    else
      v->ptb = f;
  }
  /* The FLUSH form is optional here (a refusal is not reported). */
  if (reason_for(k, RW_XFORM_FLUSH) == NULL) {
    snprintf(name, sizeof(name), "%s__tally_flush", k->name);
    if (cuModuleGetFunction(&v->flush, k->fb->mod, name) != CUDA_SUCCESS)
      v->flush = NULL;
  }
  /* Kernels given more than the default 48 KiB of dynamic shared memory
   * had the attribute raised by the program on the native function. */
  if (shmem > 48 * 1024) {
    CUfunction fs[4] = {v->orig, v->slice, v->ptb, v->flush};
    for (int i = 0; i < 4; i++)
      if (fs[i])
        cuFuncSetAttribute(fs[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)shmem);
  }
  if (v->orig)
    v->nparams = param_count(v->orig);
}

static CUresult launch(CUfunction f, unsigned blocks, const rwd_launch_t *l, void **kp) {
  return cuLaunchKernel(f, blocks, 1, 1, l->block.x, l->block.y, l->block.z, (unsigned)l->shmem, hs,
                        kp, NULL);
}

/* The untransformed entry with the program's own grid and arguments. */
static CUresult launch_orig(CUfunction f, const rwd_launch_t *l) {
  return cuLaunchKernel(f, l->grid.x, l->grid.y, l->grid.z, l->block.x, l->block.y, l->block.z,
                        (unsigned)l->shmem, hs, l->args, NULL);
}

/* Slice: ceil(total/S) launches of NAME__tally_slice. */
static CUresult run_slice(CUfunction f, const rwd_launch_t *l, const variant_fns_t *v,
                          uint64_t slice) {
  uint32_t gx = l->grid.x, gy = l->grid.y, gz = l->grid.z;
  uint64_t total = (uint64_t)gx * gy * gz, off;
  void *kp[4096 + 4];
  CUresult r = CUDA_SUCCESS;

  memcpy(kp, l->args, v->nparams * sizeof(void *));
  kp[v->nparams] = &gx;
  kp[v->nparams + 1] = &gy;
  kp[v->nparams + 2] = &gz;
  kp[v->nparams + 3] = &off;
  for (off = 0; off < total && r == CUDA_SUCCESS; off += slice) {
    uint64_t n = total - off < slice ? total - off : slice;
    r = launch(f, (unsigned)n, l, kp);
  }
  return r;
}

/* Fills a's kernel argument pointers for l. */
static void ptb_args_init(ptb_args_t *a, const rwd_launch_t *l, const variant_fns_t *v) {
  a->gx = l->grid.x;
  a->gy = l->grid.y;
  a->gz = l->grid.z;
  a->first = 0;
  a->nstatic = 0;
  a->batch = 1;
  memcpy(a->kp, l->args, v->nparams * sizeof(void *));
  a->kp[v->nparams] = &a->gx;
  a->kp[v->nparams + 1] = &a->gy;
  a->kp[v->nparams + 2] = &a->gz;
  a->kp[v->nparams + 3] = &ctl;
  a->kp[v->nparams + 4] = &a->first;
  a->kp[v->nparams + 5] = &a->nstatic;
  a->kp[v->nparams + 6] = &a->batch;
}

/* Prepares a PTB launch of `workers` workers that resumes at index `next`
 * (0 for a fresh launch), as rw.h says a daemon does: with statics, the
 * workers w < S run next + w without taking them, control word 0 becomes
 * next + S, and the flag is cleared (one 16-byte write). */
static CUresult ptb_prepare(ptb_args_t *a, uint64_t total, uint64_t next, unsigned workers,
                            int statics) {
  rw_ptb_launch_t pl;
  uint64_t word[2];
  if (rw_ptb_plan(total, next, workers, statics, &pl) != 0)
    return CUDA_ERROR_INVALID_VALUE; /* callers only plan launches with work left */
  a->first = pl.first;
  a->nstatic = pl.nstatic;
  word[0] = pl.word0;
  word[1] = 0; /* flag and reserved */
  return cuMemcpyHtoD(ctl, word, sizeof(word));
}

/* PTB: W workers taking batches of up to `batch` indices; with inject, the
 * flag is set at a random moment during each of the first three launches,
 * then the kernel is relaunched from where the control block says it
 * stopped (with statics or without, at random) until it reports every
 * block taken. */
static CUresult run_ptb(rwd_kernel_t *k, CUfunction f, const rwd_launch_t *l,
                        const variant_fns_t *v, unsigned workers, uint32_t batch, int inject,
                        double native_us, unsigned *preempted, const char *vname) {
  uint64_t total = (uint64_t)l->grid.x * l->grid.y * l->grid.z, next = 0;
  ptb_args_t a;
  CUresult r;
  unsigned round;

  ptb_args_init(&a, l, v);
  a.batch = batch;
  if ((r = ptb_prepare(&a, total, 0, workers, 1)) != CUDA_SUCCESS)
    return r;
  /* Each relaunch after a preemption runs at least its statics or takes
   * one block unless the flag lands first; injection stops after round 3,
   * so total + 8 rounds bound a correct kernel. */
  for (round = 0; round < total + 8; round++) {
    if ((r = launch(f, workers, l, a.kp)) != CUDA_SUCCESS)
      return r;
    if (inject && round < 3 && rnd() % 4 != 0) {
      double span = native_us > 20 ? native_us : 20, t0 = rwd_now_us();
      double delay = (double)(rnd() % 1000) / 1000.0 * span * 1.2;
      while (rwd_now_us() - t0 < delay)
        ; /* busy-wait: the point is a random moment while workers run */
      if ((r = cuMemcpyHtoDAsync(ctl + CTL_FLAG, one_pinned, 4, ps)) != CUDA_SUCCESS)
        return r;
    }
    rwd_watch("%s variant %s (round %u)", k->name, vname, round);
    r = cuStreamSynchronize(hs);
    if (r == CUDA_SUCCESS)
      r = cuStreamSynchronize(ps);
    rwd_unwatch();
    if (r != CUDA_SUCCESS)
      return r;
    if ((r = cuMemcpyDtoH(&next, ctl + CTL_NEXT, sizeof(next))) != CUDA_SUCCESS)
      return r;
    if (next >= total)
      return CUDA_SUCCESS;
    (*preempted)++;
    if ((r = ptb_prepare(&a, total, next, workers, (int)(rnd() & 1))) != CUDA_SUCCESS)
      return r;
  }
  printf("FAIL     %s variant %s: no progress after %u relaunches (next=%llu of %llu)\n", k->name,
         vname, round, (unsigned long long)next, (unsigned long long)total);
  return CUDA_ERROR_LAUNCH_TIMEOUT;
}

/* FLUSH: slices of S blocks; the flag raised at a random moment during
 * each of the first three slices (inject), each slice run again from its
 * control block's list of given-up blocks until none gave up.  Two control
 * blocks of 16 + 4 S bytes take turns (a redo reads one, writes the other). */
static CUresult run_flush(rwd_kernel_t *k, CUfunction f, const rwd_launch_t *l,
                          const variant_fns_t *v, uint64_t slice, int inject, double native_us,
                          const char *vname) {
  uint32_t gx = l->grid.x, gy = l->grid.y, gz = l->grid.z, n = 0;
  uint64_t total = (uint64_t)gx * gy * gz, off = 0, none = 0, redo;
  CUdeviceptr blk[2] = {0, 0}, cur;
  size_t bytes = 16 + 4 * (size_t)slice;
  void *kp[4096 + 6];
  unsigned slices = 0;
  CUresult r;

  if ((r = cuMemAlloc(&blk[0], bytes)) != CUDA_SUCCESS ||
      (r = cuMemAlloc(&blk[1], bytes)) != CUDA_SUCCESS)
    goto out;
  memcpy(kp, l->args, v->nparams * sizeof(void *));
  kp[v->nparams] = &gx;
  kp[v->nparams + 1] = &gy;
  kp[v->nparams + 2] = &gz;
  kp[v->nparams + 3] = &off;
  kp[v->nparams + 4] = &cur;
  kp[v->nparams + 5] = &redo;
  for (off = 0; off < total; off += slice, slices++) {
    uint64_t count = total - off < slice ? total - off : slice;
    int which = 0;
    redo = none;
    for (unsigned round = 0;; round++) {
      cur = blk[which];
      if ((r = cuMemsetD8Async(cur, 0, 16, hs)) != CUDA_SUCCESS ||
          (r = launch(f, (unsigned)(redo ? n : count), l, kp)) != CUDA_SUCCESS)
        goto out;
      if (inject && slices < 3 && round < 3 && rnd() % 4 != 0) {
        double span = native_us > 20 ? native_us : 20, t0 = rwd_now_us();
        double delay = (double)(rnd() % 1000) / 1000.0 * span * 1.2;
        while (rwd_now_us() - t0 < delay)
          ; /* busy-wait: a random moment while blocks run */
        if ((r = cuMemcpyHtoDAsync(cur, one_pinned, 4, ps)) != CUDA_SUCCESS)
          goto out;
      }
      rwd_watch("%s variant %s (offset %llu round %u)", k->name, vname, (unsigned long long)off,
                round);
      r = cuStreamSynchronize(hs);
      if (r == CUDA_SUCCESS)
        r = cuStreamSynchronize(ps);
      rwd_unwatch();
      if (r != CUDA_SUCCESS || (r = cuMemcpyDtoH(&n, cur + 4, 4)) != CUDA_SUCCESS)
        goto out;
      if (n == 0)
        break;
      if (n > count || round > 64) {
        printf("FAIL     %s variant %s: %u blocks gave up of a launch of %llu (round %u)\n",
               k->name, vname, n, (unsigned long long)count, round);
        r = CUDA_ERROR_LAUNCH_FAILED;
        goto out;
      }
      k->given_up += n;
      redo = cur;
      which ^= 1;
    }
  }
out:
  for (int i = 0; i < 2; i++)
    if (blk[i])
      cuMemFree(blk[i]);
  return r;
}

/* The worker count a daemon launches: one wave, but no more workers than
 * the grid has blocks. */
static unsigned workers_of(unsigned wave, uint64_t total) {
  return total < wave ? (unsigned)total : wave;
}

static unsigned wave_of(CUfunction f, const rwd_launch_t *l) {
  int per_sm = 0;
  unsigned threads = l->block.x * l->block.y * l->block.z;
  if (cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, (int)threads, l->shmem) !=
          CUDA_SUCCESS ||
      per_sm < 1)
    per_sm = 1;
  return (unsigned)per_sm * (unsigned)(rwd_sm_count > 0 ? rwd_sm_count : 1);
}

/* Records the outcome of one variant run. */
static void judge(rwd_kernel_t *k, const char *vname, CUresult r) {
  char where[200] = "", swhere[200] = "";
  size_t bad, sbad = 0;
  if (r != CUDA_SUCCESS) {
    const char *s = NULL;
    cuGetErrorName(r, &s);
    die(k, vname, s ? s : "launch failed");
  }
  sync_or_die(k, vname);
  if (snap(2) < 0)
    die(k, vname, "snapshot failed");
  bad = compare2(where, sizeof(where), &sbad, swhere, sizeof(swhere));
  if (sbad > 0) {
    k->scratch_diffs++;
    printf("SCRATCH  %s variant %s: %zu bytes of scratch differ (not a failure), first at %s\n",
           k->name, vname, sbad, swhere);
  }
  if (bad == 0) {
    k->variants_ok++;
    return;
  }
  k->variants_bad++;
  if (k->first_bad[0] == 0)
    snprintf(k->first_bad, sizeof(k->first_bad), "%.60s: %zu bytes differ, first at %.300s", vname,
             bad, where);
  printf("MISMATCH %s variant %s: %zu bytes differ, first at %s\n", k->name, vname, bad, where);
}

static void diff_variants(rwd_kernel_t *k, const rwd_launch_t *l, const variant_fns_t *v,
                          double native_us) {
  uint64_t total = (uint64_t)l->grid.x * l->grid.y * l->grid.z;
  uint64_t sizes[3] = {1, 7, (total + 2) / 3};
  char vname[64];

  if (v->orig != NULL) {
    restore_or_die(k, 0, "orig-ptx");
    judge(k, "orig-ptx", launch_orig(v->orig, l));
  }
  if (v->slice != NULL) {
    for (int i = 0; i < 3; i++) {
      if ((i > 0 && sizes[i] == sizes[0]) || (i > 1 && sizes[i] == sizes[1]))
        continue;
      if ((total + sizes[i] - 1) / sizes[i] > MAX_SLICE_LAUNCHES)
        continue;
      snprintf(vname, sizeof(vname), "slice S=%llu", (unsigned long long)sizes[i]);
      restore_or_die(k, 0, vname);
      judge(k, vname, run_slice(v->slice, l, v, sizes[i]));
    }
  }
  if (v->ptb != NULL) {
    unsigned ws[3] = {1, 5, workers_of(wave_of(v->ptb, l), total)};
    for (int i = 0; i < 3; i++) {
      unsigned pre = 0;
      if ((i > 0 && ws[i] == ws[0]) || (i > 1 && ws[i] == ws[1]))
        continue;
      uint32_t batch = 1 + (uint32_t)(rnd() % 4);
      snprintf(vname, sizeof(vname), "ptb W=%u B=%u+preempt", ws[i], batch);
      restore_or_die(k, 0, vname);
      CUresult r = run_ptb(k, v->ptb, l, v, ws[i], batch, 1, native_us, &pre, vname);
      k->preemptions += pre;
      judge(k, vname, r);
    }
  }
  if (v->flush != NULL) {
    uint64_t s = workers_of(wave_of(v->flush, l), total);
    snprintf(vname, sizeof(vname), "flush S=%llu+give-up", (unsigned long long)s);
    restore_or_die(k, 0, vname);
    judge(k, vname, run_flush(k, v->flush, l, v, s, 1, native_us, vname));
  }
}

/* ---- bench ---- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n) {
  qsort(v, n, sizeof(*v), cmp_double);
  return n ? v[n / 2] : NAN;
}

/* Times fn over RW_BENCH_REPS runs (state restored before each, outside
 * the timed region) and returns the median in microseconds. */
typedef CUresult (*timed_fn)(rwd_kernel_t *k, const rwd_launch_t *l, const variant_fns_t *v,
                             unsigned param, CUstream *stream);

static CUresult t_native(rwd_kernel_t *k, const rwd_launch_t *l, const variant_fns_t *v,
                         unsigned param, CUstream *stream) {
  (void)k, (void)v, (void)param;
  *stream = (CUstream)l->stream;
  return rwd_native(l) == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_FAILED;
}
static CUresult t_orig(rwd_kernel_t *k, const rwd_launch_t *l, const variant_fns_t *v,
                       unsigned param, CUstream *stream) {
  (void)k, (void)param;
  *stream = hs;
  return launch_orig(v->orig, l);
}
static CUresult t_slice(rwd_kernel_t *k, const rwd_launch_t *l, const variant_fns_t *v,
                        unsigned param, CUstream *stream) {
  (void)k;
  *stream = hs;
  return run_slice(v->slice, l, v, param);
}
/* Bench PTB arguments: prepared (control block written) before the timed
 * region by ptb_bench_prepare, launched inside it by t_ptb. */
static ptb_args_t bench_args;

static uint32_t bench_batch; /* bench(): the batch size a daemon would pick */

static CUresult ptb_bench_prepare(const rwd_launch_t *l, const variant_fns_t *v, unsigned workers) {
  ptb_args_init(&bench_args, l, v);
  bench_args.batch = bench_batch;
  return ptb_prepare(&bench_args, (uint64_t)l->grid.x * l->grid.y * l->grid.z, 0, workers, 1);
}

static CUresult t_ptb(rwd_kernel_t *k, const rwd_launch_t *l, const variant_fns_t *v,
                      unsigned param, CUstream *stream) {
  (void)k, (void)v;
  *stream = hs;
  return launch(v->ptb, param, l, bench_args.kp);
}

static double time_variant(rwd_kernel_t *k, const rwd_launch_t *l, const variant_fns_t *v,
                           timed_fn fn, unsigned param, const char *vname) {
  double *t = calloc(rwd_cfg.bench_reps, sizeof(double)), m;
  unsigned n = 0;
  if (t == NULL)
    return NAN;
  for (unsigned i = 0; i < rwd_cfg.bench_reps; i++) {
    CUstream s = NULL;
    float ms = 0;
    restore_or_die(k, 0, vname);
    if (fn == t_ptb ? ptb_bench_prepare(l, v, param) != CUDA_SUCCESS
                    : cuMemsetD8(ctl, 0, CTL_SIZE) != CUDA_SUCCESS)
      die(k, vname, "control block write failed");
    sync_or_die(k, vname);
    /* the event goes on the stream the variant uses, recorded just before */
    CUstream target = fn == t_native ? (CUstream)l->stream : hs;
    cuEventRecord(ev0, target);
    if (fn(k, l, v, param, &s) != CUDA_SUCCESS)
      die(k, vname, "launch failed");
    cuEventRecord(ev1, s);
    sync_or_die(k, vname);
    if (cuEventElapsedTime(&ms, ev0, ev1) == CUDA_SUCCESS)
      t[n++] = ms * 1000.0;
  }
  m = median(t, n);
  free(t);
  return m;
}

static void bench(rwd_kernel_t *k, const rwd_launch_t *l, const variant_fns_t *v) {
  uint64_t total = (uint64_t)l->grid.x * l->grid.y * l->grid.z;
  unsigned wave = v->ptb ? wave_of(v->ptb, l) : v->slice ? wave_of(v->slice, l) : 0;
  unsigned workers = workers_of(wave, total);
  double block_ns;
  double lat[20];
  unsigned nl = 0;

  k->benched = 1;
  k->total_blocks = (unsigned)total;
  k->wave_blocks = wave;
  k->native_us = time_variant(k, l, v, t_native, 0, "native");
  /* The batch a daemon would pick from its profile (policy/ has the time
   * per block per worker): the most indices that run in RW_BENCH_BATCH_US
   * (default 12 us; 0 = one index per take), at most 64.  A take costs two
   * dependent global accesses and a barrier, and same-address atomics
   * serialize in L2 (about 1.4 ns each on the H200: rewrite/xform-apply.c),
   * so long grids of short blocks want big batches; preemption waits for a
   * batch, and 12 us plus the flag's ~10 us (p50) stays under the 50 us
   * target.  The kernel itself shrinks batches as the grid runs out. */
  block_ns = total > 0 ? k->native_us * 1000.0 * workers / (double)total : 0;
  bench_batch = 1;
  if (block_ns > 0) {
    const char *e = getenv("RW_BENCH_BATCH_US");
    double bb = floor((e && *e ? atof(e) : 12.0) * 1000.0 / block_ns);
    bench_batch = bb > 1 ? (bb < 64 ? (uint32_t)bb : 64) : 1;
  }
  k->origptx_us = v->orig ? time_variant(k, l, v, t_orig, 0, "orig-ptx") : NAN;
  k->slice_us = v->slice ? time_variant(k, l, v, t_slice, wave, "slice") : NAN;
  k->ptb_us = v->ptb ? time_variant(k, l, v, t_ptb, workers, "ptb") : NAN;
  k->block_us = total > wave && wave > 0 ? k->native_us * wave / (double)total : k->native_us;
  /* Preemption latency: only meaningful while work remains to be taken. */
  if (v->ptb && total > wave) {
    for (unsigned i = 0; i < 20; i++) {
      uint64_t next = 0;
      CUstream s;
      restore_or_die(k, 0, "preempt");
      if (ptb_bench_prepare(l, v, workers) != CUDA_SUCCESS)
        die(k, "preempt", "control block write failed");
      sync_or_die(k, "preempt");
      double t_launch = rwd_now_us();
      if (t_ptb(k, l, v, workers, &s) != CUDA_SUCCESS)
        die(k, "preempt", "launch failed");
      double delay = (0.1 + 0.4 * (double)(rnd() % 1000) / 1000.0) * k->ptb_us;
      while (rwd_now_us() - t_launch < delay)
        ;
      double t0 = rwd_now_us();
      cuMemcpyHtoDAsync(ctl + CTL_FLAG, one_pinned, 4, ps);
      rwd_watch("%s preempt", k->name);
      cuStreamSynchronize(hs);
      double t1 = rwd_now_us();
      rwd_unwatch();
      sync_or_die(k, "preempt");
      cuMemcpyDtoH(&next, ctl + CTL_NEXT, sizeof(next));
      if (next < total)
        lat[nl++] = t1 - t0;
    }
  }
  qsort(lat, nl, sizeof(lat[0]), cmp_double);
  /* Give-up latency of the FLUSH form: its first slice (one wave), the flag
   * raised 10-50% into the run, host time until the stream drained; counted
   * when some block gave up. */
  double glat[20];
  unsigned ng = 0;
  if (v->flush) {
    uint64_t s = workers_of(wave_of(v->flush, l), total);
    CUdeviceptr blk = 0;
    uint32_t n = 0;
    double slice_us = k->slice_us > 0 && total > s ? k->slice_us * (double)s / (double)total
                                                   : k->native_us;
    if (cuMemAlloc(&blk, 16 + 4 * (size_t)s) != CUDA_SUCCESS)
      die(k, "give-up", "control block allocation failed");
    for (unsigned i = 0; i < 20; i++) {
      uint32_t gx = l->grid.x, gy = l->grid.y, gz = l->grid.z;
      uint64_t off = 0, redo = 0;
      void *kp[4096 + 6];
      memcpy(kp, l->args, v->nparams * sizeof(void *));
      kp[v->nparams] = &gx, kp[v->nparams + 1] = &gy, kp[v->nparams + 2] = &gz;
      kp[v->nparams + 3] = &off, kp[v->nparams + 4] = &blk, kp[v->nparams + 5] = &redo;
      restore_or_die(k, 0, "give-up");
      if (cuMemsetD8(blk, 0, 16) != CUDA_SUCCESS)
        die(k, "give-up", "control block write failed");
      sync_or_die(k, "give-up");
      double t_launch = rwd_now_us();
      if (launch(v->flush, (unsigned)s, l, kp) != CUDA_SUCCESS)
        die(k, "give-up", "launch failed");
      double delay = (0.1 + 0.4 * (double)(rnd() % 1000) / 1000.0) * slice_us;
      while (rwd_now_us() - t_launch < delay)
        ;
      double t0 = rwd_now_us();
      cuMemcpyHtoDAsync(blk, one_pinned, 4, ps);
      rwd_watch("%s give-up", k->name);
      cuStreamSynchronize(hs);
      double t1 = rwd_now_us();
      rwd_unwatch();
      sync_or_die(k, "give-up");
      cuMemcpyDtoH(&n, blk + 4, sizeof(n));
      if (n > 0)
        glat[ng++] = t1 - t0;
    }
    cuMemFree(blk);
  }
  qsort(glat, ng, sizeof(glat[0]), cmp_double);
  printf("BENCH %s total=%llu wave=%u workers=%u batch=%u native_us=%.2f origptx_us=%.2f "
         "slice_us=%.2f "
         "ptb_us=%.2f "
         "block_us=%.2f preempt_n=%u preempt_p50_us=%.1f preempt_max_us=%.1f giveup_n=%u "
         "giveup_p50_us=%.1f giveup_max_us=%.1f\n",
         k->name, (unsigned long long)total, wave, workers, bench_batch, k->native_us,
         k->origptx_us, k->slice_us, k->ptb_us, k->block_us, nl, nl ? lat[nl / 2] : NAN,
         nl ? lat[nl - 1] : NAN, ng, ng ? glat[ng / 2] : NAN, ng ? glat[ng - 1] : NAN);
  for (unsigned i = 0; i < nl; i++)
    printf("PREEMPT %s block_us=%.2f latency_us=%.1f\n", k->name, k->block_us, lat[i]);
  for (unsigned i = 0; i < ng; i++)
    printf("GIVEUP %s block_us=%.2f latency_us=%.1f\n", k->name, k->block_us, glat[i]);
}

/* ---- entry ---- */

cudaError_t rwd_test_launch(rwd_kernel_t *k, const rwd_launch_t *l) {
  variant_fns_t v;
  cudaError_t native;
  double t0, native_us;
  char where[200];

  if (setup() < 0)
    return rwd_native(l);
  k->tested++;
  sync_or_die(k, "(before)");
  find_fns(k, &v, l->shmem);
  if (snap(0) < 0)
    die(k, "native", "snapshot failed");
  t0 = rwd_now_us();
  native = rwd_native(l);
  if (native != cudaSuccess) {
    /* The program sees the same error it would have seen natively. */
    k->tested--;
    return native;
  }
  sync_or_die(k, "native");
  native_us = rwd_now_us() - t0;
  if (snap(1) < 0)
    die(k, "native", "snapshot failed");
  if (rwd_cfg.mode == RWD_MODE_BENCH) {
    bench(k, l, &v);
  } else {
    /* second native run: bytes that differ are nondeterministic */
    restore_or_die(k, 0, "native (again)");
    if (rwd_native(l) != cudaSuccess)
      die(k, "native (again)", "launch failed");
    sync_or_die(k, "native (again)");
    if (snap(2) < 0)
      die(k, "native", "snapshot failed");
    if (compare(where, sizeof(where)) > 0) {
      k->nondet++;
      printf("NONDET   %s: two native runs differ (%zu bytes masked), first at %s\n", k->name,
             mask_differences(), where);
    }
    diff_variants(k, l, &v, native_us);
  }
  restore_or_die(k, 1, "(restore)");
  return native;
}
