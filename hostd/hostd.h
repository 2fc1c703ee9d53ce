/* hostd.h: the public API of hostd/, the host daemon tallyd.
 *
 * tallyd accepts tenants over wire/ and replays their CUDA calls on real
 * GPUs.  This header exposes what tests and the main program need: the
 * configuration and its parser.
 */
#ifndef TALLY_HOSTD_H
#define TALLY_HOSTD_H

#include <stdio.h>

#define HOSTD_DEFAULT_SOCKET "/run/tally/tallyd.sock"
#define HOSTD_DEFAULT_STATE_DIR "/var/lib/tally"

typedef enum hostd_log_level {
  HOSTD_LOG_ERROR = 0,
  HOSTD_LOG_WARN,
  HOSTD_LOG_INFO,
  HOSTD_LOG_DEBUG,
} hostd_log_level_t;

typedef struct hostd_config {
  char unix_path[108];  /* UNIX socket to listen on ("" = none) */
  char tcp_addr[256];   /* host:port to listen on ("" = none) */
  char gpus[128];       /* comma-separated GPU ordinals ("" = all) */
  char state_dir[4096]; /* module and profile caches */
  char token_file[4096];/* token required from TCP tenants ("" = none) */
  hostd_log_level_t log_level;
  int show_help;        /* --help was given */
} hostd_config_t;

/* Fills *cfg with defaults. */
void hostd_config_init(hostd_config_t *cfg);

/* Parses argv (argv[0] is skipped) into *cfg, on top of what is already
 * there.  Returns 0, or -EINVAL with a one-line reason written to err. */
int hostd_config_parse_args(hostd_config_t *cfg, int argc, char **argv, FILE *err);

/* Prints tallyd's --help text. */
void hostd_config_usage(FILE *f);

#endif /* TALLY_HOSTD_H */
