/* test-sim-pairs-replay.c: replays the sim-pairs fuzz corpus in `make check`.
 *
 * Every file under tests/fuzz/corpus/sim-pairs/ (seeds, and the named
 * inputs of past crashes) goes through the harness's own
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
  assert_true(fuzz_replay_corpus("sim-pairs", LLVMFuzzerTestOneInput) >= 5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fuzz_corpus_replays_without_crash),
  };
  return cmocka_run_group_tests_name("sim-pairs-replay", tests, NULL, NULL);
}
