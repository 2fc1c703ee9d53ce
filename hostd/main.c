/* main.c: tallyd's entry point: parse the configuration and run the daemon.
 *
 * Until the tenant-serving core lands (issue: guestlib/ + hostd/) it parses
 * its flags, answers --help, and refuses to start with a clear message.
 */
#include "hostd/hostd.h"

#include <stdio.h>

int main(int argc, char **argv) {
  hostd_config_t cfg;

  hostd_config_init(&cfg);
  if (hostd_config_parse_args(&cfg, argc, argv, stderr) != 0)
    return 2;
  if (cfg.show_help) {
    hostd_config_usage(stdout);
    return 0;
  }
  fprintf(stderr, "tallyd: the tenant-serving core is not built yet.\n");
  return 2;
}
