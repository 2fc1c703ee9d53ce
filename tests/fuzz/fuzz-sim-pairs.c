/* fuzz-sim-pairs.c: libFuzzer target for the pair benchmark's readers.
 *
 * The first input byte picks the reader (mod 3): 0 the LC CSV, 1 the BE
 * CSV, 2 the manifest (sim/pairs.c).  The rest is the file.  Each must
 * return 0 or an error, never crash, never read past the buffer (the buffer
 * is exactly the input; ASan checks), never leak.  A parse that succeeds is
 * also run through the statistics, whose invariants are checked: p50 <= p99
 * <= the largest sample, a BE rate over the data's own span is >= 0.
 * Build: configure --enable-fuzzing CC=clang; make fuzz.  `make check`
 * replays tests/fuzz/corpus/sim-pairs/ through tests/test-sim-pairs-replay.
 */
#include "sim/pairs.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void lc(const char *text, size_t len) {
  sim_pairs_req_t *r;
  sim_pairs_lc_stats_t s;
  size_t n;
  char err[160];
  if (sim_pairs_lc_parse(text, len, &r, &n, err, sizeof(err)) != 0)
    return;
  if (sim_pairs_lc_stats(r, n, &s) == 0 &&
      (s.exec_p50_ms > s.exec_p99_ms || s.e2e_p50_ms > s.e2e_p99_ms || s.first_ns > s.last_ns))
    abort(); /* a statistics bug of ours */
  free(r);
}

static void be(const char *text, size_t len) {
  sim_pairs_iter_t *it;
  size_t n;
  char err[160];
  if (sim_pairs_be_parse(text, len, &it, &n, err, sizeof(err)) != 0)
    return;
  double rate = sim_pairs_be_rate(it, n, 0, 0);
  if (n > 0 && rate < 0 && it[0].end_ns != it[0].start_ns) {
    /* An empty span is only possible when every iteration is one instant. */
    for (size_t i = 0; i < n; i++)
      if (it[i].start_ns != it[0].start_ns || it[i].end_ns != it[0].start_ns)
        abort();
  }
  free(it);
}

static void manifest(const char *text, size_t len) {
  sim_pairs_entry_t *e;
  size_t n;
  char err[160];
  if (sim_pairs_manifest_parse(text, len, &e, &n, err, sizeof(err)) == 0)
    free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  const char *text = (const char *)data + 1;
  size_t len = size - 1;
  switch (data[0] % 3) {
  case 0: lc(text, len); break;
  case 1: be(text, len); break;
  default: manifest(text, len); break;
  }
  return 0;
}
