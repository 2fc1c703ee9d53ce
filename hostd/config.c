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
#include "hostd/guard.h"
#include "hostd/hostd.h"
#include "hostd/variants.h"
#include "policy/pol.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wire/wire.h"

/* Longest config-file line: a path (4096) plus its key and blanks. */
#define HOSTD_CONFIG_LINE_MAX 4352

void hostd_config_init(hostd_config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  strcpy(cfg->unix_path, HOSTD_DEFAULT_SOCKET);
  strcpy(cfg->state_dir, HOSTD_DEFAULT_STATE_DIR);
  cfg->log_level = HOSTD_LOG_INFO;
  cfg->spin_us = -1;
  cfg->worker_spin_us = -1;
  cfg->lc_poll = -1;
  cfg->hostfn_wake_us = 0;
  cfg->hostfn_word = 1;
  cfg->lc_poll_cpu = HOSTD_CPU_AUTO;
  cfg->lc_direct = 1;
  cfg->restart_grace_ms = HOSTD_DEFAULT_RESTART_GRACE_MS;
  strcpy(cfg->policy, "tally");
  strcpy(cfg->variants, "all");
  cfg->threshold_us = -1;
  cfg->resume_idle_us = -1;
  cfg->be_depth = HOSTD_DEFAULT_BE_DEPTH;
  cfg->be_alone = 1;
  cfg->flag_memset = 0;
  cfg->be_sms_hold = 1;
  cfg->be_sms_inflight_us = -1;
  cfg->unix_mode = HOSTD_DEFAULT_UNIX_MODE;
  cfg->max_tenants = HOSTD_DEFAULT_MAX_TENANTS;
  cfg->modcache_mem = HOSTD_DEFAULT_MODCACHE_MEM;
  cfg->modcache_disk = HOSTD_DEFAULT_MODCACHE_DISK;
  cfg->tenant_upload = HOSTD_DEFAULT_TENANT_UPLOAD;
  cfg->tenant_streams = HOSTD_DEFAULT_TENANT_STREAMS;
  cfg->tenant_events = HOSTD_DEFAULT_TENANT_EVENTS;
  cfg->tenant_hostfns = HOSTD_DEFAULT_TENANT_HOSTFNS;
  cfg->max_stack_bytes = HOSTD_DEFAULT_MAX_STACK_BYTES;
  cfg->max_heap_bytes = HOSTD_DEFAULT_MAX_HEAP_BYTES;
}

/* tallyd --help, in three parts (serving, scheduling, admission and quotas). */
static void usage_serving(FILE *f) {
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
          "                       sockets N us before sleeping (0 = never; default 1000\n"
          "                       with 4 or more CPUs online, else never)\n"
          "  --worker-spin-us N   a tenant's worker polls its queue N us before sleeping\n"
          "                       (default: 1000 with 4 or more CPUs online, else 0)\n"
          "  --hostfn-wake-us N   when one of a tenant's host functions is reached (how\n"
          "                       frameworks learn a step ended), its worker is woken\n"
          "                       and polls N us for the requests that follow (default\n"
          "                       0 = never: on the H200 a JAX step did not get faster)\n"
          "  --hostfn-word yes|no yes (default): the GPU also writes a word when a stream\n"
          "                       reaches a host function, which the tenant's worker\n"
          "                       polls between requests, so the guest hears of it before\n"
          "                       the driver's callback thread runs; no: the callback tells\n"
          "  --lc-poll MODE       yes: while the latency-critical tenant is connected, the\n"
          "                       loop polls its ring or socket and its worker its queue\n"
          "                       without ever sleeping (two cores busy); no: they spin\n"
          "                       as above, then sleep; auto (default): yes with 4 or more\n"
          "                       CPUs online\n"
          "  --lc-poll-cpu C      where a polling latency-critical worker runs: auto\n"
          "                       (default): a CPU of its own, counting down from the\n"
          "                       highest allowed (tallyd of GPU k starts k lower; none\n"
          "                       with fewer than 4 CPUs); N: CPU N (a second such\n"
          "                       worker goes where auto puts it); none: where the\n"
          "                       kernel puts it\n"
          "  --lc-direct yes|no|shm  with --lc-poll, the latency-critical tenant's worker\n"
          "                       reads its shared-memory ring or TCP socket itself instead\n"
          "                       of the loop handing it each request (default yes; shm:\n"
          "                       the ring only; docs/lc-path.md)\n"
          "  --hops FILE          append the hand-off times of every request to FILE\n"
          "                       (tests/bench/hops-report reads it; docs/lc-path.md)\n"
          "  --restart-grace-ms N after a tenant's GPU fault, tallyd re-executes itself once\n"
          "                       every tenant has left, or after N ms (default %d), closing\n"
          "                       the rest; new tenants are told to retry meanwhile\n",
          HOSTD_DEFAULT_SOCKET, HOSTD_DEFAULT_STATE_DIR, HOSTD_DEFAULT_RESTART_GRACE_MS);
}

