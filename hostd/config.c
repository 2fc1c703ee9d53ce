/* config.c: tallyd's configuration: defaults, command-line flags, --help.
 *
 * Flags are parsed by hand rather than with getopt_long so that the parser
 * is reentrant (tests call it many times) and every error names the flag
 * and what was expected.  Strings are bounded by their fields; an overlong
 * value is refused, never truncated silently.
 */
#include "hostd/hostd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void hostd_config_init(hostd_config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  strcpy(cfg->unix_path, HOSTD_DEFAULT_SOCKET);
  strcpy(cfg->state_dir, HOSTD_DEFAULT_STATE_DIR);
  cfg->log_level = HOSTD_LOG_INFO;
  cfg->worker_spin_us = -1;
  cfg->restart_grace_ms = HOSTD_DEFAULT_RESTART_GRACE_MS;
}

void hostd_config_usage(FILE *f) {
  fprintf(f,
          "usage: tallyd [options]\n"
          "Tally host daemon: serves CUDA tenants on this machine's GPUs.\n\n"
          "  --listen-unix PATH   UNIX socket for local tenants (default %s)\n"
          "  --listen-tcp H:P     also accept remote tenants on host:port\n"
          "  --gpus LIST          comma-separated GPU ordinals to serve (default all)\n"
          "  --state-dir DIR      module and profile caches (default %s)\n"
          "  --token-file FILE    token that TCP tenants must present\n"
          "  --log-level L        error, warn, info (default) or debug\n"
          "  --spin-us N          after a request, poll N us for the next before sleeping\n"
          "                       (0 = never, the default; pays with idle cores)\n"
          "  --worker-spin-us N   a tenant's worker polls its queue N us before sleeping\n"
          "                       (default: 20 with 4 or more CPUs online, else 0)\n"
          "  --restart-grace-ms N after a tenant's GPU fault, tallyd re-executes itself once\n"
          "                       every tenant has left, or after N ms (default %d), closing\n"
          "                       the rest; new tenants are told to retry meanwhile\n"
          "  -h, --help           this text\n",
          HOSTD_DEFAULT_SOCKET, HOSTD_DEFAULT_STATE_DIR, HOSTD_DEFAULT_RESTART_GRACE_MS);
}

static int set_str(char *dst, size_t cap, const char *flag, const char *val, FILE *err) {
  if (strlen(val) >= cap) {
    fprintf(err, "tallyd: %s: value longer than %zu bytes\n", flag, cap - 1);
    return -EINVAL;
  }
  strcpy(dst, val);
  return 0;
}

static int parse_level(const char *s, hostd_log_level_t *out) {
  static const char *const names[] = {"error", "warn", "info", "debug"};
  for (int i = 0; i < 4; i++)
    if (strcmp(s, names[i]) == 0) {
      *out = (hostd_log_level_t)i;
      return 0;
    }
  return -EINVAL;
}

int hostd_config_parse_args(hostd_config_t *cfg, int argc, char **argv, FILE *err) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int rc = 0;

    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      cfg->show_help = 1;
      continue;
    }
    if (v == NULL || strncmp(a, "--", 2) != 0) {
      fprintf(err, "tallyd: %s: %s (see tallyd --help)\n", a,
              strncmp(a, "--", 2) == 0 ? "missing value" : "unexpected argument");
      return -EINVAL;
    }
    if (strcmp(a, "--listen-unix") == 0)
      rc = set_str(cfg->unix_path, sizeof(cfg->unix_path), a, v, err);
    else if (strcmp(a, "--listen-tcp") == 0)
      rc = set_str(cfg->tcp_addr, sizeof(cfg->tcp_addr), a, v, err);
    else if (strcmp(a, "--gpus") == 0)
      rc = set_str(cfg->gpus, sizeof(cfg->gpus), a, v, err);
    else if (strcmp(a, "--state-dir") == 0)
      rc = set_str(cfg->state_dir, sizeof(cfg->state_dir), a, v, err);
    else if (strcmp(a, "--token-file") == 0)
      rc = set_str(cfg->token_file, sizeof(cfg->token_file), a, v, err);
    else if (strcmp(a, "--log-level") == 0) {
      rc = parse_level(v, &cfg->log_level);
      if (rc)
        fprintf(err, "tallyd: --log-level: expected error, warn, info or debug, got '%s'\n", v);
    } else if (strcmp(a, "--spin-us") == 0) {
      char *end = NULL;
      long n = strtol(v, &end, 10);
      /* Above 10 ms a spin is a busy loop, not a latency trick. */
      if (!end || *end || n < 0 || n > 10000) {
        fprintf(err, "tallyd: --spin-us: expected 0..10000, got '%s'\n", v);
        rc = -EINVAL;
      } else {
        cfg->spin_us = (int)n;
      }
    } else if (strcmp(a, "--worker-spin-us") == 0) {
      char *end = NULL;
      long n = strtol(v, &end, 10);
      /* As --spin-us: above 10 ms a spin is a busy loop. */
      if (!end || end == v || *end || n < 0 || n > 10000) {
        fprintf(err, "tallyd: --worker-spin-us: expected 0..10000, got '%s'\n", v);
        rc = -EINVAL;
      } else {
        cfg->worker_spin_us = (int)n;
      }
    } else if (strcmp(a, "--restart-grace-ms") == 0) {
      char *end = NULL;
      long n = strtol(v, &end, 10);
      /* A minute is already longer than any tenant should hold a poisoned
       * GPU; beyond it the flag is a typo. */
      if (!end || end == v || *end || n < 0 || n > 60000) {
        fprintf(err, "tallyd: --restart-grace-ms: expected 0..60000, got '%s'\n", v);
        rc = -EINVAL;
      } else {
        cfg->restart_grace_ms = (int)n;
      }
    } else {
      fprintf(err, "tallyd: unknown option %s (see tallyd --help)\n", a);
      rc = -EINVAL;
    }
    if (rc)
      return rc;
    i++;
  }
  return 0;
}
