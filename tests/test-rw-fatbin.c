/* test-rw-fatbin.c: the fatbin reader against real nvcc output and against
 * corrupt input.
 *
 * Fixtures are built at test time with $NVCC (set by `make check`) from one
 * kernel file large enough that nvcc compresses it: a fatbin per
 * --compress-mode, a host object, a host executable and a cubin.  The
 * decisive check is that every compressed entry decompresses to exactly the
 * bytes the same entry has in the --compress-mode=none fatbin.  Corruption
 * tests cut and flip real images and demand an error code, never a crash
 * (run under ASan with --enable-sanitizers).  Allocation failures are
 * injected through -Wl,--wrap=malloc,--wrap=calloc.
 */
#include "rewrite/rw.h"
#include "rewrite/fatbin-int.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* ---- allocation failure injection ---- */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
static int alloc_fail_at = -1; /* fail the Nth allocation from now; -1: never. Test thread only. */
static int alloc_count;
void *__wrap_malloc(size_t n) {
  if (alloc_fail_at >= 0 && alloc_count++ == alloc_fail_at)
    return NULL;
  return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t m) {
  if (alloc_fail_at >= 0 && alloc_count++ == alloc_fail_at)
    return NULL;
  return __real_calloc(n, m);
}

/* ---- fixtures ---- */
static const char *kernel_src =
    "#define R(i) x = x*1.0001f + (float)(i) * y; y = y * 0.999f - x;\n"
    "extern \"C\" __global__ void big1(float *a, int n){int i=blockIdx.x*blockDim.x+threadIdx.x;"
    " float x=a[i], y=a[i+n];\n#pragma unroll\nfor(int k=0;k<400;k++){ R(k) if(x>y) a[k]=x; }\n"
    "a[i]=x+y;}\n"
    "extern \"C\" __global__ void big2(int *a, int n){int i=blockIdx.x*blockDim.x+threadIdx.x;"
    " int x=a[i];\n#pragma unroll\nfor(int k=0;k<300;k++){ x = x*31 + (x>>3) + k; if (x & 1) "
    "a[k] = x; }\na[i]=x;}\n"
    "int main(void){return 0;}\n";

static const char *modes[] = {"none", "default", "size", "speed", "balance"};
#define NMODES (sizeof(modes) / sizeof(modes[0]))

struct image {
  unsigned char *bytes;
  size_t len;
};

static char workdir[256];
static struct image fatbins[NMODES], host_obj, host_exe, cubin;

static int load(const char *name, struct image *im) {
  char path[512];
  FILE *f;
  long n;

  snprintf(path, sizeof(path), "%s/%s", workdir, name);
  f = fopen(path, "rb");
  if (f == NULL)
    return -1;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  im->bytes = __real_malloc((size_t)n + 1);
  im->len = fread(im->bytes, 1, (size_t)n, f);
  fclose(f);
  return im->len == (size_t)n ? 0 : -1;
}

static int sh(const char *fmt, ...) {
  char cmd[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof(cmd), fmt, ap);
  va_end(ap);
  return system(cmd);
}

static int build_fixtures(void **state) {
  const char *nvcc = getenv("NVCC");
  const char *tmp = getenv("TMPDIR");
  const char *gen = "-gencode arch=compute_90,code=compute_90 -gencode arch=compute_90,code=sm_90 "
                    "-gencode arch=compute_80,code=sm_80";
  FILE *f;
  size_t i;

  (void)state;
  if (nvcc == NULL || *nvcc == 0)
    nvcc = "nvcc";
  snprintf(workdir, sizeof(workdir), "%s/test-rw-fatbin.XXXXXX", tmp ? tmp : "/tmp");
  if (mkdtemp(workdir) == NULL)
    return -1;
  {
    char path[512];
    snprintf(path, sizeof(path), "%s/k.cu", workdir);
    f = fopen(path, "w");
    if (f == NULL)
      return -1;
    fputs(kernel_src, f);
    fclose(f);
  }
  for (i = 0; i < NMODES; i++) {
    char name[64];
    if (sh("cd %s && %s -fatbin %s --compress-mode=%s k.cu -o k-%s.fatbin", workdir, nvcc, gen,
           modes[i], modes[i]) != 0)
      return -1;
    snprintf(name, sizeof(name), "k-%s.fatbin", modes[i]);
    if (load(name, &fatbins[i]) < 0)
      return -1;
  }
  if (sh("cd %s && %s -c -gencode arch=compute_90,code=compute_90 k.cu -o k.o && "
         "%s -gencode arch=compute_90,code=sm_90 k.cu -o k.exe && %s -cubin -arch=sm_90 k.cu -o "
         "k.cubin",
         workdir, nvcc, nvcc, nvcc) != 0)
    return -1;
  if (load("k.o", &host_obj) < 0 || load("k.exe", &host_exe) < 0 || load("k.cubin", &cubin) < 0)
    return -1;
  return 0;
}

