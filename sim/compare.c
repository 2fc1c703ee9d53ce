/* compare.c: one workload pair under every policy, as tally-sim reports it.
 *
 * Method (the measured baselines of docs/h200.md used the same one on the
 * GPU): the LC trace
 * alone gives its service time S (one request on an idle GPU); requests
 * arrive open-loop at load / S per second (bursty generator or an Azure
 * Functions 2021 CSV); the LC alone under those arrivals gives the reference
 * p50/p99; the BE trace alone (closed loop) gives the reference throughput;
 * then each policy runs the pair on the same arrivals.  Overhead is p99
 * against the LC alone; BE throughput is BE work against the BE alone; system
 * throughput is the sum of the two normalized throughputs (Tally paper's
 * definition).  Everything derives from cfg->seed: same seed, same rows.
 */
#include "sim/sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sim_compare_config_init(sim_compare_config_t *c) {
  memset(c, 0, sizeof(*c));
  sim_gpu_config_init(&c->gpu);
  pol_config_init(&c->pol);
  c->pol.flag_latency_ns = c->gpu.flag_ns;
  c->load = 0.5;
  c->duration_ns = 2000000000ull;
  c->seed = 1;
  for (int k = 0; k < POL_KIND_COUNT; k++)
    c->kinds[k] = true;
}

typedef struct prog {
  const sim_compare_config_t *c;
  char what[160];
} prog_t;

static void on_progress(void *arg, uint64_t now, uint64_t end) {
  prog_t *p = arg;
  p->c->progress(p->c->progress_arg, p->what, now, end);
}

static int run_one(const sim_compare_config_t *c, pol_kind_t kind, const sim_tenant_spec_t *ts,
                   uint32_t n, const char *what, sim_result_t *res, const char **why) {
  sim_run_config_t rc;
  prog_t p = {.c = c};
  memset(&rc, 0, sizeof(rc));
  rc.gpu = c->gpu;
  rc.pol = c->pol;
  rc.kind = kind;
  rc.duration_ns = c->duration_ns;
  rc.ntenants = n;
  rc.lc_ctx_wait_every = c->lc_ctx_wait_every;
  memcpy(rc.tenants, ts, n * sizeof(*ts));
  if (kind == POL_KIND_TALLY)
    rc.profile_path = c->profile_path;
  if (c->progress) {
    snprintf(p.what, sizeof(p.what), "%s", what);
    rc.progress = on_progress;
    rc.progress_arg = &p;
  }
  return sim_run(&rc, res, why);
}

static int add_row(sim_row_t **rows, size_t *nrows, sim_row_t *r) {
  sim_row_t *n = realloc(*rows, (*nrows + 1) * sizeof(*n));
  if (!n)
    return -ENOMEM;
  n[*nrows] = *r;
  *rows = n;
  (*nrows)++;
  return 0;
}

static double ms(uint64_t ns) {
  return (double)ns / 1e6;
}

int sim_compare_pair(const sim_compare_config_t *c, const sim_trace_t *lc, const sim_trace_t *be,
                     sim_row_t **rows, size_t *nrows, const char **why) {
  char label[2 * SIM_NAME_MAX + 2];
  snprintf(label, sizeof(label), "%s/%s", lc->name, be->name);
  return sim_compare_units(c, label, lc, 1, be, 1, rows, nrows, why);
}

/* The generated arrivals at load x the LC's capacity alone (1 / the
 * service time of its first request on an idle GPU), or at the rate a mean
 * gap gives. */
static int make_arrivals(const sim_compare_config_t *c, const sim_tenant_spec_t *lc,
                         const char *label, sim_arrivals_t *arr, const char **why) {
  sim_arrivals_t one = {0};
  sim_result_t res;
  sim_tenant_spec_t ts = *lc;
  char what[256];
  uint64_t first = 0;
  int rc;
  one.t_ns = &first;
  one.n = 1;
  ts.arrivals = &one;
  snprintf(what, sizeof(what), "%s: LC service time", label);
  rc = run_one(c, POL_KIND_MPS_PRIO, &ts, 1, what, &res, why);
  if (rc < 0)
    return rc;
  uint64_t service = res.t[0].nlat ? res.t[0].lat_ns[0] : 0;
  sim_result_close(&res);
  if (service == 0) {
    *why = "the LC request did not finish within the duration";
    return -EINVAL;
  }
  double rate = c->mean_gap_us > 0 ? 1e6 / c->mean_gap_us : c->load * 1e9 / (double)service;
  sim_rng_t rng;
  sim_rng_init(&rng, c->seed);
  if (c->azure_text) {
    static char err[160];
    rc = sim_arrivals_azure(arr, c->azure_text, c->azure_len, c->azure_func, rate, c->duration_ns,
                            err, sizeof(err));
    if (rc < 0)
      *why = err;
  } else {
    rc = c->poisson ? sim_arrivals_poisson(arr, &rng, rate, c->duration_ns)
                    : sim_arrivals_bursty(arr, &rng, rate, c->duration_ns);
    if (rc < 0)
      *why = "cannot generate arrivals";
  }
  return rc;
}

