/* test-wire-fuzz-replay.c: make check replays every committed input of the
 * wire fuzz corpora (tests/fuzz/corpus/wire-frame/, wire-hello/) through the
 * same entry points libFuzzer drives, so a crash once found stays fixed
 * (SQLite's fuzzcheck).  Built without libFuzzer: the targets are compiled
 * with WIRE_FUZZ_NO_ENTRY and called directly.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

int wire_fuzz_frame_one(const uint8_t *data, size_t size);
int wire_fuzz_hello_one(const uint8_t *data, size_t size);

static int replay_dir(const char *name, int (*fn)(const uint8_t *, size_t)) {
  const char *src = getenv("TALLY_SRCDIR");
  char dir[4096], path[8192];
  DIR *d;
  struct dirent *e;
  int n = 0;

  snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/%s", src ? src : "..", name);
  d = opendir(dir);
  if (d == NULL)
    fail_msg("cannot open corpus %s", dir);
  while ((e = readdir(d)) != NULL) {
    FILE *f;
    uint8_t *buf;
    long len;
    if (e->d_name[0] == '.')
      continue;
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc(len > 0 ? (size_t)len : 1);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    fn(buf, (size_t)len);
    free(buf);
    n++;
  }
  closedir(d);
  return n;
}

static void frame_corpus_replays_cleanly(void **state) {
  (void)state;
  assert_true(replay_dir("wire-frame", wire_fuzz_frame_one) >= 10);
}

static void hello_corpus_replays_cleanly(void **state) {
  (void)state;
  assert_true(replay_dir("wire-hello", wire_fuzz_hello_one) >= 5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(frame_corpus_replays_cleanly),
      cmocka_unit_test(hello_corpus_replays_cleanly),
  };
  return cmocka_run_group_tests_name("wire-fuzz-replay", tests, NULL, NULL);
}