static void usage_scheduling(FILE *f) {
  fprintf(f, "\nScheduling:\n"
        "  --policy P           how best-effort kernels are scheduled around the\n"
        "                       latency-critical tenant: tally (default), paper,\n"
        "                       timeslice, mps, mps-prio, tgs, or none (launch every\n"
        "                       kernel as it arrives, on priority streams only)\n"
        "  --threshold-us N     best-effort work in flight may delay the latency-\n"
        "                       critical tenant at most N us (default: the policy's, 31.6)\n"
        "  --resume-idle-us N   best-effort kernels resume N us after the latency-\n"
        "                       critical tenant went idle (default: the policy's, 50)\n"
        "  --be-depth N         tally: while the latency-critical tenant is idle, up to N\n"
        "                       best-effort launches whose measured blocks take at most\n"
        "                       the threshold may be queued on the GPU (1..32; default\n"
        "                       %d; 0 = the policy library's, 1): an arriving latency-\n"
        "                       critical kernel still waits for at most one such block\n"
        "  --share-block-us N   tally: best-effort kernels whose measured blocks take at\n"
        "                       most N us keep running while the latency-critical tenant\n"
        "                       is active, each of its kernels then waiting for at most\n"
        "                       one such block (at most the threshold; default 0: off,\n"
        "                       all best-effort work is held while it is active)\n"
        "  --be-alone 0|1       1 (default): a best-effort tenant that is the daemon's\n"
        "                       only tenant launches straight to the GPU, as with\n"
        "                       --policy none (nobody to protect; no profiles, no GPU\n"
        "                       time counted meanwhile); 0: through the policy even then\n"
        "  --flag-memset 0|1    how a PTB or FLUSH launch's preemption flag is written:\n"
        "                       0 (default), by the GPU's front end in stream order\n"
        "                       (cuStreamWriteValue32: no SM needed while the best-effort\n"
        "                       blocks fill them); 1, as a one-word cuMemsetD32Async\n"
        "  --time-every N       a best-effort launch of a kernel whose profile has its\n"
        "                       samples is timed (two GPU events) 1 in N, at random\n"
        "                       (1..65536; 1 = every launch; default 0 = the policy's, 16)\n"
        "  --variants V         forms of best-effort PTX kernels the policy may use:\n"
        "                       all (default: sliced, PTB and FLUSH, whose running\n"
        "                       blocks give up at the flag and run again), slice+ptb\n"
        "                       (no block gives up), slice, ptb, flush, or off\n"
        "  --be-sms N|P%%       best-effort kernels run in a partition (green context)\n"
        "                       of at least N SMs (or P percent of the device's, e.g.\n"
        "                       73%%), the rest stays free for the latency-critical\n"
        "                       tenant (default 0: the whole GPU; Hopper splits in\n"
        "                       multiples of 8); a launch the\n"
        "                       partition cannot host (a cluster it cannot\n"
        "                       co-schedule) runs on the whole GPU (docs/scheduler.md)\n"
        "  --be-sms-hold 0|1    with --be-sms, policy tally: 1 (default), best-effort\n"
        "                       launches are still held while the latency-critical\n"
        "                       tenant is active; 0, they are not: the SMs left out of\n"
        "                       the partition are what protects it (tallyd stops at\n"
        "                       start if the partition cannot be made)\n"
        "  --be-sms-block-us N  with --be-sms-hold 0: best-effort kernels whose measured\n"
        "                       blocks take longer than N us are still held while the\n"
        "                       latency-critical tenant is active (a kernel of it that\n"
        "                       needs the partition's SMs waits for such blocks; default\n"
        "                       0: none is held)\n"
        "  --be-sms-inflight-us N\n"
        "                       with --be-sms-hold 0: best-effort launches in flight\n"
        "                       at most N us of measured device time (a kernel with\n"
        "                       no measured shape counts as N; one launch always may\n"
        "                       go), so a driver call of the latency-critical tenant\n"
        "                       that waits for all work waits for about that much\n"
        "                       (default 2000; 0: up to 32 launches)\n"
        "  --trace FILE         write every kernel (tenant, kernel, grid, block, shared\n"
        "                       memory, submit/issue/start/end times) to FILE in\n"
        "                       tally-sim's trace format\n",
        HOSTD_DEFAULT_BE_DEPTH);
}

