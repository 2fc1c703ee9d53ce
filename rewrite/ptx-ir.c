/* ptx-ir.c: storage of the PTX IR: the arena, statement vectors, the module's
 * lifetime, lookups, and the growable text buffer the printer writes into.
 *
 * A module's tokens, statements and strings are carved from one arena of
 * 64 KiB chunks (bigger requests get a chunk of their own), so freeing a
 * module is one walk of the chunk list plus the statement vectors it
 * tracks.  Nothing here reads outside bytes.
 */
#include "rewrite/rw.h"
#include "rewrite/rw-int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 64 KiB: a typical nvcc module (tens of KiB of PTX) fits in a few chunks,
 * and the tail a chunk wastes stays small next to the tokens it holds. */
#define CHUNK_SIZE (64u << 10)

struct rw__chunk {
  rw__chunk_t *next;
  size_t used, size;
  _Alignas(16) unsigned char data[];
};

void *rw__alloc(rw__arena_t *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n == 0)
    n = 16;
  rw__chunk_t *c = a->head;
  if (c == NULL || c->size - c->used < n) {
    size_t size = n > CHUNK_SIZE / 4 ? n : CHUNK_SIZE;
    c = malloc(sizeof(*c) + size);
    if (c == NULL)
      return NULL;
    c->size = size;
    c->used = 0;
    if (size == n && a->head != NULL) {
      /* a private big chunk: keep the current chunk in front for small ones */
      c->next = a->head->next;
      a->head->next = c;
    } else {
      c->next = a->head;
      a->head = c;
    }
  }
  void *p = c->data + c->used;
  c->used += n;
  memset(p, 0, n);
  return p;
}

