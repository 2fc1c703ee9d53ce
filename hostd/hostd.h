/* hostd.h: the public API of hostd/, the host daemon tallyd.
 *
 * tallyd accepts tenants over wire/ and replays their CUDA calls on real
 * GPUs.  This header exposes what tests and the main program need: the
 * configuration and its parser.
 */
#ifndef TALLY_HOSTD_H
#define TALLY_HOSTD_H

#include <stdbool.h>
#include <stdio.h>

#define HOSTD_DEFAULT_SOCKET    "/run/tally/tallyd.sock"
#define HOSTD_DEFAULT_STATE_DIR "/var/lib/tally"
/* --restart-grace-ms default: long enough for a tenant that got the fault
 * to exit on its own, short enough that new tenants wait little. */
#define HOSTD_DEFAULT_RESTART_GRACE_MS 2000

typedef enum hostd_log_level {
  HOSTD_LOG_ERROR = 0,
  HOSTD_LOG_WARN,
  HOSTD_LOG_INFO,
  HOSTD_LOG_DEBUG,
} hostd_log_level_t;

typedef struct hostd_config {
  char unix_path[108];   /* UNIX socket to listen on ("" = none) */
  char tcp_addr[256];    /* host:port to listen on ("" = none) */
  char gpus[128];        /* the GPU ordinal to serve ("" = 0; one GPU per tallyd) */
  char state_dir[4096];  /* module and profile caches */
  char token_file[4096]; /* token required from TCP tenants ("" = none) */
  hostd_log_level_t log_level;
  int spin_us;          /* after shm traffic, poll the rings this long before sleeping
                           (0 = never, -1 = wire's auto default) */
  int worker_spin_us;   /* a tenant worker polls its queue this long before sleeping
                           on its condition variable; -1 = auto (server.c) */
  int restart_grace_ms; /* after a GPU fault, how long live tenants may stay before
                           they are closed and tallyd re-executes itself */
  int unix_listen_fd;   /* > 0: adopt this listening socket (inherited across a
                           restart, TALLY_LISTEN_FDS) instead of binding unix_path */
  int tcp_listen_fd;    /* > 0: likewise for tcp_addr */
  char policy[32];      /* --policy: none, tally, paper, timeslice, mps, mps-prio, tgs */
  char trace[4096];     /* --trace FILE: every kernel in tally-sim's format ("" = none) */
  int threshold_us;     /* --threshold-us: LC turnaround budget for BE work (-1 = policy's) */
  int resume_idle_us;   /* --resume-idle-us: LC idle this long before BE resumes (-1 = policy's) */
  int show_help;        /* --help was given */
} hostd_config_t;

/* Fills *cfg with defaults. */
void hostd_config_init(hostd_config_t *cfg);

/* Parses argv (argv[0] is skipped) into *cfg, on top of what is already
 * there; a `--config FILE` among them is read first (hostd_config_load_file),
 * so flags override it.  Returns 0, or -EINVAL with a one-line reason
 * written to err. */
int hostd_config_parse_args(hostd_config_t *cfg, int argc, char **argv, FILE *err);

/* Applies the options of a config file (config.c's top comment has the
 * syntax) on top of *cfg.  Returns 0, -errno when it cannot be read, or
 * -EINVAL with "FILE:LINE: reason" written to err. */
int hostd_config_load_file(hostd_config_t *cfg, const char *path, FILE *err);

/* Prints tallyd's --help text. */
void hostd_config_usage(FILE *f);

/* ---- the daemon (server.c) ---- */
typedef struct hostd_server hostd_server_t;

/* Initialises the GPU backend and the module cache, and starts listening on
 * the configured addresses.  With handle_signals, SIGTERM and SIGINT stop the
 * daemon.  Returns 0, -ENODEV (no usable GPU), -EADDRINUSE (a daemon already
 * answers on the UNIX path), or another negative errno/libuv code. */
int hostd_server_new(hostd_server_t **out, const hostd_config_t *cfg, bool handle_signals);
/* hostd_server_run's answer when a GPU fault poisoned this process: every
 * tenant is gone and the listening sockets are still open; the caller
 * re-executes the daemon (main.c, hostd/restart.c) or frees the server. */
#define HOSTD_SERVER_RESTART 1
/* Serves tenants until stopped; then closes every tenant (freeing all it
 * owned) and returns 0.  Returns HOSTD_SERVER_RESTART after a GPU fault,
 * once the last tenant has left or the grace period closed the rest
 * (new tenants are refused with -EAGAIN meanwhile). */
int hostd_server_run(hostd_server_t *s);
/* The listening descriptors (-1 when none), for a restart.  0 or -EINVAL. */
int hostd_server_listen_fds(const hostd_server_t *s, int *unix_fd, int *tcp_fd);
/* Asks a running server to stop; any thread. */
void hostd_server_stop(hostd_server_t *s);
/* Waits until exactly n tenants are connected; 0 or -ETIMEDOUT.  Any thread. */
int hostd_server_wait_tenants(hostd_server_t *s, int n, int timeout_ms);
/* The TCP port bound (useful with port 0), or 0. */
int hostd_server_tcp_port(const hostd_server_t *s);
/* Counters for tests: module images received, synchronous requests answered. */
unsigned long hostd_server_blob_puts(const hostd_server_t *s);
unsigned long hostd_server_calls(const hostd_server_t *s);
/* Payload bytes of every request received (copies through shared pinned
 * memory add none of their data). */
unsigned long hostd_server_rx_bytes(const hostd_server_t *s);
/* Releases the server after hostd_server_run returned.  NULL ok. */
void hostd_server_free(hostd_server_t *s);

#endif /* TALLY_HOSTD_H */
