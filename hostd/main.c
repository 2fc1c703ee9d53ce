/* main.c: tallyd's entry point: parse the configuration and run the daemon.
 *
 * Runs in the foreground, logs to stderr, and exits 0 after SIGTERM or
 * SIGINT once every tenant has been cleaned up; exit 2 for bad flags, 1 when
 * it cannot start (no GPU, address in use).
 */
#include "hostd/hostd.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  hostd_config_t cfg;
  hostd_server_t *s = NULL;
  int rc;

  hostd_config_init(&cfg);
  if (hostd_config_parse_args(&cfg, argc, argv, stderr) != 0)
    return 2;
  if (cfg.show_help) {
    hostd_config_usage(stdout);
    return 0;
  }
  rc = hostd_server_new(&s, &cfg, true);
  if (rc != 0) {
    fprintf(stderr, "tallyd: cannot start (%s)\n",
            rc == -ENODEV ? "no usable GPU" : strerror(rc < 0 && rc > -4096 ? -rc : 0));
    return 1;
  }
  rc = hostd_server_run(s);
  hostd_server_free(s);
  return rc == 0 ? 0 : 1;
}