static int remove_fixtures(void **state) {
  (void)state;
  sh("rm -rf %s", workdir);
  return 0;
}

/* Lists all entries of an image; returns the count, -1 on error. */
static int list(const void *img, size_t len, rw_fatbin_entry_t *out, int max) {
  rw_fatbin_t *fb;
  rw_fatbin_entry_t e;
  int n = 0, rc;

  if (rw_fatbin_open(img, len, &fb, NULL) < 0)
    return -1;
  while ((rc = rw_fatbin_next(fb, &e, NULL)) == 1)
    if (n < max)
      out[n++] = e;
  rw_fatbin_free(fb);
  return rc < 0 ? -1 : n;
}

static void *extract(const struct image *im, const rw_fatbin_entry_t *e, size_t *len) {
  rw_fatbin_t *fb;
  void *out = NULL;
  assert_int_equal(rw_fatbin_open(im->bytes, im->len, &fb, NULL), 0);
  assert_int_equal(rw_fatbin_extract(fb, e, 0, &out, len, NULL), 0);
  rw_fatbin_free(fb);
  return out;
}

/* ---- tests over real nvcc output ---- */

static void fatbin_lists_ptx_and_two_cubins(void **state) {
  rw_fatbin_entry_t e[8];
  (void)state;
  assert_int_equal(list(fatbins[0].bytes, fatbins[0].len, e, 8), 3);
  assert_int_equal(e[0].kind, RW_FATBIN_KIND_ELF);
  assert_int_equal(e[0].arch, 90);
  assert_int_equal(e[1].kind, RW_FATBIN_KIND_PTX);
  assert_int_equal(e[1].arch, 90);
  assert_int_equal(e[1].version_major, 9);
  assert_int_equal(e[2].kind, RW_FATBIN_KIND_ELF);
  assert_int_equal(e[2].arch, 80);
  assert_true(e[0].flags & RW_FATBIN_FLAG_64BIT);
  for (int i = 0; i < 3; i++)
    assert_int_equal(e[i].comp, RW_FATBIN_COMP_NONE);
}

/* Which compressions each mode produced, as a bitmask of 1 << comp. */
static unsigned comps_of(const struct image *im) {
  rw_fatbin_entry_t e[8];
  unsigned m = 0;
  int n = list(im->bytes, im->len, e, 8);
  assert_int_equal(n, 3);
  for (int i = 0; i < n; i++)
    m |= 1u << e[i].comp;
  return m;
}

static void compress_modes_use_lz4_for_speed_and_zstd_otherwise(void **state) {
  (void)state;
  assert_int_equal(comps_of(&fatbins[0]), 1u << RW_FATBIN_COMP_NONE);
  for (size_t i = 1; i < NMODES; i++) {
    unsigned want = strcmp(modes[i], "speed") == 0 ? RW_FATBIN_COMP_LZ4 : RW_FATBIN_COMP_ZSTD;
    assert_true(comps_of(&fatbins[i]) & (1u << want));
  }
}

