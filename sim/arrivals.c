/* arrivals.c: arrival processes for the LC tenant's requests.
 *
 * Three sources, all returning sorted times in [0, duration):
 *  - Poisson at a rate (exponential gaps): the M in M/D/1 sanity tests.
 *  - Bursty (SYNTHETIC, the bundled default): a two-state Markov-modulated
 *    Poisson process.  Calm spells last 200 ms on average, bursts 50 ms (both
 *    exponential), and a burst's rate is 2x the calm rate, so 20% of the time
 *    carries a third of the requests: the shape of per-function invocation
 *    bursts in serverless traces, mild enough that at 50% load a burst (83%)
 *    does not exceed the server.  The calm rate is set so the long-run mean
 *    is the rate asked for: mean = calm * (0.8 + 0.2 * 2) = 1.2 * calm.
 *  - The Azure Functions 2021 trace (MAF2) CSV, `app,func,end_timestamp,
 *    duration` (seconds, one invocation a row, header line first), processed
 *    as we read the Tally paper: take one function's invocations (by name,
 *    or the busiest), arrival = end_timestamp - duration, sort, start at 0,
 *    scale all gaps by one factor so the mean rate is the rate asked for, and
 *    repeat the scaled pattern until the duration is filled.  The trace
 *    itself is not bundled (it was not obtainable; docs/h200.md).
 * The CSV parser reads a byte buffer that need not end in NUL, caps rows,
 * and never aborts (fuzzed by tests/fuzz/fuzz-sim-trace.c).
 */
#include "sim/sim-int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* 10^8 invocations is ~50x the busiest day of MAF2; bounds what a bad input
 * can make us allocate. */
#define SIM_AZURE_MAX_ROWS 100000000u
/* Mean gap of a rate must be >= 1 ns and the count must stay sane. */
#define SIM_MAX_ARRIVALS 200000000u

static int push(sim_arrivals_t *a, size_t *cap, uint64_t t) {
  if (a->n >= SIM_MAX_ARRIVALS)
    return -E2BIG;
  if (a->n == *cap) {
    size_t c = *cap ? *cap * 2 : 1024;
    uint64_t *p = realloc(a->t_ns, c * sizeof(*p));
    if (!p)
      return -ENOMEM;
    a->t_ns = p;
    *cap = c;
  }
  a->t_ns[a->n++] = t;
  return 0;
}

static bool rate_ok(double rate_per_s, uint64_t duration_ns) {
  return rate_per_s > 0 && rate_per_s <= 1e9 && isfinite(rate_per_s) && duration_ns > 0 &&
         rate_per_s * ((double)duration_ns / 1e9) < (double)SIM_MAX_ARRIVALS;
}

int sim_arrivals_poisson(sim_arrivals_t *a, sim_rng_t *r, double rate_per_s, uint64_t duration_ns) {
  size_t cap = 0;
  memset(a, 0, sizeof(*a));
  if (!rate_ok(rate_per_s, duration_ns))
    return -EINVAL;
  double mean = 1e9 / rate_per_s, t = 0;
  for (;;) {
    t += sim_rng_exp(r, mean);
    if (t >= (double)duration_ns)
      return 0;
    int rc = push(a, &cap, (uint64_t)t);
    if (rc < 0) {
      sim_arrivals_close(a);
      return rc;
    }
  }
}

int sim_arrivals_bursty(sim_arrivals_t *a, sim_rng_t *r, double rate_per_s, uint64_t duration_ns) {
  size_t cap = 0;
  memset(a, 0, sizeof(*a));
  if (!rate_ok(rate_per_s, duration_ns))
    return -EINVAL;
  const double calm_mean_ns = 200e6, burst_mean_ns = 50e6, burst_mult = 2.0;
  double calm_rate = rate_per_s / 1.2; /* see the top comment */
  double t = 0;
  bool burst = false;
  double state_end = sim_rng_exp(r, calm_mean_ns);
  for (;;) {
    double rate = burst ? calm_rate * burst_mult : calm_rate;
    double next = t + sim_rng_exp(r, 1e9 / rate);
    if (next >= state_end) {
      /* Memoryless: restart the draw at the switch with the new rate. */
      t = state_end;
      burst = !burst;
      state_end = t + sim_rng_exp(r, burst ? burst_mean_ns : calm_mean_ns);
      if (t >= (double)duration_ns)
        return 0;
      continue;
    }
    t = next;
    if (t >= (double)duration_ns)
      return 0;
    int rc = push(a, &cap, (uint64_t)t);
    if (rc < 0) {
      sim_arrivals_close(a);
      return rc;
    }
  }
}

