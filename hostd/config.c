/* config.c: tallyd's configuration: defaults, a config file, command-line
 * flags, --help.
 *
 * Flags are parsed by hand rather than with getopt_long so that the parser
 * is reentrant (tests call it many times) and every error names the flag
 * and what was expected.  Strings are bounded by their fields; an overlong
 * value is refused, never truncated silently.
 *
 * One setter (set_option) serves both sources: a config file line
 * `listen-tcp = 0.0.0.0:7000` means exactly `--listen-tcp 0.0.0.0:7000`.
 * `--config FILE` is read before every other flag, wherever it stands, so
 * the command line always overrides the file.  File syntax: one `key =
 * value` (or `key value`) per line, `#` starts a comment, blank lines are
 * skipped, surrounding blanks are trimmed; an unknown key, a missing value
 * or a line longer than HOSTD_CONFIG_LINE_MAX is an error naming FILE:LINE.
 */
#include "hostd/hostd.h"
#include "policy/pol.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Longest config-file line: a path (4096) plus its key and blanks. */
#define HOSTD_CONFIG_LINE_MAX 4352

void hostd_config_init(hostd_config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  strcpy(cfg->unix_path, HOSTD_DEFAULT_SOCKET);
  strcpy(cfg->state_dir, HOSTD_DEFAULT_STATE_DIR);
  cfg->log_level = HOSTD_LOG_INFO;
  cfg->spin_us = -1;
  cfg->worker_spin_us = -1;
  cfg->restart_grace_ms = HOSTD_DEFAULT_RESTART_GRACE_MS;
  strcpy(cfg->policy, "tally");
  cfg->threshold_us = -1;
  cfg->resume_idle_us = -1;
}

