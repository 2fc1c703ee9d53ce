/* fuzz-sim-trace.c: libFuzzer target for the decoders of outside files in
 * sim/ and policy/.
 *
 * The first input byte picks the decoder (mod 3): 0 the kernel trace text
 * format (sim/trace.c) and the same bytes as a whole-run trace
 * (sim/runtrace.c, cut into units by class when it parses), 1 the Azure Functions 2021 CSV (sim/arrivals.c),
 * 2 the profile file (policy/profile-file.c).  The rest is the file.  Each
 * must return 0 or an error, never crash, never read past the buffer (the
 * buffer is exactly the input; ASan checks), never leak.  A parse that
 * succeeds is also re-encoded (traces and profiles) and parsed again, which
 * must succeed: the writer and the parser agree.
 * Build: configure --enable-fuzzing CC=clang; make fuzz.  `make check`
 * replays tests/fuzz/corpus/sim-trace/ through tests/test-sim-trace-replay.
 */
#include "sim/sim.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[160];
  if (size < 1)
    return 0;
  const char *text = (const char *)data + 1;
  size_t len = size - 1;
  switch (data[0] % 3) {
  case 0: {
    sim_trace_t t, u;
    if (sim_trace_parse(text, len, &t, err, sizeof(err)) == 0) {
      char *buf = NULL;
      size_t blen = 0;
      FILE *f = open_memstream(&buf, &blen);
      if (f) {
        if (sim_trace_write(&t, f) == 0 && fclose(f) == 0) {
          if (sim_trace_parse(buf, blen, &u, err, sizeof(err)) != 0)
            abort(); /* writer and parser disagree: a bug of ours */
          sim_trace_close(&u);
        }
        free(buf);
      }
      sim_trace_close(&t);
    }
    sim_runtrace_t rt;
    if (sim_runtrace_parse(text, len, &rt, err, sizeof(err)) == 0) {
      for (int c = 0; c < 2; c++) {
        sim_units_t un;
        if (sim_runtrace_split(&rt, c ? POL_CLASS_BE : POL_CLASS_LC, NULL, 0, &un, err,
                               sizeof(err)) == 0)
          sim_units_close(&un);
      }
      sim_launch_t l;
      char d[400];
      if (sim_runtrace_launch(&rt, POL_CLASS_LC, &l) == 0)
        sim_launch_describe(&l, d, sizeof(d));
      sim_runtrace_estimate_untimed(&rt, 5000, 132);
      sim_runtrace_close(&rt);
    }
    break;
  }
  case 1: {
    sim_arrivals_t a;
    /* 10 ms at 10^5/s: small enough that a valid input stays fast. */
    if (sim_arrivals_azure(&a, text, len, NULL, 100000, 10000000, err, sizeof(err)) == 0)
      sim_arrivals_close(&a);
    break;
  }
  default: {
    pol_profiles_t *p;
    const char *why;
    if (pol_profiles_new(&p) != 0)
      return 0;
    if (pol_profiles_decode(p, (const uint8_t *)text, len, &why) == 0) {
      size_t need = 0;
      (void)pol_profiles_encode(p, NULL, 0, &need);
      uint8_t *buf = malloc(need);
      if (buf && pol_profiles_encode(p, buf, need, &need) == 0) {
        pol_profiles_t *q;
        if (pol_profiles_new(&q) == 0) {
          if (pol_profiles_decode(q, buf, need, &why) != 0)
            abort();
          pol_profiles_free(q);
        }
      }
      free(buf);
    }
    pol_profiles_free(p);
    break;
  }
  }
  return 0;
}