static void every_compress_mode_decompresses_to_the_plain_payload(void **state) {
  rw_fatbin_entry_t plain[8], e[8];
  (void)state;
  assert_int_equal(list(fatbins[0].bytes, fatbins[0].len, plain, 8), 3);
  for (size_t m = 1; m < NMODES; m++) {
    assert_int_equal(list(fatbins[m].bytes, fatbins[m].len, e, 8), 3);
    for (int i = 0; i < 3; i++) {
      size_t la, lb;
      void *a = extract(&fatbins[0], &plain[i], &la);
      void *b = extract(&fatbins[m], &e[i], &lb);
      assert_int_equal(plain[i].kind, e[i].kind);
      assert_int_equal(la, lb);
      assert_memory_equal(a, b, la);
      assert_int_equal(((char *)b)[lb], 0);
      free(a);
      free(b);
    }
  }
}

static void extracted_ptx_is_text_with_both_entries(void **state) {
  char *ptx;
  size_t len;
  unsigned arch;
  (void)state;
  for (size_t m = 0; m < NMODES; m++) {
    assert_int_equal(rw_fatbin_ptx(fatbins[m].bytes, fatbins[m].len, 90, &ptx, &len, &arch, NULL),
                     0);
    assert_non_null(ptx);
    assert_int_equal(arch, 90);
    assert_int_equal(strlen(ptx), len);
    assert_non_null(strstr(ptx, ".entry big1"));
    assert_non_null(strstr(ptx, ".entry big2"));
    free(ptx);
  }
}

static void ptx_for_older_device_is_absent(void **state) {
  char *ptx = (char *)1;
  size_t len;
  rw_diag_t d = {0};
  (void)state;
  /* compute_90 PTX cannot serve an sm_80 device. */
  assert_int_equal(rw_fatbin_ptx(fatbins[0].bytes, fatbins[0].len, 80, &ptx, &len, NULL, &d), 0);
  assert_null(ptx);
  assert_string_equal(d.text, "no PTX: not transformable");
}

static void host_object_exposes_its_nv_fatbin(void **state) {
  rw_fatbin_t *fb;
  rw_fatbin_entry_t e[8];
  int n;
  (void)state;
  assert_int_equal(rw_fatbin_open(host_obj.bytes, host_obj.len, &fb, NULL), 0);
  assert_int_equal(rw_fatbin_image_kind(fb), RW_IMAGE_HOST_ELF);
  rw_fatbin_free(fb);
  n = list(host_obj.bytes, host_obj.len, e, 8);
  assert_int_equal(n, 1);
  assert_int_equal(e[0].kind, RW_FATBIN_KIND_PTX);
  assert_int_equal(e[0].arch, 90);
}

static void host_executable_without_ptx_is_not_transformable(void **state) {
  rw_fatbin_entry_t e[8];
  char *ptx = (char *)1;
  size_t len;
  rw_diag_t d = {0};
  int n;
  (void)state;
  n = list(host_exe.bytes, host_exe.len, e, 8);
  assert_true(n >= 1);
  for (int i = 0; i < n; i++)
    assert_int_equal(e[i].kind, RW_FATBIN_KIND_ELF);
  assert_int_equal(rw_fatbin_ptx(host_exe.bytes, host_exe.len, 90, &ptx, &len, NULL, &d), 0);
  assert_null(ptx);
  assert_string_equal(d.text, "no PTX: not transformable");
}

static void cubin_is_one_sass_entry_with_its_arch(void **state) {
  rw_fatbin_entry_t e[2];
  rw_fatbin_t *fb;
  (void)state;
  assert_int_equal(rw_fatbin_open(cubin.bytes, cubin.len, &fb, NULL), 0);
  assert_int_equal(rw_fatbin_image_kind(fb), RW_IMAGE_CUBIN);
  rw_fatbin_free(fb);
  assert_int_equal(list(cubin.bytes, cubin.len, e, 2), 1);
  assert_int_equal(e[0].kind, RW_FATBIN_KIND_ELF);
  assert_int_equal(e[0].arch, 90);
  assert_int_equal(e[0].size, cubin.len);
}

static void ptx_text_is_one_entry_with_its_target(void **state) {
  const char *ptx = "//\n// Generated\n//\n\n.version 9.0\n.target sm_90a\n.address_size 64\n";
  rw_fatbin_entry_t e[2];
  (void)state;
  assert_int_equal(list(ptx, strlen(ptx) + 1, e, 2), 1);
  assert_int_equal(e[0].kind, RW_FATBIN_KIND_PTX);
  assert_int_equal(e[0].arch, 90);
  assert_int_equal(e[0].size, strlen(ptx));
}

