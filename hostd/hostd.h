/* hostd.h: the public API of hostd/, the host daemon tallyd.
 *
 * tallyd accepts tenants over wire/ and replays their CUDA calls on real
 * GPUs.  This header exposes what tests and the main program need: the
 * configuration and its parser.
 */
#ifndef TALLY_HOSTD_H
#define TALLY_HOSTD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define HOSTD_DEFAULT_SOCKET    "/run/tally/tallyd.sock"
#define HOSTD_DEFAULT_STATE_DIR "/var/lib/tally"
/* --restart-grace-ms default: long enough for a tenant that got the fault
 * to exit on its own, short enough that new tenants wait little. */
#define HOSTD_DEFAULT_RESTART_GRACE_MS 2000
/* --be-depth's default: the H200 pair runs measured 8 against 1 (tests/bench/RESULTS.md). */
#define HOSTD_DEFAULT_BE_DEPTH 8
/* --lc-poll-cpu auto: each polling latency-critical worker on a CPU of its own (pin.c). */
#define HOSTD_CPU_AUTO (-2)
/* Production guards' defaults (docs in hostd/README.md): enough tenants
 * for any one GPU, caches small next to a GPU's host, streams and events
 * far past what a framework makes. */
#define HOSTD_DEFAULT_MAX_TENANTS    128
#define HOSTD_DEFAULT_UNIX_MODE      0660
#define HOSTD_DEFAULT_MODCACHE_MEM   ((uint64_t)256 << 20)
#define HOSTD_DEFAULT_MODCACHE_DISK  ((uint64_t)4 << 30)
#define HOSTD_DEFAULT_TENANT_UPLOAD  ((uint64_t)1 << 30)
#define HOSTD_DEFAULT_TENANT_STREAMS 4096
#define HOSTD_DEFAULT_TENANT_EVENTS  65536
#define HOSTD_DEFAULT_TENANT_HOSTFNS 256
#define HOSTD_MEM_RULES_MAX          32
/* The most a tenant may grow the shared context's per-thread stack and
 * device malloc heap to (cuCtxSetLimit; hostd/exec.c, "the context's
 * limits").  The driver backs the stack for every thread the GPU can hold
 * at once (132 SMs x 2048 threads on an H200): 64 KiB a thread comes to
 * 16.5 GiB of device memory (arithmetic, not measured), taken from every
 * tenant. */
#define HOSTD_DEFAULT_MAX_STACK_BYTES ((uint64_t)64 << 10)
#define HOSTD_DEFAULT_MAX_HEAP_BYTES  ((uint64_t)1 << 30)
/* The control socket is the tenants' socket path with this suffix. */
#define HOSTD_CONTROL_SUFFIX ".ctl"

typedef enum hostd_log_level {
  HOSTD_LOG_ERROR = 0,
  HOSTD_LOG_WARN,
  HOSTD_LOG_INFO,
  HOSTD_LOG_DEBUG,
} hostd_log_level_t;

