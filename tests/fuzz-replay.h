/* fuzz-replay.h: replay a committed fuzz corpus in `make check`.
 *
 * Every fuzz target keeps its seeds and the named inputs of past crashes in
 * tests/fuzz/corpus/<name>/; the replay tests feed each file to the target's
 * own entry point, so a crash once found stays fixed in builds without
 * libFuzzer (SQLite's fuzzcheck).  Each input is read into an allocation of
 * exactly its size, so a sanitizer build catches a read one byte past it.
 * Include after <cmocka.h>; test support only, never linked into Tally.
 */
#ifndef TALLY_TESTS_FUZZ_REPLAY_H
#define TALLY_TESTS_FUZZ_REPLAY_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Feeds every file of tests/fuzz/corpus/NAME/ (under $TALLY_SRCDIR) to fn
 * and returns how many there were; fails the test if the folder is missing. */
static inline int fuzz_replay_corpus(const char *name, int (*fn)(const uint8_t *, size_t)) {
  const char *src = getenv("TALLY_SRCDIR");
  char dir[4096], path[8192];
  struct dirent *e;
  DIR *d;
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
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    len = ftell(f);
    assert_true(len >= 0);
    assert_int_equal(fseek(f, 0, SEEK_SET), 0);
    buf = malloc(len > 0 ? (size_t)len : 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    fn(buf, (size_t)len);
    free(buf);
    n++;
  }
  closedir(d);
  return n;
}

#endif /* TALLY_TESTS_FUZZ_REPLAY_H */