static void image_size_follows_the_wrapper_to_the_fatbin(void **state) {
  struct {
    int magic, version;
    const void *data;
    void *filename;
  } wrapper = {(int)RW__FATBINC_MAGIC, 1, NULL, NULL};
  const void *data;
  size_t len;
  (void)state;
  wrapper.data = fatbins[2].bytes;
  assert_int_equal(rw_fatbin_image_size(&wrapper, &data, &len), 0);
  assert_ptr_equal(data, fatbins[2].bytes);
  assert_int_equal(len, fatbins[2].len);
  assert_int_equal(rw_fatbin_image_size(cubin.bytes, &data, &len), 0);
  assert_int_equal(len, cubin.len);
  assert_int_equal(rw_fatbin_image_size(".version 9.0\n", &data, &len), 0);
  assert_int_equal(len, 14);
}

static void wrapper_bytes_are_refused_by_open(void **state) {
  unsigned char w[24] = {0xb1, 0x43, 0x62, 0x46, 1};
  rw_fatbin_t *fb;
  rw_diag_t d = {0};
  (void)state;
  assert_int_equal(rw_fatbin_open(w, sizeof(w), &fb, &d), -EPROTO);
  assert_non_null(strstr(d.text, "Wrapper"));
}

/* ---- the tally-ptx fatbin subcommand ---- */

/* Runs rw__cmd_fatbin with stdout captured into out (NUL-terminated). */
static int run_cmd(char **argv, int argc, char *out, size_t out_len) {
  char path[512];
  int saved, rc;
  FILE *f;
  size_t n;

  snprintf(path, sizeof(path), "%s/cmd-out.txt", workdir);
  fflush(stdout);
  saved = dup(1);
  f = fopen(path, "w");
  assert_non_null(f);
  dup2(fileno(f), 1);
  rc = rw__cmd_fatbin(argc, argv);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  fclose(f);
  f = fopen(path, "r");
  assert_non_null(f);
  n = fread(out, 1, out_len - 1, f);
  out[n] = 0;
  fclose(f);
  return rc;
}

static void cmd_fatbin_extracts_every_entry_decompressed(void **state) {
  char file[512], dir[512], out[8192], ptx_path[600];
  char *argv[4] = {"fatbin", file, "--extract", dir};
  rw_fatbin_entry_t e[8];
  struct image got;
  size_t plain_len;
  void *plain;
  (void)state;
  snprintf(file, sizeof(file), "%s/k-speed.fatbin", workdir);
  snprintf(dir, sizeof(dir), "%s/extract", workdir);
  assert_int_equal(run_cmd(argv, 4, out, sizeof(out)), 0);
  assert_non_null(strstr(out, "lz4"));
  assert_non_null(strstr(out, "3 entries, 1 PTX"));
  /* the extracted PTX equals the plain fatbin's PTX payload */
  assert_int_equal(list(fatbins[0].bytes, fatbins[0].len, e, 8), 3);
  plain = extract(&fatbins[0], &e[1], &plain_len);
  snprintf(ptx_path, sizeof(ptx_path), "extract/k-speed.fatbin.1.sm_90.ptx");
  assert_int_equal(load(ptx_path, &got), 0);
  assert_int_equal(got.len, plain_len);
  assert_memory_equal(got.bytes, plain, plain_len);
  free(got.bytes);
  free(plain);
}

static void cmd_fatbin_reports_no_ptx_and_exits_zero(void **state) {
  char file[512], out[8192];
  char *argv[2] = {"fatbin", file};
  (void)state;
  snprintf(file, sizeof(file), "%s/k.cubin", workdir);
  assert_int_equal(run_cmd(argv, 2, out, sizeof(out)), 0);
  assert_non_null(strstr(out, "no PTX: not transformable"));
}

