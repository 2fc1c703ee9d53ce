/* pol.h: the public API of policy/, Tally's scheduler as a pure C library.
 *
 * policy/ knows no CUDA: tallyd (on a GPU) and sim/ (on the CPU) drive it
 * through this one interface.  Time is always passed in by the caller, in
 * nanoseconds, so tests run on virtual time.
 */
#ifndef TALLY_POL_H
#define TALLY_POL_H

#include <stdbool.h>
#include <stdint.h>

/* Default turnaround threshold: 0.0316 ms, the Tally paper's setting. */
#define POL_DEFAULT_THRESHOLD_NS 31600u

typedef struct pol_config {
  uint64_t threshold_ns; /* max turnaround a best-effort launch may cause */
} pol_config_t;

/* Fills *cfg with defaults. */
void pol_config_init(pol_config_t *cfg);

/* Returns 0, or -EINVAL naming the bad field in *why (static string). */
int pol_config_check(const pol_config_t *cfg, const char **why);

#endif /* TALLY_POL_H */
