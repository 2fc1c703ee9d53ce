/* test-rw-fatbin-replay.c: replays the fatbin fuzz corpus in `make check`.
 *
 * Every file under tests/fuzz/corpus/rw-fatbin/ (seeds and the named
 * inputs of past crashes) goes through the fuzz harness's own
 * LLVMFuzzerTestOneInput, so a fixed crash stays fixed in builds without
 * libFuzzer.  Run with --enable-sanitizers for the overread checks.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_corpus_replays_without_crash(void **state) {
  const char *src = getenv("TALLY_SRCDIR");
  char dir[1024], path[2048];
  struct dirent *de;
  DIR *d;
  int n = 0;

  (void)state;
  snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/rw-fatbin", src ? src : ".");
  d = opendir(dir);
  assert_non_null(d);
  while ((de = readdir(d)) != NULL) {
    FILE *f;
    unsigned char *buf;
    long len;
    if (de->d_name[0] == '.')
      continue;
    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
    f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    fseek(f, 0, SEEK_SET);
    /* Exact-size allocation so ASan catches a read one byte past. */
    buf = malloc(len > 0 ? (size_t)len : 1);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)len);
    free(buf);
    n++;
  }
  closedir(d);
  assert_true(n >= 7);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fuzz_corpus_replays_without_crash),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