static void cmd_fatbin_rejects_garbage_and_bad_usage(void **state) {
  char file[512], out[8192];
  char *argv[2] = {"fatbin", file};
  char *usage[3] = {"fatbin", "--bogus", file};
  FILE *f;
  (void)state;
  snprintf(file, sizeof(file), "%s/garbage.bin", workdir);
  f = fopen(file, "w");
  assert_non_null(f);
  fputs("this is not device code", f);
  fclose(f);
  assert_int_equal(run_cmd(argv, 2, out, sizeof(out)), 1);
  assert_int_equal(run_cmd(usage, 3, out, sizeof(out)), 2);
}

/* ---- corrupt input ---- */

/* Walks and extracts everything; returns the first error or 0. */
static int walk_all(const void *img, size_t len) {
  rw_fatbin_t *fb;
  rw_fatbin_entry_t e;
  int rc;

  rc = rw_fatbin_open(img, len, &fb, NULL);
  if (rc < 0)
    return rc;
  while ((rc = rw_fatbin_next(fb, &e, NULL)) == 1) {
    void *out;
    size_t n;
    rc = rw_fatbin_extract(fb, &e, 1u << 20, &out, &n, NULL);
    if (rc < 0)
      break;
    free(out);
  }
  rw_fatbin_free(fb);
  return rc < 0 ? rc : 0;
}

static void every_truncation_fails_cleanly(void **state) {
  (void)state;
  for (size_t m = 0; m < NMODES; m++) {
    const struct image *im = &fatbins[m];
    /* Each prefix is copied to its own allocation so ASan sees overreads. */
    for (size_t n = 0; n < im->len; n += (n < 256 ? 1 : 97)) {
      unsigned char *cut = __real_malloc(n ? n : 1);
      memcpy(cut, im->bytes, n);
      assert_true(walk_all(cut, n) < 0);
      free(cut);
    }
  }
}

static void truncated_host_elf_fails_cleanly(void **state) {
  (void)state;
  for (size_t n = 0; n < host_obj.len; n += 13) {
    unsigned char *cut = __real_malloc(n ? n : 1);
    memcpy(cut, host_obj.bytes, n);
    (void)walk_all(cut, n); /* short prefixes may lose .nv_fatbin: 0 or error, never a crash */
    free(cut);
  }
}

static void flipped_bytes_never_crash(void **state) {
  (void)state;
  for (size_t m = 1; m < NMODES; m++) {
    const struct image *im = &fatbins[m];
    unsigned char *copy = __real_malloc(im->len);
    for (size_t i = 0; i < im->len; i += (i < 400 ? 1 : 211)) {
      memcpy(copy, im->bytes, im->len);
      copy[i] ^= 0x5a;
      (void)walk_all(copy, im->len);
    }
    free(copy);
  }
}

/* Offset of the first entry header of a raw fatbin. */
#define FIRST_ENTRY 16

static void payload_past_fatbin_is_rejected(void **state) {
  unsigned char *c = __real_malloc(fatbins[0].len);
  rw_fatbin_t *fb;
  rw_fatbin_entry_t e;
  rw_diag_t d = {0};
  (void)state;
  memcpy(c, fatbins[0].bytes, fatbins[0].len);
  c[FIRST_ENTRY + 8 + 6] = 0x7f; /* payload size high bytes */
  assert_int_equal(rw_fatbin_open(c, fatbins[0].len, &fb, NULL), 0);
  assert_int_equal(rw_fatbin_next(fb, &e, &d), -EPROTO);
  assert_non_null(strstr(d.text, "payload"));
  /* the error is sticky */
  assert_int_equal(rw_fatbin_next(fb, &e, NULL), -EPROTO);
  rw_fatbin_free(fb);
  free(c);
}

static void fat_size_past_image_is_rejected(void **state) {
  unsigned char *c = __real_malloc(fatbins[0].len);
  (void)state;
  memcpy(c, fatbins[0].bytes, fatbins[0].len);
  c[8 + 5] = 1; /* fat size += 2^40 */
  assert_int_equal(walk_all(c, fatbins[0].len), -EPROTO);
  free(c);
}

static void compressed_size_over_payload_is_rejected(void **state) {
  rw_fatbin_entry_t e[8];
  unsigned char *c = __real_malloc(fatbins[2].len);
  (void)state;
  memcpy(c, fatbins[2].bytes, fatbins[2].len);
  assert_int_equal(list(c, fatbins[2].len, e, 8), 3);
  assert_int_equal(e[0].comp, RW_FATBIN_COMP_ZSTD); /* size mode compresses the ELF */
  c[FIRST_ENTRY + 16 + 3] = 0x40;                   /* compressed size += 1 GiB */
  assert_int_equal(walk_all(c, fatbins[2].len), -EPROTO);
  free(c);
}

