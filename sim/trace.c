/* trace.c: the kernel trace text format: parser and writer.
 *
 * A kernel trace is one workload's iteration (one inference request, or one
 * training step): one line per kernel, in submission order.  tallyd records
 * whole runs in this format plus a comment per line (runtrace.c); the
 * bundled ones in sim/traces/ are SYNTHETIC (sim/traces/README.md says how
 * they were made).
 *
 * Text, UTF-8/ASCII; '#' starts a comment to the end of the line; blank
 * lines are ignored; fields are separated by spaces or tabs:
 *
 *   FIELD       FORM                 MEANING
 *   tenant      [A-Za-z0-9._-]{1,47} workload name; the same on every line
 *   kernel_id   decimal or 0x hex    stable id of the code (< 2^64)
 *   grid        X[,Y[,Z]]            grid dimensions, each 1..2^31-1
 *   block       X[,Y[,Z]]            block dimensions, product 1..1024
 *   regs        0..255               registers per thread
 *   shmem       0..2^24              shared memory bytes per block
 *   block_ns    1..10^12             one block's duration alone on the GPU
 *   gap_ns      0..10^12, optional   host time since the previous submit
 *   variants    [ospf]+ or -, opt.   o original, s sliced, p PTB, f FLUSH (running
 *                                    blocks give up at a flag); default osp
 *
 *   bert-b1 0x1f00a3 36,1,1 256,1,1 128 32768 8000 0 o
 *
 * The parser reads a byte buffer that need not end in NUL (it is fuzzed:
 * tests/fuzz/fuzz-sim-trace.c), checks every number for overflow and range,
 * and never aborts: errors are -EPROTO with "line N: reason".
 */
#include "sim/sim.h"
#include "sim/sim-int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 9

typedef struct tok {
  const char *p;
  size_t n;
} tok_t;

int sim__line_err(char *err, size_t errlen, size_t line, const char *fmt, ...) {
  if (err && errlen) {
    int k = snprintf(err, errlen, "line %zu: ", line);
    if (k >= 0 && (size_t)k < errlen) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
      va_end(ap);
    }
  }
  return -EPROTO;
}

/* Parses an unsigned decimal or 0x-hex number; false on junk or > max. */
static bool parse_u64(const char *p, size_t n, uint64_t max, uint64_t *out) {
  uint64_t v = 0;
  unsigned base = 10;
  if (n >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    base = 16;
    p += 2;
    n -= 2;
  }
  if (n == 0)
    return false;
  for (size_t i = 0; i < n; i++) {
    unsigned d;
    char ch = p[i];
    if (ch >= '0' && ch <= '9')
      d = (unsigned)(ch - '0');
    else if (base == 16 && ch >= 'a' && ch <= 'f')
      d = (unsigned)(ch - 'a' + 10);
    else if (base == 16 && ch >= 'A' && ch <= 'F')
      d = (unsigned)(ch - 'A' + 10);
    else
      return false;
    if (v > (UINT64_MAX - d) / base)
      return false;
    v = v * base + d;
  }
  if (v > max)
    return false;
  *out = v;
  return true;
}

/* X[,Y[,Z]] with each in 1..max. */
static bool parse_dim3(const tok_t *t, uint32_t max, uint32_t out[3]) {
  size_t i = 0, start = 0;
  int k = 0;
  out[0] = out[1] = out[2] = 1;
  for (i = 0; i <= t->n; i++) {
    if (i == t->n || t->p[i] == ',') {
      uint64_t v;
      if (k >= 3 || !parse_u64(t->p + start, i - start, max, &v) || v == 0)
        return false;
      out[k++] = (uint32_t)v;
      start = i + 1;
    }
  }
  return true;
}

static bool name_ok(const tok_t *t) {
  if (t->n == 0 || t->n >= SIM_NAME_MAX)
    return false;
  for (size_t i = 0; i < t->n; i++) {
    char ch = t->p[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          ch == '.' || ch == '_' || ch == '-'))
      return false;
  }
  return true;
}

static int parse_line(tok_t *f, int nf, size_t line, sim_kernel_t *k, char *err, size_t errlen) {
  uint64_t v;
  if (nf < 7 || nf > 9)
    return sim__line_err(err, errlen, line, "expected 7 to 9 fields, found %d", nf);
  memset(k, 0, sizeof(*k));
  if (!parse_u64(f[1].p, f[1].n, UINT64_MAX, &k->kernel_id))
    return sim__line_err(err, errlen, line, "bad kernel id");
  if (!parse_dim3(&f[2], 0x7fffffffu, k->grid))
    return sim__line_err(err, errlen, line, "bad grid (X[,Y[,Z]], each 1..2^31-1)");
  if (!parse_dim3(&f[3], 1024, k->block) ||
      (uint64_t)k->block[0] * k->block[1] * k->block[2] > 1024)
    return sim__line_err(err, errlen, line, "bad block (at most 1024 threads)");
  if (sim_kernel_blocks(k) > (1ull << 40))
    return sim__line_err(err, errlen, line, "grid has more than 2^40 blocks");
  if (!parse_u64(f[4].p, f[4].n, 255, &v))
    return sim__line_err(err, errlen, line, "bad registers per thread (0..255)");
  k->regs_per_thread = (uint32_t)v;
  if (!parse_u64(f[5].p, f[5].n, 1u << 24, &v))
    return sim__line_err(err, errlen, line, "bad shared memory bytes (0..2^24)");
  k->shmem_bytes = (uint32_t)v;
  if (!parse_u64(f[6].p, f[6].n, 1000000000000ull, &k->block_ns) || k->block_ns == 0)
    return sim__line_err(err, errlen, line, "bad block_ns (1..10^12)");
  if (nf >= 8 && !parse_u64(f[7].p, f[7].n, 1000000000000ull, &k->gap_ns))
    return sim__line_err(err, errlen, line, "bad gap_ns (0..10^12)");
  k->variants = POL_VAR_ALL;
  if (nf == 9) {
    k->variants = POL_VAR_ORIGINAL;
    if (!(f[8].n == 1 && f[8].p[0] == '-')) {
      for (size_t i = 0; i < f[8].n; i++) {
        char ch = f[8].p[i];
        if (ch == 'o')
          k->variants |= POL_VAR_ORIGINAL;
        else if (ch == 's')
          k->variants |= POL_VAR_SLICED;
        else if (ch == 'p')
          k->variants |= POL_VAR_PTB;
        else if (ch == 'f')
          k->variants |= POL_VAR_FLUSH;
        else
          return sim__line_err(err, errlen, line, "bad variants (letters o, s, p, f, or -)");
      }
    }
  }
  return 0;
}

