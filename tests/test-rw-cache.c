/* test-rw-cache.c: the compile cache stores, finds, verifies and replaces
 * compiled images; the compile itself is a callback (here: a counter, and
 * ptxas on a transformed module as the daemon's JIT stand-in). */
#include "rewrite/rw.h"
#include "rewrite/rw-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

typedef struct fake {
  int calls;
  int fail; /* return this from the next compile if nonzero */
} fake_t;

/* "Compiles" by reversing the source: distinct, checkable bytes. */
static int fake_compile(void *ctx, const void *src, size_t len, void **image, size_t *image_len) {
  fake_t *f = ctx;
  f->calls++;
  if (f->fail)
    return f->fail;
  unsigned char *p = malloc(len + 1);
  if (p == NULL)
    return -ENOMEM;
  for (size_t i = 0; i < len; i++)
    p[i] = ((const unsigned char *)src)[len - 1 - i];
  *image = p;
  *image_len = len;
  return 0;
}

static char dir[256];

static int setup(void **state) {
  (void)state;
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof(dir), "%s/tally-cache-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  return mkdtemp(dir) == NULL ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  DIR *d = opendir(dir);
  struct dirent *e;
  char path[600];
  while (d != NULL && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' && (e->d_name[1] == 0 || e->d_name[1] == '.'))
      continue;
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (d)
    closedir(d);
  rmdir(dir);
  return 0;
}

/* The one record file in dir (the tests use one key at a time). */
static void record_path(char *out, size_t len) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int n = 0;
  assert_non_null(d);
  while ((e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name);
    if (l == 20 && strcmp(e->d_name + 16, ".img") == 0) {
      snprintf(out, len, "%s/%s", dir, e->d_name);
      n++;
    }
  }
  closedir(d);
  assert_int_equal(n, 1);
}

static void cache_misses_then_hits_with_same_bytes(void **state) {
  (void)state;
  rw_cache_t *c;
  fake_t f = {0};
  void *img;
  size_t len;
  int hit;
  assert_int_equal(rw_cache_open(dir, &c), 0);
  assert_int_equal(rw_cache_get(c, "abcdef", 6, "sm_90", fake_compile, &f, &img, &len, &hit), 0);
  assert_int_equal(hit, 0);
  assert_int_equal(f.calls, 1);
  assert_memory_equal(img, "fedcba", 6);
  free(img);
  assert_int_equal(rw_cache_get(c, "abcdef", 6, "sm_90", fake_compile, &f, &img, &len, &hit), 0);
  assert_int_equal(hit, 1);
  assert_int_equal(f.calls, 1);
  assert_int_equal(len, 6);
  assert_memory_equal(img, "fedcba", 6);
  free(img);
  /* another tag is another key */
  assert_int_equal(rw_cache_get(c, "abcdef", 6, "sm_100", fake_compile, &f, &img, &len, &hit), 0);
  assert_int_equal(hit, 0);
  assert_int_equal(f.calls, 2);
  free(img);
  rw_cache_close(c);
  teardown(NULL);
  setup(NULL);
}