static void decompressed_size_over_limit_is_efbig(void **state) {
  rw_fatbin_entry_t e[8];
  rw_fatbin_t *fb;
  void *out;
  size_t n;
  rw_diag_t d = {0};
  (void)state;
  assert_int_equal(list(fatbins[3].bytes, fatbins[3].len, e, 8), 3); /* speed */
  assert_int_equal(e[1].comp, RW_FATBIN_COMP_LZ4);
  assert_int_equal(rw_fatbin_open(fatbins[3].bytes, fatbins[3].len, &fb, NULL), 0);
  assert_int_equal(rw_fatbin_extract(fb, &e[1], e[1].size - 1, &out, &n, &d), -EFBIG);
  assert_null(out);
  rw_fatbin_free(fb);
}

static void lying_uncompressed_size_is_eproto(void **state) {
  for (size_t m = 1; m < NMODES; m++) {
    rw_fatbin_entry_t e[8];
    rw_fatbin_t *fb;
    void *out;
    size_t n;
    (void)state;
    assert_int_equal(list(fatbins[m].bytes, fatbins[m].len, e, 8), 3);
    assert_int_not_equal(e[1].comp, RW_FATBIN_COMP_NONE);
    assert_int_equal(rw_fatbin_open(fatbins[m].bytes, fatbins[m].len, &fb, NULL), 0);
    e[1].size += 1;
    assert_int_equal(rw_fatbin_extract(fb, &e[1], 0, &out, &n, NULL), -EPROTO);
    e[1].size -= 2;
    assert_int_equal(rw_fatbin_extract(fb, &e[1], 0, &out, &n, NULL), -EPROTO);
    e[1].payload_offset = fatbins[m].len;
    assert_int_equal(rw_fatbin_extract(fb, &e[1], 0, &out, &n, NULL), -EINVAL);
    rw_fatbin_free(fb);
  }
}

static void garbage_is_not_an_image(void **state) {
  rw_fatbin_t *fb;
  rw_diag_t d = {0};
  (void)state;
  assert_int_equal(rw_fatbin_open("\x01\x02\x03\x04garbage", 11, &fb, &d), -EPROTO);
  assert_int_equal(rw_fatbin_open("", 0, &fb, NULL), -EPROTO);
  assert_int_equal(rw_fatbin_open(NULL, 0, &fb, NULL), -EINVAL);
}

static void zero_padding_between_fatbins_is_skipped(void **state) {
  size_t n = fatbins[0].len, total = 2 * n + 8;
  unsigned char *two = calloc(1, total);
  rw_fatbin_entry_t e[8];
  (void)state;
  memcpy(two, fatbins[0].bytes, n);
  memcpy(two + n + 8, fatbins[0].bytes, n);
  /* A raw image is one region: the second fatbin follows 8 zero bytes. */
  assert_int_equal(list(two, total, e, 8), 6);
  assert_int_equal(e[3].container, 1);
  assert_int_equal(e[5].index, 5);
  two[n + 3] = 1; /* junk in the gap */
  assert_int_equal(list(two, total, e, 8), -1);
  free(two);
}

/* ---- LZ4 block decoder ---- */

static void lz4_overlapping_match_repeats_a_pattern(void **state) {
  /* "ab", then a match at offset 2 of length 6 -> "abababab", then twelve
   * literal '!' (a block ends in at least 5 literals and its last match
   * starts at least 12 bytes before the end: lz4_Block_format.md) */
  unsigned char blk[5 + 1 + 12] = {0x22, 'a', 'b', 0x02, 0x00, 0xc0};
  unsigned char out[20];
  (void)state;
  memset(blk + 6, '!', 12);
  assert_int_equal(rw__lz4_block_decode(blk, sizeof(blk), out, sizeof(out)), 0);
  assert_memory_equal(out, "abababab!!!!!!!!!!!!", sizeof(out));
}