int sim__trace_line(const char *p, size_t n, size_t line, char name[SIM_NAME_MAX],
                    sim_kernel_t *k, char *err, size_t errlen) {
  tok_t f[MAX_FIELDS + 1];
  int nf = 0;
  for (size_t i = 0; i < n;) {
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r'))
      i++;
    if (i >= n)
      break;
    size_t s = i;
    while (i < n && p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
      i++;
    if (nf <= MAX_FIELDS) {
      f[nf].p = p + s;
      f[nf].n = i - s;
    }
    nf++;
  }
  if (nf == 0)
    return 1;
  if (nf > MAX_FIELDS)
    return sim__line_err(err, errlen, line, "expected 7 to 9 fields, found %d", nf);
  if (!name_ok(&f[0]))
    return sim__line_err(err, errlen, line, "bad tenant name (1-47 of A-Z a-z 0-9 . _ -)");
  memcpy(name, f[0].p, f[0].n);
  name[f[0].n] = '\0';
  return parse_line(f, nf, line, k, err, errlen);
}

int sim_trace_parse(const char *text, size_t len, sim_trace_t *out, char *err, size_t errlen) {
  sim_trace_t t = {0};
  size_t cap = 0, line = 0, pos = 0;
  int rc = 0;
  if (len > SIM_TRACE_MAX_BYTES)
    return sim__line_err(err, errlen, 0, "trace larger than %u bytes", SIM_TRACE_MAX_BYTES);
  while (pos < len) {
    size_t end = pos, stop;
    char name[SIM_NAME_MAX];
    sim_kernel_t k;
    line++;
    while (end < len && text[end] != '\n')
      end++;
    const char *hash = memchr(text + pos, '#', end - pos);
    stop = hash ? (size_t)(hash - text) : end;
    rc = sim__trace_line(text + pos, stop - pos, line, name, &k, err, errlen);
    pos = end + 1;
    if (rc == 1)
      continue;
    if (rc < 0)
      goto fail;
    if (t.n == 0) {
      snprintf(t.name, sizeof(t.name), "%s", name);
    } else if (strcmp(t.name, name) != 0) {
      rc = sim__line_err(err, errlen, line, "tenant differs from line 1's (one workload per file)");
      goto fail;
    }
    if (t.n >= SIM_TRACE_MAX_KERNELS) {
      rc = sim__line_err(err, errlen, line, "more than %d kernels", SIM_TRACE_MAX_KERNELS);
      goto fail;
    }
    if (t.n == cap) {
      size_t nc = cap ? cap * 2 : 64;
      sim_kernel_t *nk = realloc(t.k, nc * sizeof(*nk));
      if (!nk) {
        rc = -ENOMEM;
        goto fail;
      }
      t.k = nk;
      cap = nc;
    }
    t.k[t.n++] = k;
  }
  if (t.n == 0) {
    rc = sim__line_err(err, errlen, line, "no kernels");
    goto fail;
  }
  *out = t;
  return 0;
fail:
  free(t.k);
  return rc;
}

int sim_trace_load(const char *path, sim_trace_t *out, char *err, size_t errlen) {
  size_t len;
  char *buf = NULL;
  int rc = sim__read_trace_file(path, &buf, &len, err, errlen);
  if (rc < 0)
    return rc;
  rc = sim_trace_parse(buf, len, out, err, errlen);
  free(buf);
  return rc;
}

void sim_trace_close(sim_trace_t *t) {
  if (!t)
    return;
  free(t->k);
  t->k = NULL;
  t->n = 0;
}

uint64_t sim_kernel_blocks(const sim_kernel_t *k) {
  return (uint64_t)k->grid[0] * k->grid[1] * k->grid[2];
}

int sim_trace_write(const sim_trace_t *t, FILE *f) {
  for (size_t i = 0; i < t->n; i++) {
    const sim_kernel_t *k = &t->k[i];
    char v[5];
    int n = 0;
    if (k->variants & POL_VAR_ORIGINAL)
      v[n++] = 'o';
    if (k->variants & POL_VAR_SLICED)
      v[n++] = 's';
    if (k->variants & POL_VAR_PTB)
      v[n++] = 'p';
    if (k->variants & POL_VAR_FLUSH)
      v[n++] = 'f';
    v[n] = '\0';
    if (fprintf(f, "%s 0x%" PRIx64 " %u,%u,%u %u,%u,%u %u %u %" PRIu64 " %" PRIu64 " %s\n", t->name,
                k->kernel_id, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1],
                k->block[2], k->regs_per_thread, k->shmem_bytes, k->block_ns, k->gap_ns, v) < 0)
      return -EIO;
  }
  return 0;
}