static void usage_guard(FILE *f) {
  fprintf(f,
          "\nAdmission and access:\n"
          "  --token-file FILE    (above) one line, 1..256 bytes, not blank; a file that\n"
          "                       group or others may read is accepted with a warning\n"
          "  --insecure-no-token  allow --listen-tcp on a non-loopback address without a\n"
          "                       token (refused otherwise; loopback without one: warning)\n"
          "  --unix-mode MODE     permission bits of the UNIX sockets, octal (default 0660)\n"
          "  --unix-group GROUP   their group (name or number; default: tallyd's)\n"
          "  --handshake-ms N     a connection must complete its handshake within N ms\n"
          "                       of connecting (default %d)\n"
          "  --max-halfopen N     connections not past the handshake, all peers (default\n"
          "                       %d, at most a quarter of the descriptor limit); over it\n"
          "                       the oldest such connection is closed\n"
          "  --max-halfopen-per-peer N   the same per TCP address or UNIX uid (default %d)\n"
          "  --max-tenants N      tenants connected at once (default %d); more are told\n"
          "                       to retry\n"
          "\nQuotas (SIZE: bytes, or with K, M, G, T; 0 = no limit):\n"
          "  --tenant-mem-limit [WHO=]SIZE  device memory per tenant; WHO is\n"
          "                       latency-critical, best-effort or name:NAME (repeatable;\n"
          "                       a name's rule beats its class's, which beats the plain one)\n"
          "  --tenant-weight [WHO=]N  a best-effort tenant's share of the GPU time the\n"
          "                       latency-critical one leaves, 1..1000 (default 1; WHO and\n"
          "                       precedence as for --tenant-mem-limit)\n"
          "  --tenant-streams N   streams per tenant (default %d)\n"
          "  --tenant-events N    events per tenant (default %d)\n"
          "  --tenant-hostfns N   pending host functions per tenant (default %d)\n"
          "  --tenant-upload SIZE module bytes one tenant may send (default 1G)\n"
          "  --modcache-mem SIZE  module images kept in memory, least recently used go\n"
          "                       first (default 256M)\n"
          "  --modcache-disk SIZE the same in STATE_DIR/modules (default 4G)\n"
          "  --max-stack-bytes SIZE  the most a tenant may grow the shared context's\n"
          "                       per-thread stack to (cuCtxSetLimit; default 64K: the\n"
          "                       driver backs it for every thread the GPU can hold)\n"
          "  --max-heap-bytes SIZE   the same for the device malloc heap (default 1G)\n"
          "\nOperator's view:\n"
          "  --control-socket PATH  for tallyctl (default: the --listen-unix path + %s;\n"
          "                       none = off); mode and group as --unix-mode/--unix-group\n"
          "  --metrics-listen H:P serve Prometheus text at http://H:P/metrics\n"
          "  -h, --help           this text\n"
          "  --version            tallyd's version\n"
          "\nEnvironment (the CUDA backend; hostd/README.md):\n"
          "  TALLYD_BLASLT_LAYOUT=0  never ask the driver for cuBLASLt's layout objects\n"
          "                       (its GEMMs then keep launch order: docs/decisions.md, D22)\n"
          "  TALLYD_HOSTFN_GATE=block  host functions block in the driver's callback\n"
          "                       instead of gating their stream on a word\n"
          "  TALLYD_LAUNCH_PARAMS=array  launch arguments as an array of pointers (a\n"
          "                       diagnostic)\n",
          WIRE_HANDSHAKE_MS_DEFAULT, WIRE_HALFOPEN_MAX_DEFAULT, WIRE_HALFOPEN_PEER_DEFAULT,
          HOSTD_DEFAULT_MAX_TENANTS, HOSTD_DEFAULT_TENANT_STREAMS, HOSTD_DEFAULT_TENANT_EVENTS,
          HOSTD_DEFAULT_TENANT_HOSTFNS, HOSTD_CONTROL_SUFFIX);
}