int sim_compare_units(const sim_compare_config_t *c, const char *label, const sim_trace_t *lc,
                      size_t nlc, const sim_trace_t *be, size_t nbe, sim_row_t **rows,
                      size_t *nrows, const char **why) {
  sim_arrivals_t arr = {0};
  sim_result_t res;
  sim_tenant_spec_t ts[2];
  char what[256];
  int rc;
  const char *dummy;
  if (!why)
    why = &dummy;
  *why = NULL;
  if (!c->arrivals && !(c->load > 0 && c->load < 1)) {
    *why = "load must be in (0, 1)";
    return -EINVAL;
  }
  if (nlc == 0 || nbe == 0) {
    *why = "no LC or no BE trace";
    return -EINVAL;
  }

  /* 1. Arrivals: given, or generated at the load asked for. */
  ts[0] = (sim_tenant_spec_t){
      .trace = lc, .iters = nlc > 1 ? lc : NULL, .niters = nlc > 1 ? nlc : 0,
      .cls = POL_CLASS_LC, .weight = 1};
  if (!c->arrivals && (rc = make_arrivals(c, &ts[0], label, &arr, why)) < 0)
    return rc;

  /* 2. LC alone, BE alone. */
  ts[0].arrivals = c->arrivals ? c->arrivals : &arr;
  snprintf(what, sizeof(what), "%s: LC alone", label);
  rc = run_one(c, POL_KIND_MPS_PRIO, ts, 1, what, &res, why);
  if (rc < 0)
    goto out;
  sim_tenant_result_t lc_alone = res.t[0];
  uint64_t ae50 = sim_percentile(res.t[0].exec_ns, res.t[0].nexec, 50);
  uint64_t ae99 = sim_percentile(res.t[0].exec_ns, res.t[0].nexec, 99);
  res.t[0].lat_ns = NULL; /* keep */
  sim_result_close(&res);
  lc_alone.exec_ns = NULL; /* freed with res */
  uint64_t a50 = sim_percentile(lc_alone.lat_ns, lc_alone.nlat, 50);
  uint64_t a99 = sim_percentile(lc_alone.lat_ns, lc_alone.nlat, 99);
  sim_row_t alone = {.kind = POL_KIND_COUNT};
  snprintf(alone.pair, sizeof(alone.pair), "%s", label);
  alone.lc_p50_ms = alone.alone_p50_ms = ms(a50);
  alone.lc_p99_ms = alone.alone_p99_ms = ms(a99);
  alone.exec_p50_ms = ms(ae50);
  alone.exec_p99_ms = alone.alone_exec_p99_ms = ms(ae99);
  alone.lc_tput = 1.0;
  alone.be_tput = 0.0;
  alone.sys_tput = 1.0;
  alone.lat_ns = lc_alone.lat_ns;
  alone.nlat = lc_alone.nlat;
  uint64_t lc_alone_n = lc_alone.requests;
  double lc_alone_mean = 0;
  for (size_t i = 0; i < lc_alone.nlat; i++)
    lc_alone_mean += (double)lc_alone.lat_ns[i];
  alone.lc_mean_ms = lc_alone.nlat ? lc_alone_mean / (double)lc_alone.nlat / 1e6 : 0;
  rc = add_row(rows, nrows, &alone);
  if (rc < 0) {
    free(lc_alone.lat_ns);
    goto out;
  }

  ts[1] = (sim_tenant_spec_t){.trace = be, .iters = nbe > 1 ? be : NULL,
                              .niters = nbe > 1 ? nbe : 0, .cls = POL_CLASS_BE, .weight = 1};
  snprintf(what, sizeof(what), "%s: BE alone", label);
  rc = run_one(c, POL_KIND_MPS, ts + 1, 1, what, &res, why);
  if (rc < 0)
    goto out;
  double be_alone = res.t[0].work_ns;
  sim_result_close(&res);
  if (be_alone <= 0) {
    *why = "the BE trace did no work within the duration";
    rc = -EINVAL;
    goto out;
  }

  /* 3. Each policy on the pair. */
  for (int k = 0; k < POL_KIND_COUNT; k++) {
    if (!c->kinds[k])
      continue;
    snprintf(what, sizeof(what), "%s: %s", label, pol_kind_name((pol_kind_t)k));
    rc = run_one(c, (pol_kind_t)k, ts, 2, what, &res, why);
    if (rc < 0)
      goto out;
    sim_row_t r = {.kind = (pol_kind_t)k};
    snprintf(r.pair, sizeof(r.pair), "%s", label);
    const sim_tenant_result_t *l = &res.t[0];
    double mean = 0;
    for (size_t i = 0; i < l->nlat; i++)
      mean += (double)l->lat_ns[i];
    r.lc_mean_ms = l->nlat ? mean / (double)l->nlat / 1e6 : 0;
    r.lc_p50_ms = ms(sim_percentile(l->lat_ns, l->nlat, 50));
    r.lc_p99_ms = ms(sim_percentile(l->lat_ns, l->nlat, 99));
    r.alone_p50_ms = ms(a50);
    r.alone_p99_ms = ms(a99);
    r.lc_p99_overhead_pct = a99 ? (r.lc_p99_ms / ms(a99) - 1.0) * 100.0 : 0;
    r.exec_p50_ms = ms(sim_percentile(l->exec_ns, l->nexec, 50));
    r.exec_p99_ms = ms(sim_percentile(l->exec_ns, l->nexec, 99));
    r.alone_exec_p99_ms = ms(ae99);
    r.exec_p99_overhead_pct = ae99 ? (r.exec_p99_ms / ms(ae99) - 1.0) * 100.0 : 0;
    r.lc_tput = lc_alone_n ? (double)l->requests / (double)lc_alone_n : 0;
    r.be_tput = res.t[1].work_ns / be_alone;
    r.sys_tput = r.lc_tput + r.be_tput;
    r.flush_given_up = res.flush_given_up;
    r.redo_launches = res.pol.redo_launches;
    double spent = res.flush_wasted_ns + res.t[1].work_ns;
    r.flush_lost_frac = spent > 0 ? res.flush_wasted_ns / spent : 0;
    r.ctx_waits = l->ctx_waits;
    r.max_ctx_wait_ms = ms(l->max_ctx_wait_ns);
    r.lat_ns = res.t[0].lat_ns;
    r.nlat = res.t[0].nlat;
    res.t[0].lat_ns = NULL;
    sim_result_close(&res);
    rc = add_row(rows, nrows, &r);
    if (rc < 0) {
      free(r.lat_ns);
      goto out;
    }
  }
  rc = 0;
out:
  sim_arrivals_close(&arr);
  return rc;
}

void sim_rows_free(sim_row_t *rows, size_t n) {
  for (size_t i = 0; rows && i < n; i++)
    free(rows[i].lat_ns);
  free(rows);
}

/* The bundled pairs (files under sim/traces/, all SYNTHETIC): the three
 * rows of the measured baseline table (docs/h200.md), in its order: batch-8
 * CUDA-graph BERT next to GPT-2 training, batch-8 CUDA-graph ResNet-50 next
 * to ResNet-50 training, eager batch-1 BERT next to GPT-2 training.  The
 * batch-1 graph traces (bert-b1-infer, resnet50-b1-infer) stay bundled for
 * --lc/--be. */
const sim_pair_t sim_bundled_pairs[] = {
    {"bert-b8-graph/gpt2-train", "bert-b8-graph.ktr", "gpt2-train.ktr"},
    {"resnet50-b8-graph/resnet50-train", "resnet50-b8-graph.ktr", "resnet50-train.ktr"},
    {"bert-b1-eager/gpt2-train", "bert-b1-eager.ktr", "gpt2-train.ktr"},
};
const size_t sim_bundled_npairs = sizeof(sim_bundled_pairs) / sizeof(sim_bundled_pairs[0]);
