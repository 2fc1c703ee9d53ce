/* wholerun.c: a measured run made ready for the simulator: tallyd's
 * whole-run trace cut into the LC's requests and the BE's steps, the
 * arrivals the run really had, and the launch latency it showed.
 *
 * Sources, best first:
 *  - requests: the LC CSV's rows (req,arrival_ns,start_ns,end_ns) as
 *    windows, else the synchronisation rule of sim_runtrace_split;
 *  - steps: the BE CSV's rows (iter,start_ns,end_ns), else the same rule;
 *  - arrivals: the LC CSV's arrival_ns of each request that has kernels,
 *    else an arrivals file (offsets in ns, one a line: what
 *    `tally-pairs arrivals` wrote for the run), else each request's first
 *    submit time.  Offsets start at 0 (the first arrival).
 * The launch latency (sim_gpu_config_t launch_ns) is the LC's, from
 * sim_runtrace_launch: start - submit of its timed launches on an idle
 * stream; when tallyd timed none (it never times LC launches: their start=
 * is the end it saw), tallyd's part (issue - submit of the LC's launches)
 * plus the driver's (start - issue of the BE's timed launches).  The LC's
 * untimed launches get block times estimated from host times
 * (sim_runtrace_estimate_untimed with that driver part and the H200's SM
 * count, which is what tallyd divides by on it) before the cut.
 */
#include "sim/sim.h"
#include "sim/pairs.h"
#include "sim/sim-int.h"
#include "policy/pol-gpu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CSV_MAX ((size_t)1 << 30)

static int load_windows(const char *path, bool lc, sim_span_t **out, size_t *n, char *err,
                        size_t errlen) {
  char *buf, e[200];
  size_t len;
  int rc = sim__read_file(path, CSV_MAX, &buf, &len);
  if (rc < 0) {
    snprintf(err, errlen, "%s: %s", path, strerror(-rc));
    return rc;
  }
  sim_pairs_req_t *r = NULL;
  sim_pairs_iter_t *it = NULL;
  rc = lc ? sim_pairs_lc_parse(buf, len, &r, n, e, sizeof(e))
          : sim_pairs_be_parse(buf, len, &it, n, e, sizeof(e));
  free(buf);
  if (rc < 0) {
    snprintf(err, errlen, "%s: %s", path, e);
    return rc;
  }
  sim_span_t *w = malloc((*n ? *n : 1) * sizeof(*w));
  for (size_t i = 0; w && i < *n; i++)
    w[i] = lc ? (sim_span_t){r[i].arrival_ns, r[i].start_ns, r[i].end_ns}
              : (sim_span_t){it[i].start_ns, it[i].start_ns, it[i].end_ns};
  free(r);
  free(it);
  if (!w) {
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  *out = w;
  return 0;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Arrivals as offsets from the first, from the units or the file. */
static int make_arrivals(sim_wholerun_t *w, const char *path, bool from_csv, char *err,
                         size_t errlen) {
  sim_arrivals_t *a = &w->arrivals;
  int rc;
  if (path && !from_csv) {
    char *buf;
    size_t len;
    if ((rc = sim__read_file(path, CSV_MAX, &buf, &len)) < 0) {
      snprintf(err, errlen, "%s: %s", path, strerror(-rc));
      return rc;
    }
    char e[200];
    rc = sim_arrivals_parse(a, buf, len, e, sizeof(e));
    free(buf);
    if (rc < 0)
      snprintf(err, errlen, "%s: %s", path, e);
    return rc;
  }
  a->t_ns = malloc(w->lc.n * sizeof(*a->t_ns));
  if (!a->t_ns) {
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  a->n = w->lc.n;
  memcpy(a->t_ns, w->lc.arrival_ns, a->n * sizeof(*a->t_ns));
  qsort(a->t_ns, a->n, sizeof(*a->t_ns), cmp_u64);
  for (size_t i = a->n; i-- > 0;)
    a->t_ns[i] -= a->t_ns[0];
  return 0;
}

int sim_wholerun_load(const char *trace, const char *lc_csv, const char *be_csv,
                      const char *arrivals, sim_wholerun_t *w, char *err, size_t errlen) {
  sim_span_t *lw = NULL, *bw = NULL;
  size_t nl = 0, nb = 0;
  char e[200];
  int rc;
  memset(w, 0, sizeof(*w));
  if ((rc = sim_runtrace_load(trace, &w->rt, e, sizeof(e))) < 0) {
    snprintf(err, errlen, "%s: %s", trace, e);
    return rc;
  }
  if ((rc = sim_runtrace_launch(&w->rt, POL_CLASS_LC, &w->launch)) < 0) {
    snprintf(err, errlen, "out of memory");
    goto fail;
  }
  sim_runtrace_estimate_untimed(&w->rt, w->launch.driver_ns, POL_GPU_SM_COUNT);
  if ((lc_csv && (rc = load_windows(lc_csv, true, &lw, &nl, err, errlen)) < 0) ||
      (be_csv && (rc = load_windows(be_csv, false, &bw, &nb, err, errlen)) < 0))
    goto fail;
  if ((rc = sim_runtrace_split(&w->rt, POL_CLASS_LC, lw, nl, &w->lc, e, sizeof(e))) < 0 ||
      (rc = sim_runtrace_split(&w->rt, POL_CLASS_BE, bw, nb, &w->be, e, sizeof(e))) < 0) {
    snprintf(err, errlen, "%s: %s", trace, e);
    goto fail;
  }
  if ((rc = make_arrivals(w, arrivals, lc_csv != NULL, err, errlen)) < 0)
    goto fail;
  if (w->arrivals.n == 0) {
    snprintf(err, errlen, "no arrivals");
    rc = -EINVAL;
    goto fail;
  }
  snprintf(w->label, sizeof(w->label), "%s/%s", w->lc.u[0].name, w->be.u[0].name);
  free(lw);
  free(bw);
  return 0;
fail:
  free(lw);
  free(bw);
  sim_wholerun_close(w);
  return rc;
}

void sim_wholerun_close(sim_wholerun_t *w) {
  sim_runtrace_close(&w->rt);
  sim_units_close(&w->lc);
  sim_units_close(&w->be);
  sim_arrivals_close(&w->arrivals);
}
