/* test-rw-fatbin-replay.c: replays the fatbin fuzz corpus in `make check`.
 *
 * Every file under tests/fuzz/corpus/rw-fatbin/ (seeds and the named
 * inputs of past crashes) goes through the fuzz harness's own
 * LLVMFuzzerTestOneInput, so a fixed crash stays fixed in builds without
 * libFuzzer.  Run with --enable-sanitizers for the overread checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/fuzz-replay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_corpus_replays_without_crash(void **state) {
  (void)state;
  assert_true(fuzz_replay_corpus("rw-fatbin", LLVMFuzzerTestOneInput) >= 7);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fuzz_corpus_replays_without_crash),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