char *rw__strndup(rw__arena_t *a, const char *s, size_t n) {
  char *p = rw__alloc(a, n + 1);
  if (p == NULL)
    return NULL;
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

void rw__arena_free(rw__arena_t *a) {
  rw__chunk_t *c = a->head;
  while (c != NULL) {
    rw__chunk_t *next = c->next;
    free(c);
    c = next;
  }
  a->head = NULL;
}

int rw__vec_insert(rw__stmt_vec_t *v, size_t at, rw__stmt_t *const *s, size_t n) {
  if (at > v->n)
    return -EINVAL;
  if (n == 0)
    return 0;
  if (v->n + n > v->cap) {
    size_t cap = v->cap ? v->cap : 16;
    while (cap < v->n + n)
      cap *= 2;
    rw__stmt_t **nv = realloc(v->v, cap * sizeof(*nv));
    if (nv == NULL)
      return -ENOMEM;
    v->v = nv;
    v->cap = cap;
  }
  memmove(v->v + at + n, v->v + at, (v->n - at) * sizeof(*v->v));
  memcpy(v->v + at, s, n * sizeof(*s));
  v->n += n;
  return 0;
}

int rw__vec_push(rw__stmt_vec_t *v, rw__stmt_t *s) {
  return rw__vec_insert(v, v->n, &s, 1);
}

int rw__module_track(rw_ptx_module_t *m, rw__stmt_vec_t *v) {
  if (m->nvecs == m->capvecs) {
    size_t cap = m->capvecs ? m->capvecs * 2 : 16;
    rw__stmt_vec_t **nv = realloc(m->vecs, cap * sizeof(*nv));
    if (nv == NULL)
      return -ENOMEM;
    m->vecs = nv;
    m->capvecs = cap;
  }
  m->vecs[m->nvecs++] = v;
  return 0;
}

void rw_ptx_free(rw_ptx_module_t *m) {
  if (m == NULL)
    return;
  for (size_t i = 0; i < m->nvecs; i++)
    free(m->vecs[i]->v);
  free(m->vecs);
  free(m->top.v);
  rw__arena_free(&m->arena);
  free(m);
}

rw__func_t *rw__find_func(const rw_ptx_module_t *m, const char *name) {
  for (size_t i = 0; i < m->top.n; i++) {
    const rw__stmt_t *s = m->top.v[i];
    if (s->kind == RW__ST_FUNC && s->func->has_body && strcmp(s->func->name, name) == 0)
      return s->func;
  }
  return NULL;
}

size_t rw_ptx_entry_count(const rw_ptx_module_t *m) {
  size_t n = 0;
  for (size_t i = 0; i < m->top.n; i++) {
    const rw__stmt_t *s = m->top.v[i];
    n += s->kind == RW__ST_FUNC && s->func->is_entry && s->func->has_body;
  }
  return n;
}

const char *rw_ptx_entry_name(const rw_ptx_module_t *m, size_t idx) {
  for (size_t i = 0; i < m->top.n; i++) {
    const rw__stmt_t *s = m->top.v[i];
    if (s->kind == RW__ST_FUNC && s->func->is_entry && s->func->has_body && idx-- == 0)
      return s->func->name;
  }
  return NULL;
}

static const rw__func_t *entry_at(const rw_ptx_module_t *m, size_t idx) {
  for (size_t i = 0; i < m->top.n; i++) {
    const rw__stmt_t *s = m->top.v[i];
    if (s->kind == RW__ST_FUNC && s->func->is_entry && s->func->has_body && idx-- == 0)
      return s->func;
  }
  return NULL;
}

/* Bytes of a PTX fundamental type (".u64" -> 8); 0 if not one. */
static uint32_t type_bytes(const char *t) {
  static const char *const names[] = {".b8", ".u8", ".s8", ".pred", ".b16", ".u16", ".s16",
                                      ".f16", ".bf16", ".b32", ".u32", ".s32", ".f32", ".f16x2",
                                      ".bf16x2", ".b64", ".u64", ".s64", ".f64"};
  static const uint8_t bytes[] = {1, 1, 1, 1, 2, 2, 2, 2, 2, 4, 4, 4, 4, 4, 4, 8, 8, 8, 8};
  for (size_t i = 0; i < sizeof(bytes); i++)
    if (strcmp(t, names[i]) == 0)
      return bytes[i];
  return 0;
}

/* ".param .align 8 .b8 name[24]" / ".param .u64 .ptr .global .align 1 p" /
 * ".param .v2 .u32 v": element type, vector width, array length, .align. */
static int param_layout(const rw__param_t *p, uint32_t *size, uint32_t *align) {
  uint32_t elem = 0, vec = 1, al = 0;
  uint64_t count = 1;
  for (size_t k = 0; k < p->ntoks; k++) {
    const char *t = p->toks[k].text;
    if (strcmp(t, ".align") == 0 && k + 1 < p->ntoks)
      al = (uint32_t)strtoul(p->toks[++k].text, NULL, 0);
    else if (strcmp(t, ".v2") == 0 || strcmp(t, ".v4") == 0)
      vec = (uint32_t)(t[2] - '0');
    else if (strcmp(t, "[") == 0 && k + 1 < p->ntoks)
      count *= strtoull(p->toks[++k].text, NULL, 0);
    else if (!elem)
      elem = type_bytes(t);
  }
  if (!elem || count == 0 || count > (1u << 16))
    return -EPROTO;
  *size = (uint32_t)(elem * vec * count);
  *align = al ? al : elem * vec;
  return 0;
}

int rw_ptx_entry_params(const rw_ptx_module_t *m, size_t i, uint32_t *size, uint32_t *align,
                        size_t cap) {
  const rw__func_t *f = m ? entry_at(m, i) : NULL;
  if (!f)
    return -ENOENT;
  for (size_t k = 0; k < f->nparams && k < cap; k++)
    if (param_layout(&f->params[k], &size[k], &align[k]) != 0)
      return -EPROTO;
  return (int)f->nparams;
}

static void buf_reserve(rw__buf_t *b, size_t more) {
  if (b->err || b->len + more + 1 <= b->cap)
    return;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + more + 1)
    cap *= 2;
  char *p = realloc(b->p, cap);
  if (p == NULL) {
    b->err = -ENOMEM;
    return;
  }
  b->p = p;
  b->cap = cap;
}

void rw__buf_puts(rw__buf_t *b, const char *s) {
  size_t n = strlen(s);
  buf_reserve(b, n);
  if (b->err)
    return;
  memcpy(b->p + b->len, s, n + 1);
  b->len += n;
}

void rw__buf_printf(rw__buf_t *b, const char *fmt, ...) {
  va_list ap;
  char small[256];
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof(small), fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->err = -EINVAL;
    return;
  }
  if ((size_t)n < sizeof(small)) {
    rw__buf_puts(b, small);
    return;
  }
  buf_reserve(b, (size_t)n);
  if (b->err)
    return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}
