/* config.c: defaults and validation of the policy's configuration.
 *
 * A policy configuration comes from tallyd's config file or tally-sim's
 * flags, so it is outside input: every field is checked here, once, before
 * any scheduler sees it.
 */
#include "policy/pol.h"

#include <errno.h>
#include <stddef.h>

void pol_config_init(pol_config_t *cfg) {
  cfg->threshold_ns = POL_DEFAULT_THRESHOLD_NS;
}

int pol_config_check(const pol_config_t *cfg, const char **why) {
  /* Below ~1 us no launch can meet the threshold (launch alone is ~4 us on
   * the H200, BRIEF.md); above 1 s the "latency-critical" promise is void. */
  if (cfg->threshold_ns < 1000 || cfg->threshold_ns > 1000000000ull) {
    if (why)
      *why = "threshold must be between 1 us and 1 s";
    return -EINVAL;
  }
  return 0;
}
