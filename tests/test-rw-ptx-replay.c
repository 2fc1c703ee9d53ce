/* test-rw-ptx-replay.c: replays the PTX fuzz corpus in `make check`.
 *
 * Every file under tests/fuzz/corpus/rw-ptx/ (seeds and the named inputs of
 * past crashes) goes through the fuzz harness's own LLVMFuzzerTestOneInput,
 * which aborts when parse -> print -> parse is not a fixpoint; so a fixed
 * crash stays fixed in builds without libFuzzer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/fuzz-replay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void ptx_fuzz_corpus_replays_without_crash(void **state) {
  (void)state;
  assert_true(fuzz_replay_corpus("rw-ptx", LLVMFuzzerTestOneInput) >= 5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ptx_fuzz_corpus_replays_without_crash),
  };
  return cmocka_run_group_tests_name("rw-ptx-replay", tests, NULL, NULL);
}