void hostd_config_usage(FILE *f) {
  usage_serving(f);
  usage_scheduling(f);
  usage_guard(f);
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
      {"hostfn-wake-us", offsetof(hostd_config_t, hostfn_wake_us), 10000},
      {"restart-grace-ms", offsetof(hostd_config_t, restart_grace_ms), 60000},
      {"threshold-us", offsetof(hostd_config_t, threshold_us), 1000000},
      {"resume-idle-us", offsetof(hostd_config_t, resume_idle_us), 1000000},
      {"be-sms-hold", offsetof(hostd_config_t, be_sms_hold), 1},
      {"be-sms-block-us", offsetof(hostd_config_t, be_sms_block_us), 1000000},
      {"be-sms-inflight-us", offsetof(hostd_config_t, be_sms_inflight_us), 1000000},
      {"be-depth", offsetof(hostd_config_t, be_depth), POL_MAX_BE_DEPTH},
      {"share-block-us", offsetof(hostd_config_t, share_block_us), 1000000},
      {"be-alone", offsetof(hostd_config_t, be_alone), 1},
      {"flag-memset", offsetof(hostd_config_t, flag_memset), 1},
      {"time-every", offsetof(hostd_config_t, time_every), 65536},
      {"handshake-ms", offsetof(hostd_config_t, handshake_ms), 600000},
      {"max-halfopen", offsetof(hostd_config_t, halfopen_max), 1000000},
      {"max-halfopen-per-peer", offsetof(hostd_config_t, halfopen_per_peer), 1000000},
      {"max-tenants", offsetof(hostd_config_t, max_tenants), 100000},
  };
  for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
    if (strcmp(name, opts[i].name) == 0)
      return &opts[i];
  return NULL;
}

/* Size options: name, field. */
typedef struct size_option {
  const char *name;
  size_t off;
} size_option_t;

static const size_option_t *size_option(const char *name) {
  static const size_option_t opts[] = {
      {"modcache-mem", offsetof(hostd_config_t, modcache_mem)},
      {"modcache-disk", offsetof(hostd_config_t, modcache_disk)},
      {"tenant-upload", offsetof(hostd_config_t, tenant_upload)},
      {"tenant-streams", offsetof(hostd_config_t, tenant_streams)},
      {"tenant-events", offsetof(hostd_config_t, tenant_events)},
      {"tenant-hostfns", offsetof(hostd_config_t, tenant_hostfns)},
      {"max-stack-bytes", offsetof(hostd_config_t, max_stack_bytes)},
      {"max-heap-bytes", offsetof(hostd_config_t, max_heap_bytes)},
  };
  for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
    if (strcmp(name, opts[i].name) == 0)
      return &opts[i];
  return NULL;
}

/* "[WHO=]VALUE" for --tenant-mem-limit (VALUE a size) and --tenant-weight
 * (VALUE 1..1000); a rule for the same WHO replaces the earlier one. */
static int set_rule(struct hostd_mem_rule *rules, int *nrules, bool weight, const char *v,
                    const char *flag, FILE *err) {
  const char *eq = strrchr(v, '=');
  char who[80] = "";
  uint64_t bytes;
  int i;
  if (eq) {
    size_t n = (size_t)(eq - v);
    if (n >= sizeof(who) || n == 0) {
      fprintf(err, "tallyd: %s: '%s': WHO is empty or too long\n", flag, v);
      return -EINVAL;
    }
    memcpy(who, v, n);
    who[n] = 0;
    if (strcmp(who, "latency-critical") && strcmp(who, "best-effort") &&
        (strncmp(who, "name:", 5) || !who[5] || strlen(who + 5) > WIRE_TENANT_MAX)) {
      fprintf(err, "tallyd: %s: '%s': expected latency-critical, best-effort or name:NAME\n", flag,
              who);
      return -EINVAL;
    }
  }
  if (weight ? hostd__parse_size(eq ? eq + 1 : v, &bytes) != 0 || bytes < 1 || bytes > 1000
             : hostd__parse_size(eq ? eq + 1 : v, &bytes) != 0) {
    fprintf(err, "tallyd: %s: expected %s, got '%s'\n", flag,
            weight ? "[WHO=]N, N from 1 to 1000 (e.g. 4, best-effort=2)"
                   : "[WHO=]SIZE (e.g. 8G, best-effort=2G)",
            v);
    return -EINVAL;
  }
  for (i = 0; i < *nrules && strcmp(rules[i].who, who) != 0; i++)
    ;
  if (i == HOSTD_MEM_RULES_MAX) {
    fprintf(err, "tallyd: %s: more than %d rules\n", flag, HOSTD_MEM_RULES_MAX);
    return -EINVAL;
  }
  snprintf(rules[i].who, sizeof(rules[i].who), "%s", who);
  rules[i].bytes = bytes;
  if (i == *nrules)
    (*nrules)++;
  return 0;
}