static void lz4_rejects_bad_offsets_and_overruns(void **state) {
  const unsigned char off0[] = {0x10, 'a', 0x00, 0x00, 0x00};
  const unsigned char far[] = {0x10, 'a', 0x02, 0x00, 0x00};
  const unsigned char longlit[] = {0xf0, 0xff, 0xff};
  const unsigned char lit[] = {0x30, 'a', 'b', 'c'};
  unsigned char out[64];
  (void)state;
  assert_int_equal(rw__lz4_block_decode(off0, sizeof(off0), out, 8), -EPROTO);
  assert_int_equal(rw__lz4_block_decode(far, sizeof(far), out, 8), -EPROTO);
  assert_int_equal(rw__lz4_block_decode(longlit, sizeof(longlit), out, 64), -EPROTO);
  assert_int_equal(rw__lz4_block_decode(lit, sizeof(lit), out, 2), -EPROTO); /* output too small */
  assert_int_equal(rw__lz4_block_decode(lit, sizeof(lit), out, 4), -EPROTO); /* output too big */
  assert_int_equal(rw__lz4_block_decode(lit, sizeof(lit), out, 3), 0);
}

/* ---- allocation failure ---- */

static void every_allocation_failure_returns_enomem(void **state) {
  int failed_somewhere = 1;
  (void)state;
  for (int n = 0; failed_somewhere; n++) {
    char *ptx = NULL;
    size_t len;
    rw_diag_t d = {0};
    int rc;
    alloc_count = 0;
    alloc_fail_at = n;
    rc = rw_fatbin_ptx(fatbins[1].bytes, fatbins[1].len, 90, &ptx, &len, NULL, &d);
    failed_somewhere = alloc_count > n;
    alloc_fail_at = -1;
    if (failed_somewhere) {
      assert_int_equal(rc, -ENOMEM);
      assert_null(ptx);
    } else {
      assert_int_equal(rc, 0);
      assert_non_null(ptx);
      free(ptx);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fatbin_lists_ptx_and_two_cubins),
      cmocka_unit_test(compress_modes_use_lz4_for_speed_and_zstd_otherwise),
      cmocka_unit_test(every_compress_mode_decompresses_to_the_plain_payload),
      cmocka_unit_test(extracted_ptx_is_text_with_both_entries),
      cmocka_unit_test(ptx_for_older_device_is_absent),
      cmocka_unit_test(host_object_exposes_its_nv_fatbin),
      cmocka_unit_test(host_executable_without_ptx_is_not_transformable),
      cmocka_unit_test(cubin_is_one_sass_entry_with_its_arch),
      cmocka_unit_test(ptx_text_is_one_entry_with_its_target),
      cmocka_unit_test(image_size_follows_the_wrapper_to_the_fatbin),
      cmocka_unit_test(wrapper_bytes_are_refused_by_open),
      cmocka_unit_test(cmd_fatbin_extracts_every_entry_decompressed),
      cmocka_unit_test(cmd_fatbin_reports_no_ptx_and_exits_zero),
      cmocka_unit_test(cmd_fatbin_rejects_garbage_and_bad_usage),
      cmocka_unit_test(every_truncation_fails_cleanly),
      cmocka_unit_test(truncated_host_elf_fails_cleanly),
      cmocka_unit_test(flipped_bytes_never_crash),
      cmocka_unit_test(payload_past_fatbin_is_rejected),
      cmocka_unit_test(fat_size_past_image_is_rejected),
      cmocka_unit_test(compressed_size_over_payload_is_rejected),
      cmocka_unit_test(decompressed_size_over_limit_is_efbig),
      cmocka_unit_test(lying_uncompressed_size_is_eproto),
      cmocka_unit_test(garbage_is_not_an_image),
      cmocka_unit_test(zero_padding_between_fatbins_is_skipped),
      cmocka_unit_test(lz4_overlapping_match_repeats_a_pattern),
      cmocka_unit_test(lz4_rejects_bad_offsets_and_overruns),
      cmocka_unit_test(every_allocation_failure_returns_enomem),
  };
  return cmocka_run_group_tests(tests, build_fixtures, remove_fixtures);
}