/* Each corruption: flip one byte at offset, or cut the file to length. */
static void cache_ignores_and_replaces_corrupt_records(void **state) {
  (void)state;
  const struct {
    long off;   /* byte to flip, -1 none */
    long trunc; /* new length, -1 none */
  } bad[] = {{0, -1}, {8, -1}, {16, -1}, {24, -1}, {32, -1}, {41, -1}, {-1, 20}, {-1, 43}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    rw_cache_t *c;
    fake_t f = {0};
    void *img;
    size_t len;
    int hit;
    char path[600];
    assert_int_equal(rw_cache_open(dir, &c), 0);
    assert_int_equal(rw_cache_get(c, "kernel", 6, "t", fake_compile, &f, &img, &len, &hit), 0);
    free(img);
    record_path(path, sizeof(path));
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    if (bad[i].off >= 0) {
      unsigned char b;
      assert_int_equal(pread(fd, &b, 1, bad[i].off), 1);
      b ^= 0x5a;
      assert_int_equal(pwrite(fd, &b, 1, bad[i].off), 1);
    } else {
      assert_int_equal(ftruncate(fd, bad[i].trunc), 0);
    }
    close(fd);
    assert_int_equal(rw_cache_get(c, "kernel", 6, "t", fake_compile, &f, &img, &len, &hit), 0);
    if (hit != 0 || f.calls != 2)
      fail_msg("corruption %zu was not detected", i);
    assert_memory_equal(img, "lenrek", 6);
    free(img);
    /* the record was replaced by a good one */
    assert_int_equal(rw_cache_get(c, "kernel", 6, "t", fake_compile, &f, &img, &len, &hit), 0);
    assert_int_equal(hit, 1);
    free(img);
    rw_cache_close(c);
    teardown(NULL);
    setup(NULL);
  }
}

static void cache_returns_compile_errors_and_stores_nothing(void **state) {
  (void)state;
  rw_cache_t *c;
  fake_t f = {.fail = -EPROTO};
  void *img;
  size_t len;
  int hit;
  assert_int_equal(rw_cache_open(dir, &c), 0);
  assert_int_equal(rw_cache_get(c, "x", 1, "t", fake_compile, &f, &img, &len, &hit), -EPROTO);
  assert_null(img);
  f.fail = 0;
  assert_int_equal(rw_cache_get(c, "x", 1, "t", fake_compile, &f, &img, &len, &hit), 0);
  assert_int_equal(hit, 0);
  free(img);
  rw_cache_close(c);
  rw_cache_close(NULL);
  assert_int_equal(rw_cache_open("/proc/definitely/not/here", &c), -ENOENT);
}

static int ptxas_compile(void *ctx, const void *src, size_t len, void **image, size_t *image_len) {
  return rw__ptxas_run(ctx, "sm_90", src, len, image, image_len, NULL, 0);
}

static void cache_holds_a_transformed_module_compiled_by_ptxas(void **state) {
  (void)state;
  const char *ptxas = getenv("PTXAS");
  const char *src = getenv("TALLY_SRCDIR");
  char path[4096], *text, *out;
  size_t len, olen, ilen, ilen2;
  void *img, *img2;
  int hit;
  rw_cache_t *c;
  if (ptxas == NULL || *ptxas == 0)
    skip();
  snprintf(path, sizeof(path), "%s/tests/data/ptx/barriers.ptx", src ? src : ".");
  assert_int_equal(rw__read_file(path, &text, &len), 0);
  assert_int_equal(rw_transform_ptx(text, len, RW_XFORM_MASK_ALL, &out, &olen, NULL), 0);
  assert_int_equal(rw_cache_open(dir, &c), 0);
  assert_int_equal(
      rw_cache_get(c, out, olen, "sm_90", ptxas_compile, (void *)ptxas, &img, &ilen, &hit), 0);
  assert_int_equal(hit, 0);
  assert_memory_equal(img, "\177ELF", 4);
  assert_int_equal(
      rw_cache_get(c, out, olen, "sm_90", ptxas_compile, (void *)ptxas, &img2, &ilen2, &hit), 0);
  assert_int_equal(hit, 1);
  assert_int_equal(ilen, ilen2);
  assert_memory_equal(img, img2, ilen);
  free(img);
  free(img2);
  free(out);
  free(text);
  rw_cache_close(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cache_misses_then_hits_with_same_bytes),
      cmocka_unit_test(cache_ignores_and_replaces_corrupt_records),
      cmocka_unit_test(cache_returns_compile_errors_and_stores_nothing),
      cmocka_unit_test(cache_holds_a_transformed_module_compiled_by_ptxas),
  };
  return cmocka_run_group_tests_name("rw-cache", tests, setup, teardown);
}