int sim_arrivals_parse(sim_arrivals_t *a, const char *text, size_t len, char *err,
                       size_t errlen) {
  size_t pos = 0, line = 0, cap = 0;
  int rc = 0;
  memset(a, 0, sizeof(*a));
  while (pos < len) {
    size_t end = pos, s, e;
    uint64_t v = 0;
    while (end < len && text[end] != '\n')
      end++;
    line++;
    for (s = pos; s < end && (text[s] == ' ' || text[s] == '\t'); s++)
      ;
    for (e = end; e > s && (text[e - 1] == ' ' || text[e - 1] == '\t' || text[e - 1] == '\r'); e--)
      ;
    pos = end + 1;
    if (s == e || text[s] == '#')
      continue;
    for (size_t i = s; i < e; i++) {
      unsigned d = (unsigned)((unsigned char)text[i] - '0');
      if (d > 9 || v > (UINT64_MAX - d) / 10) {
        rc = sim__line_err(err, errlen, line, "not an offset in ns (an unsigned integer)");
        goto fail;
      }
      v = v * 10 + d;
    }
    if (a->n && v < a->t_ns[a->n - 1]) {
      rc = sim__line_err(err, errlen, line, "offsets must not decrease");
      goto fail;
    }
    if (a->n >= SIM_TRACE_MAX_KERNELS) {
      rc = -E2BIG;
      sim__line_err(err, errlen, line, "more than %d arrivals", SIM_TRACE_MAX_KERNELS);
      goto fail;
    }
    if (a->n == cap) {
      size_t c = cap ? cap * 2 : 1024;
      uint64_t *p = realloc(a->t_ns, c * sizeof(*p));
      if (!p) {
        rc = -ENOMEM;
        goto fail;
      }
      a->t_ns = p;
      cap = c;
    }
    a->t_ns[a->n++] = v;
  }
  return 0;
fail:
  sim_arrivals_close(a);
  return rc;
}

void sim_arrivals_close(sim_arrivals_t *a) {
  if (!a)
    return;
  free(a->t_ns);
  a->t_ns = NULL;
  a->n = 0;
}

/* ---------------------------------------------------------------- Azure CSV */

typedef struct inv {
  uint64_t func_hash;
  double arrival_s;
} inv_t;