/* yes/no values of boolean options in a config file. */
static int parse_bool(const char *v, int *out) {
  if (!strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "1"))
    *out = 1;
  else if (!strcmp(v, "no") || !strcmp(v, "false") || !strcmp(v, "0"))
    *out = 0;
  else
    return -EINVAL;
  return 0;
}

/* The options of the production guards that are more than a string (those
 * are in str_option's table): 0 or -EINVAL when name is one of them, 1 when
 * it is not. */
static int set_guard_option(hostd_config_t *cfg, const char *name, const char *v, const char *flag,
                            FILE *err) {
  const size_option_t *so;
  if (strcmp(name, "tenant-mem-limit") == 0)
    return set_rule(cfg->mem_rules, &cfg->n_mem_rules, false, v, flag, err);
  if (strcmp(name, "tenant-weight") == 0)
    return set_rule(cfg->weight_rules, &cfg->n_weight_rules, true, v, flag, err);
  if ((so = size_option(name)) != NULL) {
    if (hostd__parse_size(v, (uint64_t *)((char *)cfg + so->off)) == 0)
      return 0;
    fprintf(err, "tallyd: %s: expected a size (e.g. 1000, 64K, 256M, 1G), got '%s'\n", flag, v);
    return -EINVAL;
  }
  if (strcmp(name, "unix-mode") == 0) {
    char *end = NULL;
    long m = strtol(v, &end, 8);
    if (!end || end == v || *end || m <= 0 || m > 0777) {
      fprintf(err, "tallyd: %s: expected octal permission bits (e.g. 0660), got '%s'\n", flag, v);
      return -EINVAL;
    }
    cfg->unix_mode = (unsigned)m;
    return 0;
  }
  if (strcmp(name, "insecure-no-token") == 0) {
    if (parse_bool(v, &cfg->insecure_no_token) == 0)
      return 0;
    fprintf(err, "tallyd: %s: expected yes or no, got '%s'\n", flag, v);
    return -EINVAL;
  }
  return 1;
}