void hostd_config_usage(FILE *f) {
  fprintf(f,
          "usage: tallyd [options]\n"
          "Tally host daemon: serves CUDA tenants on this machine's GPUs.\n\n"
          "  --listen-unix PATH   UNIX socket for local tenants (default %s)\n"
          "  --listen-tcp H:P     also accept remote tenants on host:port\n"
          "  --config FILE        read options from FILE (`key = value` lines, keys as the\n"
          "                       flags without --); flags on the command line win\n"
          "  --gpus N             the GPU ordinal to serve (default 0); one GPU per\n"
          "                       tallyd: start one tallyd per GPU\n"
          "  --state-dir DIR      module and profile caches (default %s)\n"
          "  --token-file FILE    token that TCP tenants must present\n"
          "  --log-level L        error, warn, info (default) or debug\n"
          "  --spin-us N          after shared-memory or TCP traffic, poll the rings and\n"
          "                       sockets N us before sleeping (0 = never; default:\n"
          "                       wire's auto, 50 with 4 or more CPUs online, else never)\n"
          "  --worker-spin-us N   a tenant's worker polls its queue N us before sleeping\n"
          "                       (default: 20 with 4 or more CPUs online, else 0)\n"
          "  --restart-grace-ms N after a tenant's GPU fault, tallyd re-executes itself once\n"
          "                       every tenant has left, or after N ms (default %d), closing\n"
          "                       the rest; new tenants are told to retry meanwhile\n"
          "  --policy P           how best-effort kernels are scheduled around the\n"
          "                       latency-critical tenant: tally (default), paper,\n"
          "                       timeslice, mps, mps-prio, tgs, or none (launch every\n"
          "                       kernel as it arrives, on priority streams only)\n"
          "  --threshold-us N     best-effort work in flight may delay the latency-\n"
          "                       critical tenant at most N us (default: the policy's, 31.6)\n"
          "  --resume-idle-us N   best-effort kernels resume N us after the latency-\n"
          "                       critical tenant went idle (default: the policy's, 50)\n"
          "  --trace FILE         write every kernel (tenant, kernel, grid, block, shared\n"
          "                       memory, submit/issue/start/end times) to FILE in\n"
          "                       tally-sim's trace format\n"
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

/* The integer options: name, field, largest value.  Spins: above 10 ms a
 * spin is a busy loop, not a latency trick.  Grace: a minute is already
 * longer than any tenant should hold a poisoned GPU; beyond it the value is
 * a typo. */
typedef struct int_option {
  const char *name;
  size_t off;
  long max;
} int_option_t;

static const int_option_t *int_option(const char *name) {
  static const int_option_t opts[] = {
      {"spin-us", offsetof(hostd_config_t, spin_us), 10000},
      {"worker-spin-us", offsetof(hostd_config_t, worker_spin_us), 10000},
      {"restart-grace-ms", offsetof(hostd_config_t, restart_grace_ms), 60000},
      {"threshold-us", offsetof(hostd_config_t, threshold_us), 1000000},
      {"resume-idle-us", offsetof(hostd_config_t, resume_idle_us), 1000000},
  };
  for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
    if (strcmp(name, opts[i].name) == 0)
      return &opts[i];
  return NULL;
}

/* Applies one option: name is the flag without its leading "--"; where is
 * "--" for a flag or "FILE:LINE: " for a file line, and prefixes the name
 * in every error. */
static int set_option(hostd_config_t *cfg, const char *name, const char *v, const char *where,
                      FILE *err) {
  char flag[4400]; /* "--name", or "FILE:LINE: name" for a file line */
  const int_option_t *io;
  int rc = 0;
  snprintf(flag, sizeof(flag), "%s%s", where, name);
#define BAD(...)                                                                                   \
  do {                                                                                             \
    fprintf(err, "tallyd: ");                                                                      \
    fprintf(err, __VA_ARGS__);                                                                     \
    rc = -EINVAL;                                                                                  \
  } while (0)
  if (strcmp(name, "listen-unix") == 0)
    rc = set_str(cfg->unix_path, sizeof(cfg->unix_path), flag, v, err);
  else if (strcmp(name, "listen-tcp") == 0)
    rc = set_str(cfg->tcp_addr, sizeof(cfg->tcp_addr), flag, v, err);
  else if (strcmp(name, "gpus") == 0) {
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (end && end != v && *end == ',')
      BAD("%s: '%s': tallyd serves one GPU per process in this version; start one tallyd per "
          "GPU, each with its own --gpus N and --listen-unix PATH\n",
          flag, v);
    else if (!end || end == v || *end || n < 0 || n > 1023)
      BAD("%s: expected a GPU ordinal (0, 1, ...), got '%s'\n", flag, v);
    else
      rc = set_str(cfg->gpus, sizeof(cfg->gpus), flag, v, err);
  } else if (strcmp(name, "state-dir") == 0)
    rc = set_str(cfg->state_dir, sizeof(cfg->state_dir), flag, v, err);
  else if (strcmp(name, "policy") == 0) {
    pol_kind_t k;
    if (strcmp(v, "none") != 0 && pol_kind_parse(v, &k) != 0)
      BAD("%s: '%s': expected none, tally, paper, timeslice, mps, mps-prio or tgs\n", flag, v);
    else
      rc = set_str(cfg->policy, sizeof(cfg->policy), flag, v, err);
  } else if (strcmp(name, "trace") == 0)
    rc = set_str(cfg->trace, sizeof(cfg->trace), flag, v, err);
  else if (strcmp(name, "token-file") == 0)
    rc = set_str(cfg->token_file, sizeof(cfg->token_file), flag, v, err);
  else if (strcmp(name, "log-level") == 0) {
    if (parse_level(v, &cfg->log_level) != 0)
      BAD("%s: expected error, warn, info or debug, got '%s'\n", flag, v);
  } else if ((io = int_option(name)) != NULL) {
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (!end || end == v || *end || n < 0 || n > io->max)
      BAD("%s: expected 0..%ld, got '%s'\n", flag, io->max, v);
    else
      *(int *)((char *)cfg + io->off) = (int)n;
  } else {
    if (strcmp(where, "--") == 0)
      BAD("unknown option %s (see tallyd --help)\n", flag);
    else
      BAD("%sunknown option %s (see tallyd --help)\n", where, name);
  }
#undef BAD
  return rc;
}

int hostd_config_load_file(hostd_config_t *cfg, const char *path, FILE *err) {
  char line[HOSTD_CONFIG_LINE_MAX + 2], where[4200];
  FILE *f = fopen(path, "r");
  int rc = 0;
  unsigned lineno = 0;
  if (!f) {
    rc = -errno;
    fprintf(err, "tallyd: --config %s: %s\n", path, strerror(-rc));
    return rc;
  }
  while (rc == 0 && fgets(line, sizeof(line), f)) {
    char *k, *v, *e;
    lineno++;
    snprintf(where, sizeof(where), "%s:%u: ", path, lineno);
    if (strlen(line) > HOSTD_CONFIG_LINE_MAX) {
      fprintf(err, "tallyd: %sline longer than %d bytes\n", where, HOSTD_CONFIG_LINE_MAX);
      rc = -EINVAL;
      break;
    }
    if ((e = strchr(line, '#')) != NULL)
      *e = '\0';
    for (k = line; isspace((unsigned char)*k); k++)
      ;
    for (e = k + strlen(k); e > k && isspace((unsigned char)e[-1]); e--)
      ;
    *e = '\0';
    if (*k == '\0')
      continue;
    for (v = k; *v && !isspace((unsigned char)*v) && *v != '='; v++)
      ;
    if (*v) {
      *v++ = '\0';
      while (isspace((unsigned char)*v) || *v == '=')
        v++;
    }
    if (*v == '\0') {
      fprintf(err, "tallyd: %s%s: missing value\n", where, k);
      rc = -EINVAL;
    } else if (strcmp(k, "config") == 0) {
      fprintf(err, "tallyd: %sconfig files do not include other files\n", where);
      rc = -EINVAL;
    } else {
      rc = set_option(cfg, k, v, where, err);
    }
  }
  if (rc == 0 && ferror(f)) {
    fprintf(err, "tallyd: --config %s: read error\n", path);
    rc = -EIO;
  }
  fclose(f);
  return rc;
}

int hostd_config_parse_args(hostd_config_t *cfg, int argc, char **argv, FILE *err) {
  /* --config first, wherever it stands: the command line overrides it. */
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--config") == 0) {
      int rc = hostd_config_load_file(cfg, argv[i + 1], err);
      if (rc)
        return rc;
      i++;
    }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int rc;

    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      cfg->show_help = 1;
      continue;
    }
    if (v == NULL || strncmp(a, "--", 2) != 0) {
      fprintf(err, "tallyd: %s: %s (see tallyd --help)\n", a,
              strncmp(a, "--", 2) == 0 ? "missing value" : "unexpected argument");
      return -EINVAL;
    }
    rc = strcmp(a, "--config") == 0 ? 0 : set_option(cfg, a + 2, v, "--", err);
    if (rc)
      return rc;
    i++;
  }
  return 0;
}