/* hostd_config_t.lc_direct: the shared-memory ring only, not a TCP socket. */
#define HOSTD_LC_DIRECT_SHM 2

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
  int lc_poll;          /* the latency-critical tenant's path polls without sleeping
                           (wire's loop and its worker, docs/lc-path.md): 1 yes,
                           0 no, -1 auto (yes with 4 or more CPUs online) */
  int lc_poll_cpu;      /* pin the latency-critical worker to this CPU (-1 = no pin,
                           HOSTD_CPU_AUTO (default) = one of its own, pin.c) */
  int lc_direct;        /* under lc_poll, the latency-critical worker reads its shared-
                           memory ring or TCP socket itself (wire_tenant_direct): 1 yes
                           (default), HOSTD_LC_DIRECT_SHM the ring only, 0 no */
  int hostfn_wake_us;   /* after a tenant's host function is reached, its (sleeping)
                           worker polls this long for the requests that follow;
                           0 = never (the default) */
  int hostfn_word;      /* 1 (default): the GPU writes a reach word per host function,
                           polled by the tenant's worker (hostfn.c); 0: the callback */
  char hops[4096];      /* --hops FILE: hand-off times of every request ("" = off) */
  int restart_grace_ms; /* after a GPU fault, how long live tenants may stay before
                           they are closed and tallyd re-executes itself */
  int unix_listen_fd;   /* > 0: adopt this listening socket (inherited across a
                           restart, TALLY_LISTEN_FDS) instead of binding unix_path */
  int tcp_listen_fd;    /* > 0: likewise for tcp_addr */
  char policy[32];      /* --policy: none, tally, paper, timeslice, mps, mps-prio, tgs */
  char trace[4096];     /* --trace FILE: every kernel in tally-sim's format ("" = none) */
  int threshold_us;     /* --threshold-us: LC turnaround budget for BE work (-1 = policy's) */
  int resume_idle_us;   /* --resume-idle-us: LC idle this long before BE resumes (-1 = policy's) */
  int be_depth;         /* --be-depth: BE launches queued while the LC is idle (0 = policy's) */
  int share_block_us;   /* --share-block-us: BE kernels whose measured blocks take at most this
                           keep running while the LC is active (0 = off, the policy's) */
  int be_alone;         /* --be-alone: 1 (default), a BE tenant alone launches straight to the
                           GPU; 0, through the policy even then */
  int flag_memset;      /* --flag-memset: 1, preemption flags written with cuMemsetD32Async;
                           0 (default), by the GPU's front end (cuStreamWriteValue32) */
  int time_every;       /* --time-every: 1 in N profiled BE launches timed (0 = policy's) */
  int be_sms;           /* --be-sms: BE kernels run on a partition of this many SMs (0 = all) */
  int be_sms_pct;       /* --be-sms P%: ... of P percent of the device's SMs (0 = be_sms says) */
  int be_sms_hold;      /* --be-sms-hold: 1 (default), BE launches in the partition are still
                           held while the LC is active; 0, the partition alone protects the LC */
  int be_sms_block_us;  /* --be-sms-block-us: with --be-sms-hold 0, BE kernels whose measured
                           blocks take longer are still held while the LC is active (0 = none) */
  int be_sms_inflight_us; /* --be-sms-inflight-us: with --be-sms-hold 0, BE launches in flight
                             at most this much estimated device time (0 = by count only,
                             -1 = the policy's) */
  char variants[16];    /* --variants: all, slice, ptb, off (forms of PTX kernels offered) */
  int show_help;        /* --help was given */
  int show_version;     /* --version was given */
  /* Admission and safe defaults. */
  int insecure_no_token;  /* allow a non-loopback --listen-tcp without a token */
  unsigned unix_mode;     /* permission bits of the UNIX sockets (default 0660) */
  char unix_group[64];    /* their group ("" = the daemon's) */
  int handshake_ms;       /* 0 = wire's default */
  int halfopen_max;       /* 0 = wire's default */
  int halfopen_per_peer;  /* 0 = wire's default */
  int max_tenants;        /* tenants connected at once */
  /* Quotas: 0 = unlimited. */
  uint64_t modcache_mem, modcache_disk; /* module cache, all tenants */
  uint64_t tenant_upload;               /* module bytes one tenant may send */
  uint64_t tenant_streams, tenant_events, tenant_hostfns;
  /* Bounds of what a tenant may grow the shared context's limits to:
   * the per-thread stack and the device malloc heap, in bytes. */
  uint64_t max_stack_bytes, max_heap_bytes;
  struct hostd_mem_rule {
    char who[80]; /* "" every tenant, "latency-critical", "best-effort", "name:NAME" */
    uint64_t bytes;
  } mem_rules[HOSTD_MEM_RULES_MAX]; /* --tenant-mem-limit, later rules win */
  int n_mem_rules;
  /* --tenant-weight: the same rules, bytes being the scheduler weight (1..1000). */
  struct hostd_mem_rule weight_rules[HOSTD_MEM_RULES_MAX];
  int n_weight_rules;
  /* The operator's view. */
  char control_path[108]; /* "" = unix_path + HOSTD_CONTROL_SUFFIX; "none" = off */
  char metrics_addr[256]; /* host:port for GET /metrics ("" = none) */
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
/* Checks what cannot be judged flag by flag (a token is needed for a
 * non-loopback --listen-tcp unless --insecure-no-token): 0, or -EINVAL with
 * the reason written to err. */
int hostd_config_check(const hostd_config_t *cfg, FILE *err);
/* Reads a token file: *out (cap >= WIRE_TOKEN_MAX + 1) gets the token
 * without its trailing newline.  Refuses a missing file, an empty or
 * blank token, one longer than the protocol allows (-EINVAL, reason in
 * err); warns (into warn, "" otherwise) when group or others may read it. */
int hostd_config_read_token(const char *file, char *out, size_t cap, char *warn, size_t warn_len,
                            FILE *err);
/* The state folder: created 0700, or an existing one tightened to 0700 when
 * it is ours; refused (-EPERM, reason in err) when group or others may
 * write it and it cannot be tightened. */
int hostd_config_state_dir(const char *dir, FILE *err);
/* "--listen-unix PATH": -ENOENT with a clear reason when PATH's folder does
 * not exist, -ENOTDIR when it is not a folder. */
int hostd_config_check_unix_dir(const char *path, const char *flag, FILE *err);

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
/* Counters for tests: module images received, synchronous requests answered
 * (each counted before its reply went). */
unsigned long hostd_server_blob_puts(const hostd_server_t *s);
unsigned long hostd_server_calls(hostd_server_t *s);
/* Workers woken ahead because a host function of their tenant was reached
 * (--hostfn-wake-us), for tests. */
unsigned long hostd_server_hostfn_wakes(const hostd_server_t *s);
/* Payload bytes of every request received (copies through shared pinned
 * memory add none of their data). */
unsigned long hostd_server_rx_bytes(hostd_server_t *s);
/* tallyctl's texts (status table, Prometheus exposition), malloc'd; either
 * pointer may be NULL.  0 or -ENOMEM.  Any thread. */
int hostd_server_view(hostd_server_t *s, char **status, char **metrics);
/* The port --metrics-listen bound (useful with port 0), or 0. */
int hostd_server_metrics_port(const hostd_server_t *s);
/* Releases the server after hostd_server_run returned.  NULL ok. */
void hostd_server_free(hostd_server_t *s);

#endif /* TALLY_HOSTD_H */