static uint64_t hash_bytes(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)p[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* A seconds field: digits, one optional '.', digits; at most 31 chars. */
static bool parse_seconds(const char *p, size_t n, double *out) {
  char buf[32];
  bool dot = false, digit = false;
  if (n == 0 || n >= sizeof(buf))
    return false;
  for (size_t i = 0; i < n; i++) {
    if (p[i] == '.' && !dot)
      dot = true;
    else if (p[i] >= '0' && p[i] <= '9')
      digit = true;
    else
      return false;
  }
  if (!digit)
    return false;
  memcpy(buf, p, n);
  buf[n] = '\0';
  *out = strtod(buf, NULL);
  return isfinite(*out) && *out < 1e12;
}

static int cmp_inv(const void *x, const void *y) {
  const inv_t *a = x, *b = y;
  if (a->func_hash != b->func_hash)
    return a->func_hash < b->func_hash ? -1 : 1;
  return a->arrival_s < b->arrival_s ? -1 : a->arrival_s > b->arrival_s;
}

int sim_arrivals_azure(sim_arrivals_t *a, const char *text, size_t len, const char *func,
                       double rate_per_s, uint64_t duration_ns, char *err, size_t errlen) {
  inv_t *v = NULL;
  size_t n = 0, cap = 0, line = 0, pos = 0, acap = 0;
  int rc = 0;
  memset(a, 0, sizeof(*a));
  if (!rate_ok(rate_per_s, duration_ns))
    return sim__line_err(err, errlen, 0, "bad rate or duration");
  while (pos < len) {
    size_t end = pos;
    while (end < len && text[end] != '\n')
      end++;
    size_t stop = end;
    if (stop > pos && text[stop - 1] == '\r')
      stop--;
    line++;
    size_t fs[4], fe[4];
    int nf = 0;
    size_t s = pos;
    for (size_t i = pos; i <= stop; i++) {
      if (i == stop || text[i] == ',') {
        if (nf < 4) {
          fs[nf] = s;
          fe[nf] = i;
        }
        nf++;
        s = i + 1;
      }
    }
    size_t this_pos = pos;
    pos = end + 1;
    if (stop == this_pos)
      continue; /* blank line */
    if (nf != 4) {
      rc = sim__line_err(err, errlen, line,
                         "expected 4 comma-separated fields (app,func,end_timestamp,duration)");
      goto fail;
    }
    if (line == 1) {
      if (fe[2] - fs[2] != 13 || memcmp(text + fs[2], "end_timestamp", 13) != 0) {
        rc = sim__line_err(err, errlen, line, "header must be app,func,end_timestamp,duration");
        goto fail;
      }
      continue;
    }
    double end_s, dur_s;
    if (!parse_seconds(text + fs[2], fe[2] - fs[2], &end_s) ||
        !parse_seconds(text + fs[3], fe[3] - fs[3], &dur_s)) {
      rc = sim__line_err(err, errlen, line,
                         "end_timestamp and duration must be non-negative seconds");
      goto fail;
    }
    if (dur_s > end_s) {
      rc = sim__line_err(err, errlen, line, "duration longer than end_timestamp");
      goto fail;
    }
    if (fe[1] == fs[1]) {
      rc = sim__line_err(err, errlen, line, "empty func");
      goto fail;
    }
    if (n >= SIM_AZURE_MAX_ROWS) {
      rc = sim__line_err(err, errlen, line, "more than %u rows", SIM_AZURE_MAX_ROWS);
      goto fail;
    }
    if (n == cap) {
      size_t c = cap ? cap * 2 : 1024;
      inv_t *p = realloc(v, c * sizeof(*p));
      if (!p) {
        rc = -ENOMEM;
        goto fail;
      }
      v = p;
      cap = c;
    }
    v[n].func_hash = hash_bytes(text + fs[1], fe[1] - fs[1]);
    v[n].arrival_s = end_s - dur_s;
    n++;
  }
  if (n == 0) {
    rc = sim__line_err(err, errlen, line, "no invocations");
    goto fail;
  }
  qsort(v, n, sizeof(*v), cmp_inv);
  /* Pick the run of one function: the named one, or the longest. */
  size_t best = 0, best_len = 0;
  uint64_t want = func ? hash_bytes(func, strlen(func)) : 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && v[j].func_hash == v[i].func_hash)
      j++;
    if (func ? v[i].func_hash == want : j - i > best_len) {
      best = i;
      best_len = j - i;
      if (func)
        break;
    }
    i = j;
  }
  if (best_len < 2) {
    rc = sim__line_err(err, errlen, line,
                       func ? "function not found or invoked once" : "need 2 invocations");
    goto fail;
  }
  inv_t *r = v + best;
  double span = r[best_len - 1].arrival_s - r[0].arrival_s;
  if (span <= 0) {
    rc = sim__line_err(err, errlen, line, "all invocations at one instant");
    goto fail;
  }
  /* Observed mean rate (best_len - 1) / span; scale gaps to rate_per_s. */
  double scale_ns = 1e9 * ((double)(best_len - 1) / span) / rate_per_s;
  double period_ns = span * scale_ns + 1e9 / rate_per_s; /* one mean gap between repeats */
  for (double base = 0; base < (double)duration_ns; base += period_ns) {
    for (size_t i = 0; i < best_len; i++) {
      double t = base + (r[i].arrival_s - r[0].arrival_s) * scale_ns;
      if (t >= (double)duration_ns)
        break;
      rc = push(a, &acap, (uint64_t)t);
      if (rc < 0)
        goto fail;
    }
  }
  free(v);
  return 0;
fail:
  free(v);
  sim_arrivals_close(a);
  return rc;
}
