/* test-wire-fuzz-replay.c: make check replays every committed input of the
 * wire fuzz corpora (tests/fuzz/corpus/wire-frame/, wire-hello/, wire-rbulk/, wire-direct/) through the
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

#include "tests/fuzz-replay.h"

int wire_fuzz_frame_one(const uint8_t *data, size_t size);
int wire_fuzz_hello_one(const uint8_t *data, size_t size);
int wire_fuzz_rbulk_one(const uint8_t *data, size_t size);
int wire_fuzz_direct_one(const uint8_t *data, size_t size);

static void frame_corpus_replays_cleanly(void **state) {
  (void)state;
  assert_true(fuzz_replay_corpus("wire-frame", wire_fuzz_frame_one) >= 10);
}

static void hello_corpus_replays_cleanly(void **state) {
  (void)state;
  assert_true(fuzz_replay_corpus("wire-hello", wire_fuzz_hello_one) >= 5);
}

static void rbulk_corpus_replays_cleanly(void **state) {
  (void)state;
  assert_true(fuzz_replay_corpus("wire-rbulk", wire_fuzz_rbulk_one) >= 5);
}

static void direct_corpus_replays_cleanly(void **state) {
  (void)state;
  assert_true(fuzz_replay_corpus("wire-direct", wire_fuzz_direct_one) >= 10);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(frame_corpus_replays_cleanly),
      cmocka_unit_test(hello_corpus_replays_cleanly),
      cmocka_unit_test(rbulk_corpus_replays_cleanly),
      cmocka_unit_test(direct_corpus_replays_cleanly),
  };
  return cmocka_run_group_tests_name("wire-fuzz-replay", tests, NULL, NULL);
}
