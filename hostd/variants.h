/* variants.h: transformed variants of tenants' PTX kernels (variants.c).
 *
 * When a tenant whose launches the scheduler holds loads a module, the
 * module's content id is handed to one builder thread per daemon.  Off the
 * request path it extracts the image's PTX, runs rewrite/ (slice and PTB
 * transforms, and FLUSH when configured), JIT-compiles the result (hostd__gpu.jit), caches the
 * compiled image in the state folder (rw_cache, keyed by the module image,
 * so a restart pays a file read) and loads it in the shared context.  From
 * then on a launch of one of the module's kernels (looked up by kernel id,
 * sched.h) can be launched sliced, as persistent thread blocks, or as
 * blocks that give up at a flag (FLUSH).  Until
 * then, and for kernels rewrite/ refused (logged once, with the reason),
 * only the original exists.
 *
 * Lifetime: one set of variants per content id, shared by every tenant
 * that loaded it, counted: each module load of a scheduled tenant holds a
 * reference (dropped at unload or when the tenant goes), the builder holds
 * one while it works, and the scheduler one per queued launch and one per
 * launch in flight.  The variant module is unloaded with the last one.
 *
 * Threads: any thread may call these; a lock guards the table.
 */
#ifndef TALLY_HOSTD_VARIANTS_H
#define TALLY_HOSTD_VARIANTS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Appended kernel parameters, in rewrite/rw.h's order. */
enum { VAR_SLICE_GX, VAR_SLICE_GY, VAR_SLICE_GZ, VAR_SLICE_OFFSET, VAR_SLICE_NEXTRA };
enum {
  VAR_PTB_GX,
  VAR_PTB_GY,
  VAR_PTB_GZ,
  VAR_PTB_CTL,
  VAR_PTB_FIRST,
  VAR_PTB_NSTATIC,
  VAR_PTB_BATCH,
  VAR_PTB_NEXTRA
};
enum {
  VAR_FLUSH_GX,
  VAR_FLUSH_GY,
  VAR_FLUSH_GZ,
  VAR_FLUSH_OFFSET,
  VAR_FLUSH_CTL,
  VAR_FLUSH_REDO,
  VAR_FLUSH_NEXTRA
};
#define VAR_FORM_SLICE 0
#define VAR_FORM_PTB   1
#define VAR_FORM_FLUSH 2
#define VAR_FORMS      3

/* One variant function: its handle and where its appended parameters go.
 * The parameters before them are the original kernel's, at the same
 * offsets (the transform only appends), so a launch copies the tenant's
 * argument buffer and writes the extra values at off[]; args_end is the
 * end of the whole buffer.  Offsets come from the driver (cuFuncGetParamInfo
 * of the loaded variant), never from our own layout rules. */
typedef struct hostd_var_fn {
  uint64_t f;               /* 0: rewrite/ refused this form */
  uint32_t first_extra;     /* offset of the first appended parameter */
  uint32_t args_end;        /* bytes of the whole parameter buffer */
  uint32_t off[VAR_PTB_NEXTRA], size[VAR_PTB_NEXTRA];
  uint32_t shmem_ok;        /* dynamic shared memory the function was opened to
                               (scheduler thread only) */
} hostd_var_fn_t;

typedef struct hostd_var_kernel {
  uint64_t kernel_id;
  hostd_var_fn_t fn[VAR_FORMS]; /* by VAR_FORM_* */
  struct hostd_var_set *set;
} hostd_var_kernel_t;

typedef struct hostd_var_config {
  char cache_dir[4200]; /* "" = compile every daemon start again */
  char tag[128];        /* compile configuration: cache key (device arch, driver) */
  unsigned forms;       /* bit VAR_FORM_*: the forms offered to the policy */
  unsigned arch;        /* SM number whose PTX to take (90) */
} hostd_var_config_t;

/* Parses --variants: "all" (slice, PTB and FLUSH), "slice", "ptb" (with
 * the sliced form, which resumes it), "flush", "slice+ptb", "off".  Sets
 * *forms (bits VAR_FORM_*); 0 or -EINVAL.  Inline: config.c links without
 * variants.c. */
static inline int hostd__var_parse(const char *s, unsigned *forms) {
  static const struct {
    const char *name;
    unsigned forms;
  } names[] = {
      {"off", 0},
      {"slice", 1u << VAR_FORM_SLICE},
      {"ptb", 1u << VAR_FORM_PTB},
      {"flush", 1u << VAR_FORM_FLUSH},
      {"slice+ptb", (1u << VAR_FORM_SLICE) | (1u << VAR_FORM_PTB)},
      {"all", (1u << VAR_FORMS) - 1},
  };
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strcmp(s, names[i].name) == 0) {
      *forms = names[i].forms;
      return 0;
    }
  return -EINVAL;
}

/* Starts the builder thread (forms 0: nothing is ever built).  0 or -errno. */
int hostd__var_init(const hostd_var_config_t *cfg);
/* Stops the builder, unloads every variant module.  Every reference must
 * have been dropped (tenants closed). */
void hostd__var_shutdown(void);

/* A scheduled tenant loaded the module image with content id cid (present
 * in the module cache): a reference, and a build if none was made yet. */
void hostd__var_module_ref(uint64_t cid);
void hostd__var_module_unref(uint64_t cid);

/* After a context-corrupting error (tenant.c, recover): every variant
 * module handle is stale.  Drops every set without touching the GPU: none
 * is found again, the module loads' references are dropped here (the
 * tenants are released without the GPU), a build in progress publishes
 * nothing, and a later hostd__var_module_ref builds anew.  References
 * that launches hold stay valid (memory only) until put. */
void hostd__var_reset(void);

/* The variants of kernel_id, with a reference held (hostd__var_put), or
 * NULL when it has none (yet).  *forms: the usable forms (VAR_FORM_* bits),
 * restricted to the configured ones. */
const hostd_var_kernel_t *hostd__var_get(uint64_t kernel_id, unsigned *forms);
void hostd__var_hold(const hostd_var_kernel_t *k); /* one more reference */
void hostd__var_put(const hostd_var_kernel_t *k);  /* NULL ok */

typedef struct hostd_var_stats {
  uint64_t builds;     /* modules the builder worked on */
  uint64_t jits;       /* of those, compiled (a cache miss) */
  uint64_t cache_hits; /* of those, read from the cache */
  uint64_t no_ptx;     /* of those, without PTX or without any accepted kernel */
  uint64_t failed;     /* of those, failed (JIT or load error, logged) */
  uint64_t kernels;    /* kernels with at least one variant, now */
  uint64_t refused;    /* kernel forms rewrite/ refused (logged once each) */
  uint64_t sets;       /* variant sets alive (content ids referenced) */
  uint64_t modules;    /* variant modules loaded now */
} hostd_var_stats_t;
void hostd__var_stats(hostd_var_stats_t *out);

/* Tests: waits until the builder has nothing queued or in progress. */
void hostd__var_wait_idle(void);

#endif /* TALLY_HOSTD_VARIANTS_H */