/* Writes "tallyd: " and the message to err; returns -EINVAL. */
static int bad(FILE *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(FILE *err, const char *fmt, ...) {
  va_list ap;
  fputs("tallyd: ", err);
  va_start(ap, fmt);
  vfprintf(err, fmt, ap);
  va_end(ap);
  return -EINVAL;
}

/* The parsers of options that take a word or a number of their own: each
 * checks v and, for a value kept as a number, sets its field; 0, or
 * -EINVAL after saying on err what flag expected. */
typedef int option_parse_fn(hostd_config_t *cfg, const char *v, const char *flag, FILE *err);

static int parse_gpus(hostd_config_t *cfg, const char *v, const char *flag, FILE *err) {
  char *end = NULL;
  long n = strtol(v, &end, 10);
  (void)cfg;
  if (end && end != v && *end == ',')
    return bad(err,
               "%s: '%s': tallyd serves one GPU per process in this version; start one tallyd "
               "per GPU, each with its own --gpus N and --listen-unix PATH\n",
               flag, v);
  if (!end || end == v || *end || n < 0 || n > 1023)
    return bad(err, "%s: expected a GPU ordinal (0, 1, ...), got '%s'\n", flag, v);
  return 0;
}

static int parse_policy(hostd_config_t *cfg, const char *v, const char *flag, FILE *err) {
  pol_kind_t k;
  (void)cfg;
  if (strcmp(v, "none") != 0 && pol_kind_parse(v, &k) != 0)
    return bad(err, "%s: '%s': expected none, tally, paper, timeslice, mps, mps-prio or tgs\n",
               flag, v);
  return 0;
}

static int parse_variants(hostd_config_t *cfg, const char *v, const char *flag, FILE *err) {
  unsigned forms;
  (void)cfg;
  if (hostd__var_parse(v, &forms) != 0)
    return bad(err, "%s: '%s': expected all, slice, ptb, flush, slice+ptb or off\n", flag, v);
  return 0;
}

static int parse_lc_poll(hostd_config_t *cfg, const char *v, const char *flag, FILE *err) {
  int b;
  if (strcmp(v, "auto") == 0)
    cfg->lc_poll = -1;
  else if (parse_bool(v, &b) == 0)
    cfg->lc_poll = b;
  else
    return bad(err, "%s: expected yes, no or auto, got '%s'\n", flag, v);
  return 0;
}

static int parse_lc_direct(hostd_config_t *cfg, const char *v, const char *flag, FILE *err) {
  if (strcmp(v, "shm") == 0)
    cfg->lc_direct = HOSTD_LC_DIRECT_SHM;
  else if (parse_bool(v, &cfg->lc_direct) != 0)
    return bad(err, "%s: expected yes, no or shm, got '%s'\n", flag, v);
  return 0;
}

static int parse_hostfn_word(hostd_config_t *cfg, const char *v, const char *flag, FILE *err) {
  if (parse_bool(v, &cfg->hostfn_word) != 0)
    return bad(err, "%s: expected yes or no, got '%s'\n", flag, v);
  return 0;
}

static int parse_lc_poll_cpu(hostd_config_t *cfg, const char *v, const char *flag, FILE *err) {
  char *end = NULL;
  long n = strtol(v, &end, 10);
  if (strcmp(v, "none") == 0)
    cfg->lc_poll_cpu = -1;
  else if (strcmp(v, "auto") == 0)
    cfg->lc_poll_cpu = HOSTD_CPU_AUTO;
  else if (!end || end == v || *end || n < 0 || n >= CPU_SETSIZE)
    return bad(err, "%s: expected a CPU number 0..%d, auto or none, got '%s'\n", flag,
               CPU_SETSIZE - 1, v);
  else
    cfg->lc_poll_cpu = (int)n;
  return 0;
}

/* --be-sms N (SMs, 0..4096) or P% (of the device's, 1..99). */
static int parse_be_sms(hostd_config_t *cfg, const char *v, const char *flag, FILE *err) {
  char *end = NULL;
  long n = strtol(v, &end, 10);
  bool pct = end && end != v && end[0] == '%' && end[1] == '\0';
  if (!end || end == v || (*end && !pct) || n < 0 || n > (pct ? 99 : 4096) || (pct && n == 0))
    return bad(err, "%s: expected a count of SMs 0..4096 or a share 1%%..99%%, got '%s'\n", flag,
               v);
  cfg->be_sms = pct ? 0 : (int)n;
  cfg->be_sms_pct = pct ? (int)n : 0;
  return 0;
}

static int parse_log_level(hostd_config_t *cfg, const char *v, const char *flag, FILE *err) {
  if (parse_level(v, &cfg->log_level) != 0)
    return bad(err, "%s: expected error, warn, info or debug, got '%s'\n", flag, v);
  return 0;
}

/* The options kept as strings or parsed by a function of their own: name,
 * parser (NULL: any string that fits), the string field that keeps the
 * value as given (size 0: none, the parser sets a number). */
typedef struct str_option {
  const char *name;
  option_parse_fn *parse;
  size_t off, size;
} str_option_t;

#define STR_FIELD(f) offsetof(hostd_config_t, f), sizeof(((hostd_config_t *)0)->f)

static const str_option_t *str_option(const char *name) {
  static const str_option_t opts[] = {
      {"listen-unix", NULL, STR_FIELD(unix_path)},
      {"listen-tcp", NULL, STR_FIELD(tcp_addr)},
      {"gpus", parse_gpus, STR_FIELD(gpus)},
      {"state-dir", NULL, STR_FIELD(state_dir)},
      {"policy", parse_policy, STR_FIELD(policy)},
      {"variants", parse_variants, STR_FIELD(variants)},
      {"trace", NULL, STR_FIELD(trace)},
      {"hops", NULL, STR_FIELD(hops)},
      {"token-file", NULL, STR_FIELD(token_file)},
      {"unix-group", NULL, STR_FIELD(unix_group)},
      {"control-socket", NULL, STR_FIELD(control_path)},
      {"metrics-listen", NULL, STR_FIELD(metrics_addr)},
      {"lc-poll", parse_lc_poll, 0, 0},
      {"lc-poll-cpu", parse_lc_poll_cpu, 0, 0},
      {"lc-direct", parse_lc_direct, 0, 0},
      {"hostfn-word", parse_hostfn_word, 0, 0},
      {"be-sms", parse_be_sms, 0, 0},
      {"log-level", parse_log_level, 0, 0},
  };
  for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
    if (strcmp(name, opts[i].name) == 0)
      return &opts[i];
  return NULL;
}

/* Applies one option: name is the flag without its leading "--"; where is
 * "--" for a flag or "FILE:LINE: " for a file line, and prefixes the name
 * in every error.  Lookup order: the string and parsed options, the integer
 * options, the guards' options (set_guard_option); names are unique. */
static int set_option(hostd_config_t *cfg, const char *name, const char *v, const char *where,
                      FILE *err) {
  char flag[4400]; /* "--name", or "FILE:LINE: name" for a file line */
  const str_option_t *so;
  const int_option_t *io;
  int rc;
  snprintf(flag, sizeof(flag), "%s%s", where, name);
  if ((so = str_option(name)) != NULL) {
    if (so->parse && (rc = so->parse(cfg, v, flag, err)) != 0)
      return rc;
    return so->size ? set_str((char *)cfg + so->off, so->size, flag, v, err) : 0;
  }
  if ((io = int_option(name)) != NULL) {
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (!end || end == v || *end || n < 0 || n > io->max)
      return bad(err, "%s: expected 0..%ld, got '%s'\n", flag, io->max, v);
    *(int *)((char *)cfg + io->off) = (int)n;
    return 0;
  }
  if ((rc = set_guard_option(cfg, name, v, flag, err)) != 1)
    return rc; /* a guard option: rc says how it went */
  if (strcmp(where, "--") == 0)
    return bad(err, "unknown option %s (see tallyd --help)\n", flag);
  return bad(err, "%sunknown option %s (see tallyd --help)\n", where, name);
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
    if (strcmp(a, "--version") == 0 || strcmp(a, "--insecure-no-token") == 0) {
      *(a[2] == 'v' ? &cfg->show_version : &cfg->insecure_no_token) = 1;
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

/* ---- checks of the whole configuration and of the files it names ---- */

/* Is host (of "host:port", "[v6]:port") a loopback address? Names other
 * than "localhost" are not resolved here: they count as non-loopback. */
static bool tcp_is_loopback(const char *addr) {
  char host[256];
  const char *colon = strrchr(addr, ':');
  size_t n = colon ? (size_t)(colon - addr) : strlen(addr);
  struct in_addr a4;
  struct in6_addr a6;
  if (n >= sizeof(host))
    return false;
  memcpy(host, addr, n);
  host[n] = 0;
  if (host[0] == '[' && n >= 2 && host[n - 1] == ']') {
    memmove(host, host + 1, n - 2);
    host[n - 2] = 0;
  }
  if (strcmp(host, "localhost") == 0)
    return true;
  if (inet_pton(AF_INET, host, &a4) == 1)
    return (ntohl(a4.s_addr) >> 24) == 127;
  if (inet_pton(AF_INET6, host, &a6) == 1)
    return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;
}

/* Prints the CPUs of set as ranges ("0-3,8,10-15"). */
static void print_cpus(FILE *f, const cpu_set_t *set) {
  const char *sep = "";
  for (int c = 0; c < CPU_SETSIZE; c++) {
    int e = c;
    if (!CPU_ISSET(c, set))
      continue;
    while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
      e++;
    fprintf(f, e > c ? "%s%d-%d" : "%s%d", sep, c, e);
    sep = ",";
    c = e;
  }
}

int hostd_config_check(const hostd_config_t *cfg, FILE *err) {
  cpu_set_t cpus;
  if (cfg->lc_poll_cpu >= 0 && sched_getaffinity(0, sizeof(cpus), &cpus) == 0 &&
      !CPU_ISSET(cfg->lc_poll_cpu, &cpus)) {
    fprintf(err, "tallyd: --lc-poll-cpu %d: tallyd may run on CPUs ", cfg->lc_poll_cpu);
    print_cpus(err, &cpus);
    fprintf(err, " only (its affinity); give one of them, auto or none\n");
    return -EINVAL;
  }
  if (cfg->tcp_addr[0] && !cfg->token_file[0] && !cfg->insecure_no_token &&
      !tcp_is_loopback(cfg->tcp_addr)) {
    fprintf(err,
            "tallyd: --listen-tcp %s without --token-file would admit anyone who can reach "
            "the port; give a token file, listen on a loopback address, or pass "
            "--insecure-no-token if the network is trusted\n",
            cfg->tcp_addr);
    return -EINVAL;
  }
  return 0;
}

int hostd_config_read_token(const char *file, char *out, size_t cap, char *warn, size_t warn_len,
                            FILE *err) {
  char buf[WIRE_TOKEN_MAX + 4];
  struct stat st;
  size_t n, i;
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  warn[0] = out[0] = 0;
  if (fd < 0 || fstat(fd, &st) != 0) {
    int e = errno;
    fprintf(err, "tallyd: --token-file %s: %s\n", file, strerror(e));
    if (fd >= 0)
      close(fd);
    return -e;
  }
  n = 0;
  for (ssize_t r; n < sizeof(buf) && (r = read(fd, buf + n, sizeof(buf) - n)) > 0;)
    n += (size_t)r;
  close(fd);
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
    n--; /* one line; its end is not part of the token */
  for (i = 0; i < n && isspace((unsigned char)buf[i]); i++)
    ;
  if (i == n || n > WIRE_TOKEN_MAX || n + 1 > cap || memchr(buf, 0, n)) {
    fprintf(err, "tallyd: --token-file %s: %s\n", file,
            i == n ? "the token is empty or blank: it would admit anyone"
                   : "the token is longer than 256 bytes or has a NUL byte");
    return -EINVAL;
  }
  memcpy(out, buf, n);
  out[n] = 0;
  if (st.st_mode & (S_IRWXG | S_IRWXO))
    snprintf(warn, warn_len,
             "--token-file %s is readable by group or others (mode %04o): "
             "chmod 600 it",
             file, (unsigned)(st.st_mode & 07777));
  return 0;
}

int hostd_config_state_dir(const char *dir, FILE *err) {
  struct stat st;
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    fprintf(err, "tallyd: --state-dir %s: cannot create it (%s)\n", dir, strerror(errno));
    return -errno;
  }
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(err, "tallyd: --state-dir %s: not a folder\n", dir);
    return -ENOTDIR;
  }
  if ((st.st_mode & 077) == 0)
    return 0;
  if (st.st_uid == geteuid() && chmod(dir, 0700) == 0)
    return 0;
  fprintf(err,
          "tallyd: --state-dir %s: mode %04o lets other users read or replace cached "
          "modules, and tallyd cannot make it 0700 (owner uid %u); chmod 700 it\n",
          dir, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid);
  return -EPERM;
}

int hostd_config_check_unix_dir(const char *path, const char *flag, FILE *err) {
  char d[4096];
  const char *slash = strrchr(path, '/');
  struct stat st;
  if (!slash)
    return 0; /* the working folder */
  snprintf(d, sizeof(d), "%.*s", (int)(slash - path), path);
  if (!d[0])
    return 0; /* "/" */
  if (stat(d, &st) != 0) {
    int e = errno;
    if (e == ENOENT)
      fprintf(err, "tallyd: %s %s: folder %s does not exist; create it first (mkdir -p %s)\n", flag,
              path, d, d);
    else
      fprintf(err, "tallyd: %s %s: cannot reach folder %s (%s)\n", flag, path, d, strerror(e));
    return -e;
  }
  if (!S_ISDIR(st.st_mode)) {
    fprintf(err, "tallyd: %s %s: %s is not a folder\n", flag, path, d);
    return -ENOTDIR;
  }
  return 0;
}
