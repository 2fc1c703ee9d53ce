/* test-hostd-guard.c: tallyd's production guards, unit by unit: quotas
 * (quota.c), the token, state-folder and socket-folder checks and the new
 * flags (config.c), log escaping and refusal rate limiting (log.c), the
 * bounded module cache (modcache.c) and the operator's texts (metrics.c).
 * The daemon as a whole is tests/test-hostd-chaos.c. */
#include "hostd/guard.h"
#include "hostd/hostd-int.h"

#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cmocka.h>

#include "wire/wire.h"

static FILE *devnull(void) {
  FILE *f = fopen("/dev/null", "w");
  assert_non_null(f);
  return f;
}

/* ---- quotas ---- */

static void quota_refuses_past_the_limit_and_takes_nothing(void **state) {
  hostd_quota_t q;
  hostd_config_t c;
  (void)state;
  hostd_config_init(&c);
  hostd__quota_setup(&q, &c, "t", 1);
  q.limit[HOSTD_QUOTA_MEM] = 1000;
  assert_int_equal(hostd__quota_charge(&q, HOSTD_QUOTA_MEM, 600), CUDA_SUCCESS);
  assert_int_equal(hostd__quota_charge(&q, HOSTD_QUOTA_MEM, 500), CUDA_ERROR_OUT_OF_MEMORY);
  assert_int_equal(hostd__quota_used(&q, HOSTD_QUOTA_MEM), 600);
  assert_int_equal(q.refused[HOSTD_QUOTA_MEM], 1);
  hostd__quota_release(&q, HOSTD_QUOTA_MEM, 600);
  assert_int_equal(hostd__quota_charge(&q, HOSTD_QUOTA_MEM, 1000), CUDA_SUCCESS);
  assert_int_equal(q.peak_mem, 1000);
  hostd__quota_release(&q, HOSTD_QUOTA_MEM, 5000); /* never below zero */
  assert_int_equal(hostd__quota_used(&q, HOSTD_QUOTA_MEM), 0);
  assert_int_equal(hostd__quota_charge(&q, HOSTD_QUOTA_MEM, UINT64_MAX), CUDA_ERROR_OUT_OF_MEMORY);
}

static void quota_counts_streams_events_hostfns_and_null_is_free(void **state) {
  hostd_quota_t q;
  hostd_config_t c;
  (void)state;
  hostd_config_init(&c);
  c.tenant_streams = 2;
  hostd__quota_setup(&q, &c, "t", 1);
  assert_int_equal(hostd__quota_charge(&q, HOSTD_QUOTA_STREAMS, 1), CUDA_SUCCESS);
  assert_int_equal(hostd__quota_charge(&q, HOSTD_QUOTA_STREAMS, 1), CUDA_SUCCESS);
  assert_int_equal(hostd__quota_charge(&q, HOSTD_QUOTA_STREAMS, 1), CUDA_ERROR_OUT_OF_MEMORY);
  hostd__quota_release(&q, HOSTD_QUOTA_STREAMS, 1);
  assert_int_equal(hostd__quota_charge(&q, HOSTD_QUOTA_STREAMS, 1), CUDA_SUCCESS);
  assert_int_equal(q.limit[HOSTD_QUOTA_EVENTS], HOSTD_DEFAULT_TENANT_EVENTS);
  assert_int_equal(q.limit[HOSTD_QUOTA_HOSTFNS], HOSTD_DEFAULT_TENANT_HOSTFNS);
  assert_int_equal(hostd__quota_charge(NULL, HOSTD_QUOTA_MEM, UINT64_MAX), CUDA_SUCCESS);
  hostd__quota_release(NULL, HOSTD_QUOTA_MEM, 1);
}

/* A name's rule beats its class's, which beats the plain one. */
static void mem_limit_rules_pick_the_most_specific(void **state) {
  hostd_config_t c;
  hostd_quota_t q;
  char *argv[] = {"tallyd", "--tenant-mem-limit", "8G", "--tenant-mem-limit", "best-effort=2G",
                  "--tenant-mem-limit", "name:train=3G", "--tenant-mem-limit", "best-effort=1G",
                  NULL};
  FILE *e = devnull();
  (void)state;
  hostd_config_init(&c);
  assert_int_equal(hostd_config_parse_args(&c, 9, argv, e), 0);
  assert_int_equal(c.n_mem_rules, 3); /* best-effort's second rule replaced its first */
  hostd__quota_setup(&q, &c, "serve", 0);
  assert_int_equal(q.limit[HOSTD_QUOTA_MEM], 8ull << 30);
  hostd__quota_setup(&q, &c, "other", 1);
  assert_int_equal(q.limit[HOSTD_QUOTA_MEM], 1ull << 30);
  hostd__quota_setup(&q, &c, "train", 1);
  assert_int_equal(q.limit[HOSTD_QUOTA_MEM], 3ull << 30);
  fclose(e);
}

static void sizes_parse_and_bad_ones_are_refused(void **state) {
  uint64_t v = 0;
  (void)state;
  assert_int_equal(hostd__parse_size("1000", &v), 0);
  assert_int_equal(v, 1000);
  assert_int_equal(hostd__parse_size("64K", &v), 0);
  assert_int_equal(v, 64 << 10);
  assert_int_equal(hostd__parse_size("4GiB", &v), 0);
  assert_int_equal(v, 4ull << 30);
  assert_int_equal(hostd__parse_size("1T", &v), 0);
  assert_int_equal(hostd__parse_size("-1", &v), -EINVAL);
  assert_int_equal(hostd__parse_size("12Q", &v), -EINVAL);
  assert_int_equal(hostd__parse_size("", &v), -EINVAL);
  assert_int_equal(hostd__parse_size("99999999999999T", &v), -EINVAL);
}

/* ---- config: flags, token, folders ---- */

static void guard_flags_parse_from_command_line_and_file(void **state) {
  hostd_config_t c;
  char path[] = "/tmp/tally-guard-conf-XXXXXX";
  int fd = mkstemp(path);
  char *argv[] = {"tallyd", "--config", path, "--insecure-no-token", "--unix-mode", "0600",
                  "--max-tenants", "7", NULL};
  FILE *e = devnull();
  (void)state;
  assert_true(fd >= 0);
  dprintf(fd, "handshake-ms = 1500\nmax-halfopen = 9\nmax-halfopen-per-peer 3\n"
              "modcache-mem = 1M\nmodcache-disk = 2M\ntenant-upload = 5M\n"
              "unix-group = 0\nmetrics-listen = 127.0.0.1:9100\ncontrol-socket = none\n"
              "tenant-mem-limit = name:x=1K\n");
  close(fd);
  hostd_config_init(&c);
  assert_int_equal(hostd_config_parse_args(&c, 8, argv, e), 0);
  assert_int_equal(c.handshake_ms, 1500);
  assert_int_equal(c.halfopen_max, 9);
  assert_int_equal(c.halfopen_per_peer, 3);
  assert_int_equal(c.modcache_mem, 1 << 20);
  assert_int_equal(c.modcache_disk, 2 << 20);
  assert_int_equal(c.tenant_upload, 5 << 20);
  assert_int_equal(c.insecure_no_token, 1);
  assert_int_equal(c.unix_mode, 0600);
  assert_int_equal(c.max_tenants, 7);
  assert_string_equal(c.metrics_addr, "127.0.0.1:9100");
  assert_string_equal(c.control_path, "none");
  assert_string_equal(c.mem_rules[0].who, "name:x");
  unlink(path);
  fclose(e);
}

static void bad_guard_values_are_refused(void **state) {
  hostd_config_t c;
  FILE *e = devnull();
  char *bad[][3] = {{"tallyd", "--unix-mode", "0999"}, {"tallyd", "--unix-mode", "rw"},
                    {"tallyd", "--tenant-mem-limit", "gold=1G"},
                    {"tallyd", "--tenant-mem-limit", "best-effort=lots"},
                    {"tallyd", "--modcache-mem", "-5"}, {"tallyd", "--max-tenants", "x"}};
  (void)state;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    hostd_config_init(&c);
    assert_int_equal(hostd_config_parse_args(&c, 3, bad[i], e), -EINVAL);
  }
  fclose(e);
}

/* --lc-poll-cpu N must be a CPU tallyd may run on: the check names the ones it may. */
static void lc_poll_cpu_outside_the_affinity_is_refused(void **state) {
  hostd_config_t c;
  cpu_set_t cpus;
  char *msg = NULL, want[64];
  size_t len = 0;
  FILE *e, *dn = devnull();
  int first = -1;
  (void)state;
  assert_int_equal(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
  for (int i = 0; i < CPU_SETSIZE && first < 0; i++)
    if (CPU_ISSET(i, &cpus))
      first = i;
  hostd_config_init(&c);
  c.lc_poll_cpu = first;
  assert_int_equal(hostd_config_check(&c, dn), 0);
  c.lc_poll_cpu = HOSTD_CPU_AUTO;
  assert_int_equal(hostd_config_check(&c, dn), 0);
  fclose(dn);
  if (CPU_ISSET(CPU_SETSIZE - 1, &cpus))
    return; /* every CPU allowed: nothing to refuse */
  c.lc_poll_cpu = CPU_SETSIZE - 1;
  assert_non_null(e = open_memstream(&msg, &len));
  assert_int_equal(hostd_config_check(&c, e), -EINVAL);
  fclose(e);
  snprintf(want, sizeof(want), "--lc-poll-cpu %d: tallyd may run on CPUs %d", CPU_SETSIZE - 1,
           first);
  assert_non_null(strstr(msg, want));
  assert_non_null(strstr(msg, "give one of them, auto or none"));
  free(msg);
}

/* Finding 2: a non-loopback TCP address needs a token or the explicit flag. */
static void non_loopback_tcp_without_token_is_refused(void **state) {
  hostd_config_t c;
  FILE *e = devnull();
  (void)state;
  hostd_config_init(&c);
  strcpy(c.tcp_addr, "0.0.0.0:7000");
  assert_int_equal(hostd_config_check(&c, e), -EINVAL);
  strcpy(c.tcp_addr, "10.1.2.3:7000");
  assert_int_equal(hostd_config_check(&c, e), -EINVAL);
  c.insecure_no_token = 1;
  assert_int_equal(hostd_config_check(&c, e), 0);
  c.insecure_no_token = 0;
  strcpy(c.token_file, "/etc/tally/token");
  assert_int_equal(hostd_config_check(&c, e), 0);
  c.token_file[0] = 0;
  strcpy(c.tcp_addr, "127.0.0.1:7000");
  assert_int_equal(hostd_config_check(&c, e), 0);
  strcpy(c.tcp_addr, "[::1]:7000");
  assert_int_equal(hostd_config_check(&c, e), 0);
  strcpy(c.tcp_addr, "localhost:7000");
  assert_int_equal(hostd_config_check(&c, e), 0);
  fclose(e);
}

static int token_file(const char *text, size_t n, mode_t mode, char *path) {
  int fd;
  strcpy(path, "/tmp/tally-guard-tok-XXXXXX");
  fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, n), (ssize_t)n);
  fchmod(fd, mode);
  close(fd);
  return 0;
}

/* Finding 3: the protocol's longest token is kept whole. */
static void token_of_256_bytes_is_kept_whole(void **state) {
  char text[WIRE_TOKEN_MAX + 2], out[WIRE_TOKEN_MAX + 1], warn[256], path[64];
  FILE *e = devnull();
  (void)state;
  memset(text, 'a', WIRE_TOKEN_MAX);
  text[WIRE_TOKEN_MAX] = '\n';
  token_file(text, WIRE_TOKEN_MAX + 1, 0600, path);
  assert_int_equal(hostd_config_read_token(path, out, sizeof(out), warn, sizeof(warn), e), 0);
  assert_int_equal(strlen(out), WIRE_TOKEN_MAX);
  assert_string_equal(warn, "");
  unlink(path);
  text[WIRE_TOKEN_MAX] = 'a'; /* 257 bytes: longer than the protocol allows */
  token_file(text, WIRE_TOKEN_MAX + 1, 0600, path);
  assert_int_equal(hostd_config_read_token(path, out, sizeof(out), warn, sizeof(warn), e),
                   -EINVAL);
  unlink(path);
  fclose(e);
}

/* Finding 2: empty and blank tokens are refused; an open file warns. */
static void blank_token_refused_and_open_token_file_warns(void **state) {
  char out[WIRE_TOKEN_MAX + 1], warn[256], path[64];
  static const char *const blank[] = {"", "\n", "  \t\r\n", "\r\n\r\n"};
  FILE *e = devnull();
  (void)state;
  for (size_t i = 0; i < 4; i++) {
    token_file(blank[i], strlen(blank[i]), 0600, path);
    assert_int_equal(hostd_config_read_token(path, out, sizeof(out), warn, sizeof(warn), e),
                     -EINVAL);
    unlink(path);
  }
  token_file("s3cret\r\n", 8, 0644, path);
  assert_int_equal(hostd_config_read_token(path, out, sizeof(out), warn, sizeof(warn), e), 0);
  assert_string_equal(out, "s3cret");
  assert_non_null(strstr(warn, "readable by group or others"));
  unlink(path);
  assert_int_equal(hostd_config_read_token("/nonexistent/tok", out, sizeof(out), warn,
                                           sizeof(warn), e),
                   -ENOENT);
  fclose(e);
}

/* Finding 7: the state folder is made private. */
static void state_folder_is_made_0700(void **state) {
  char dir[] = "/tmp/tally-guard-state-XXXXXX", sub[64];
  struct stat st;
  FILE *e = devnull();
  (void)state;
  assert_non_null(mkdtemp(dir));
  chmod(dir, 0755);
  assert_int_equal(hostd_config_state_dir(dir, e), 0);
  assert_int_equal(stat(dir, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  snprintf(sub, sizeof(sub), "%s/new", dir);
  assert_int_equal(hostd_config_state_dir(sub, e), 0);
  assert_int_equal(stat(sub, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  rmdir(sub);
  rmdir(dir);
  fclose(e);
}

/* Finding 8: a missing socket folder is named as such. */
static void missing_socket_folder_is_named(void **state) {
  char *buf = NULL;
  size_t len = 0;
  FILE *e = open_memstream(&buf, &len);
  (void)state;
  assert_int_equal(hostd_config_check_unix_dir("/nonexistent-x/y/t.sock", "--listen-unix", e),
                   -ENOENT);
  assert_int_equal(hostd_config_check_unix_dir("/tmp/t.sock", "--listen-unix", e), 0);
  assert_int_equal(hostd_config_check_unix_dir("t.sock", "--listen-unix", e), 0);
  fclose(e);
  assert_non_null(strstr(buf, "folder /nonexistent-x/y does not exist"));
  free(buf);
}

/* ---- log (finding 6, finding 4) ---- */

static void escape_makes_peer_strings_one_line(void **state) {
  char out[128];
  (void)state;
  assert_string_equal(hostd__escape(out, sizeof(out), "a\nb\x1b[31m\"q\"\\\xff"),
                      "a\\nb\\x1b[31m\\\"q\\\"\\\\\\xff");
  assert_string_equal(hostd__escape(out, 6, "abcdefgh"), "abcde");
  assert_string_equal(hostd__escape(out, 4, "\n\n\n"), "\\n"); /* never a cut escape */
}

/* Runs fn with stderr in a string; returns it (free it). */
static char *capture_stderr(void (*fn)(void)) {
  char path[] = "/tmp/tally-guard-log-XXXXXX", *buf = calloc(1, 8192);
  int fd = mkstemp(path), saved = dup(2);
  fflush(stderr);
  dup2(fd, 2);
  fn();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  lseek(fd, 0, SEEK_SET);
  assert_true(read(fd, buf, 8191) >= 0);
  close(fd);
  unlink(path);
  return buf;
}

static void log_forged_name(void) {
  hostd__log(HOSTD_LOG_INFO, "tenant 1 '%s' connected", "x\nFAKE tallyd error: y\x1b]0;t\x07");
}

static void log_line_cannot_be_split_by_a_name(void **state) {
  char *out = capture_stderr(log_forged_name);
  (void)state;
  assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out)); /* one line */
  assert_non_null(strstr(out, "x\\x0aFAKE tallyd error: y\\x1b]0;t\\x07"));
  free(out);
}

static void log_refusals(void) {
  hostd__log_refusal("10.9.9.9", "10.9.9.9:1", -1, "token", "token refused");
  hostd__log_refusal("10.9.9.9", "10.9.9.9:2", -1, "token", "token refused");
  hostd__log_refusal("10.9.9.9", "10.9.9.9:3", -1, "token", "token refused");
  hostd__log_refusal("uid 1000", "pid 7 uid 1000", 1000, "shed", "too many\nhalf-open");
}

static void refusals_logged_once_per_peer(void **state) {
  unsigned long before = hostd__refusals();
  char *out = capture_stderr(log_refusals);
  (void)state;
  assert_int_equal(hostd__refusals() - before, 4);
  assert_non_null(strstr(out, "refused peer \"10.9.9.9:1\" uid -: token: token refused"));
  assert_null(strstr(out, "10.9.9.9:2"));
  assert_non_null(strstr(out, "refused peer \"pid 7 uid 1000\" uid 1000: shed: too many\\nhalf"));
  free(out);
}

/* ---- module cache (finding 5) ---- */

static uint64_t put(int seed, size_t len) {
  uint8_t *b = malloc(len);
  uint64_t id;
  memset(b, seed, len);
  id = XXH3_64bits(b, len);
  assert_int_equal(hostd__modcache_put(id, b, len), 0);
  free(b);
  return id;
}

static void module_cache_bounded_lru_in_memory_and_on_disk(void **state) {
  char dir[] = "/tmp/tally-guard-mc-XXXXXX", cmd[128];
  hostd_modcache_stats_t st;
  uint64_t ids[8];
  size_t len;
  (void)state;
  assert_non_null(mkdtemp(dir));
  hostd__modcache_init(dir);
  hostd__modcache_limits(3000, 5000);
  for (int i = 0; i < 8; i++) {
    ids[i] = put(i + 1, 1000);
    assert_non_null(hostd__modcache_get(ids[0], &len)); /* keeps image 0 warm */
  }
  hostd__modcache_unpin();
  hostd__modcache_stats(&st);
  assert_true(st.mem_bytes <= 3000);
  assert_true(st.disk_bytes <= 5000);
  assert_true(st.evicted_mem >= 5);
  assert_true(st.evicted_disk >= 3);
  assert_non_null(hostd__modcache_get(ids[0], &len)); /* the warm one stayed */
  assert_non_null(hostd__modcache_get(ids[7], &len)); /* the newest too */
  assert_null(hostd__modcache_get(ids[1], &len));     /* a cold one went from both */
  hostd__modcache_unpin();
  snprintf(cmd, sizeof(cmd), "test $(ls %s/modules | grep -c tmp) = 0", dir);
  assert_int_equal(system(cmd), 0); /* durable writes leave no temporary file */
  hostd__modcache_close();
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* An image evicted while a thread still uses it stays readable until that
 * thread's next get. */
static void pinned_image_survives_eviction(void **state) {
  hostd_modcache_stats_t st;
  const unsigned char *p;
  uint64_t a;
  size_t len;
  (void)state;
  hostd__modcache_init("");
  hostd__modcache_limits(1500, 0);
  a = put(0x11, 1000);
  p = hostd__modcache_get(a, &len);
  assert_non_null(p);
  put(0x22, 1000); /* over the bound: a is evicted but pinned */
  hostd__modcache_stats(&st);
  assert_true(st.mem_bytes <= 1500);
  assert_int_equal(p[0], 0x11);
  assert_int_equal(p[999], 0x11);
  hostd__modcache_unpin();
  hostd__modcache_close();
}

/* --tenant-weight: the same precedence; out of 1..1000 is refused. */
static void weight_rules_pick_the_most_specific(void **state) {
  hostd_config_t c;
  hostd_quota_t q;
  char *argv[] = {"tallyd", "--tenant-weight", "best-effort=4", "--tenant-weight", "name:big=9",
                  NULL};
  char *bad[] = {"tallyd", "--tenant-weight", "1001", NULL};
  char *zero[] = {"tallyd", "--tenant-weight", "best-effort=0", NULL};
  FILE *e = devnull();
  (void)state;
  hostd_config_init(&c);
  hostd__quota_setup(&q, &c, "any", 1);
  assert_int_equal(q.weight, 1);
  assert_int_equal(hostd_config_parse_args(&c, 5, argv, e), 0);
  hostd__quota_setup(&q, &c, "any", 1);
  assert_int_equal(q.weight, 4);
  hostd__quota_setup(&q, &c, "big", 1);
  assert_int_equal(q.weight, 9);
  hostd__quota_setup(&q, &c, "serve", 0);
  assert_int_equal(q.weight, 1);
  hostd_config_init(&c);
  assert_int_not_equal(hostd_config_parse_args(&c, 3, bad, e), 0);
  hostd_config_init(&c);
  assert_int_not_equal(hostd_config_parse_args(&c, 3, zero, e), 0);
  fclose(e);
}

/* ---- the latency-critical tenant's request latency (latency.c) ---- */

#define MS 1000000ull
#define S0 (1000ull * 1000 * MS) /* a monotonic time well past 0 */

/* A request runs from its first launch to the answer of the call that
 * waits for the GPU; calls and copies before a launch open none; a query
 * that says NOT_READY does not end one. */
static void lc_request_is_first_launch_to_synchronising_reply(void **state) {
  static hostd_lat_t l;
  int64_t p50, p99;
  (void)state;
  hostd__lat_answered(&l, CALL_OP_STREAM_SYNC, CUDA_SUCCESS, S0); /* nothing open */
  hostd__lat_request(&l, CALL_OP_MEM_ALLOC, S0 + 1 * MS);         /* opens nothing */
  hostd__lat_request(&l, CALL_OP_LAUNCH, S0 + 10 * MS);           /* opens */
  hostd__lat_request(&l, CALL_OP_LAUNCH, S0 + 12 * MS);           /* already open */
  hostd__lat_answered(&l, CALL_OP_STREAM_QUERY, CUDA_ERROR_NOT_READY, S0 + 13 * MS);
  hostd__lat_answered(&l, CALL_OP_MEM_ALLOC, CUDA_SUCCESS, S0 + 14 * MS);
  hostd__lat_answered(&l, CALL_OP_STREAM_SYNC, CUDA_SUCCESS, S0 + 17 * MS); /* 7 ms */
  hostd__lat_quantiles(&l, S0 + 20 * MS, &p50, &p99);
  assert_int_equal(p50, 7000);
  assert_int_equal(p99, 7000);
  assert_true(hostd__lat_ends(CALL_OP_DTOH, CUDA_SUCCESS));
  assert_true(hostd__lat_ends(CALL_OP_EVENT_QUERY, CUDA_SUCCESS));
  assert_false(hostd__lat_ends(CALL_OP_EVENT_QUERY, CUDA_ERROR_NOT_READY));
  assert_false(hostd__lat_ends(CALL_OP_HTOD, CUDA_SUCCESS));
  /* 99 more of 1..99 ms: p50 and p99 of the 100 */
  for (int i = 1; i <= 99; i++) {
    uint64_t t = S0 + (uint64_t)i * 1000 * MS;
    hostd__lat_request(&l, CALL_OP_LAUNCH, t);
    hostd__lat_answered(&l, CALL_OP_CTX_SYNC, CUDA_SUCCESS, t + (uint64_t)i * MS);
  }
  hostd__lat_quantiles(&l, S0 + 100 * 1000 * MS, &p50, &p99);
  /* the window is the last minute: requests that ended 60 s or more ago are out */
  assert_true(p50 > 40000 && p99 == 99000);
  hostd__lat_quantiles(&l, S0 + 1000 * 1000 * MS, &p50, &p99);
  assert_int_equal(p50, -1);
  assert_int_equal(p99, -1);
  hostd__lat_quantiles(NULL, S0, &p50, &p99);
  assert_int_equal(p50, -1);
}

/* ---- the operator's texts (finding 10) ---- */

static void view_texts_list_tenants_escaped(void **state) {
  hostd_row_t rows[2] = {
      {.id = 1, .name = "serve", .peer = "pid 10 uid 0", .transport = "shm", .prio = 0,
       .mem = 4096, .kernels = 7, .queue = 2, .gpu_ns = 2500000000, .weight = 1, .p50_us = 800,
       .p99_us = 2100, .cpu = 15},
      {.id = 2, .name = "ev\"il\n", .peer = "10.0.0.2:5", .transport = "tcp", .prio = 1,
       .gpu_ns = -1, .p50_us = -1, .p99_us = -1, .cpu = -1}};
  hostd_view_t v = {.rows = rows, .n = 2, .calls = 5};
  char *s = hostd__view_status(&v), *m = hostd__view_metrics(&v);
  (void)state;
  assert_non_null(strstr(s, "serve"));
  assert_non_null(strstr(s, "latency-critical"));
  assert_non_null(strstr(s, "ev\\\"il\\n"));
  assert_non_null(strstr(m, "tally_tenants 2\n"));
  assert_non_null(strstr(m, "tally_tenant_device_memory_bytes{tenant=\"serve\",id=\"1\","
                            "class=\"latency-critical\",transport=\"shm\"} 4096\n"));
  assert_non_null(strstr(m, "tenant=\"ev\\\"il\\n\""));
  assert_non_null(strstr(m, "tally_tenant_kernels_total{tenant=\"serve\""));
  assert_non_null(strstr(s, "2500ms"));  /* GPU time */
  assert_non_null(strstr(s, "2100us"));  /* LC p99 */
  assert_non_null(strstr(s, " CPU\n"));
  assert_non_null(strstr(s, "       0   15\n")); /* its polling worker's CPU, after PTB */
  assert_non_null(strstr(s, "       0    -\n")); /* none pinned */
  assert_non_null(strstr(m, "tally_tenant_gpu_seconds_total{tenant=\"serve\",id=\"1\","
                            "class=\"latency-critical\"} 2.500000\n"));
  assert_non_null(strstr(m, "tally_tenant_weight{tenant=\"serve\",id=\"1\","
                            "class=\"latency-critical\"} 1\n"));
  assert_null(strstr(m, "tally_tenant_weight{tenant=\"ev")); /* not scheduled: left out */
  assert_non_null(strstr(m, "tally_lc_request_latency_microseconds{tenant=\"serve\","
                            "quantile=\"0.99\"} 2100\n"));
  assert_null(strstr(s, "scheduler:")); /* --policy none: no scheduler line or series */
  assert_null(strstr(m, "tally_sched_"));
  assert_null(strstr(m, "tally_tenant_variant_launches_total{tenant=\"ev")); /* not scheduled */
  free(s);
  free(m);
}

/* The scheduler's counters: per tenant sliced / PTB launches (scheduled
 * tenants only), daemon-wide preemptions, turnaround quantiles and the
 * fences that made a worker wait. */
static void view_texts_show_variant_launches_and_turnaround(void **state) {
  hostd_row_t rows[2] = {
      {.id = 1, .name = "lc", .transport = "shm", .prio = 0, .gpu_ns = 0, .weight = 1,
       .p50_us = -1, .p99_us = -1, .cpu = 3},
      {.id = 2, .name = "be", .transport = "shm", .prio = 1, .gpu_ns = 0, .weight = 1,
       .p50_us = -1, .p99_us = -1, .sliced = 41, .ptb = 17, .flush = 3, .cpu = -1}};
  hostd_view_t v = {.rows = rows, .n = 2,
                    .sched = {.on = 1, .sliced = 41, .ptb = 17, .flush = 3, .given_up = 96,
                              .whole = 2, .whole_forms = 6, .preempts = 5, .early_raises = 3,
                              .turnarounds = 4,
                              .turn_p50_ns = 12000, .turn_p99_ns = 37000, .fences_blocked = 9,
                              .fence_block_ns = 2500000}};
  char *s, *m, *line;
  unsigned long long sl = 0, pt = 0;
  (void)state;
  s = hostd__view_status(&v);
  m = hostd__view_metrics(&v);
  assert_non_null(strstr(s, "scheduler: 41 sliced and 17 PTB launches, 5 preemptions (3 flags "
                            "raised by an LC's worker), turnaround p50 12.0 us p99 37.0 us (4 timed); 3 FLUSH launches, "
                            "96 blocks given up; 2 best-effort launches ran on the whole GPU (the "
                            "partition cannot host them); 6 sliced, PTB or FLUSH launches ran "
                            "on the whole GPU beside the partition\n"));
  assert_non_null(strstr(s, "SLICED"));
  assert_non_null(line = strstr(s, "\n2    be"));
  {
    /* the two columns before the last (CPU) of the tenant's row */
    char row[512], *tok, *prev2 = NULL, *prev = NULL, *last = NULL;
    size_t n = strcspn(line + 1, "\n");
    assert_true(n < sizeof(row));
    memcpy(row, line + 1, n);
    row[n] = 0;
    for (tok = strtok(row, " "); tok; tok = strtok(NULL, " "))
      prev2 = prev, prev = last, last = tok;
    assert_non_null(prev2);
    assert_string_equal(last, "-");
    sl = strtoull(prev2, NULL, 10);
    pt = strtoull(prev, NULL, 10);
  }
  assert_int_equal(sl, 41);
  assert_int_equal(pt, 17);
  assert_non_null(strstr(m, "tally_sched_variant_launches_total{form=\"sliced\"} 41\n"));
  assert_non_null(strstr(m, "tally_sched_variant_launches_total{form=\"ptb\"} 17\n"));
  assert_non_null(strstr(m, "tally_sched_variant_launches_total{form=\"flush\"} 3\n"));
  assert_non_null(strstr(m, "tally_sched_blocks_given_up_total 96\n"));
  assert_non_null(strstr(m, "tally_sched_whole_gpu_launches_total 2\n"));
  assert_non_null(strstr(m, "tally_sched_whole_gpu_form_launches_total 6\n"));
  assert_non_null(strstr(m, "tally_tenant_variant_launches_total{tenant=\"be\",id=\"2\","
                            "form=\"flush\"} 3\n"));
  assert_non_null(strstr(m, "tally_sched_preemptions_total 5\n"));
  assert_non_null(strstr(m, "tally_sched_early_raises_total 3\n"));
  assert_non_null(strstr(m, "tally_sched_fence_waits_total 9\n"));
  assert_non_null(strstr(m, "tally_sched_fence_wait_seconds_total 0.002500\n"));
  assert_non_null(
      strstr(m, "tally_sched_preempt_turnaround_microseconds{quantile=\"0.5\"} 12.0\n"));
  assert_non_null(
      strstr(m, "tally_sched_preempt_turnaround_microseconds{quantile=\"0.99\"} 37.0\n"));
  assert_non_null(strstr(m, "tally_tenant_variant_launches_total{tenant=\"be\",id=\"2\","
                            "form=\"ptb\"} 17\n"));
  assert_non_null(strstr(m, "tally_tenant_variant_launches_total{tenant=\"lc\",id=\"1\","
                            "form=\"sliced\"} 0\n"));
  free(s);
  free(m);
  /* No preemption timed yet: no quantiles (never a made-up 0). */
  v.sched.turnarounds = 0;
  v.sched.flush = 0; /* and no FLUSH launch: nothing said of them */
  v.sched.whole = v.sched.whole_forms = 0; /* nor of launches moved off the partition */
  v.sched.early_raises = 0; /* nor of flags raised by workers */
  s = hostd__view_status(&v);
  m = hostd__view_metrics(&v);
  assert_non_null(strstr(s, "5 preemptions\n"));
  assert_null(strstr(m, "tally_sched_preempt_turnaround_microseconds"));
  free(s);
  free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(quota_refuses_past_the_limit_and_takes_nothing),
      cmocka_unit_test(quota_counts_streams_events_hostfns_and_null_is_free),
      cmocka_unit_test(mem_limit_rules_pick_the_most_specific),
      cmocka_unit_test(sizes_parse_and_bad_ones_are_refused),
      cmocka_unit_test(guard_flags_parse_from_command_line_and_file),
      cmocka_unit_test(bad_guard_values_are_refused),
      cmocka_unit_test(non_loopback_tcp_without_token_is_refused),
      cmocka_unit_test(lc_poll_cpu_outside_the_affinity_is_refused),
      cmocka_unit_test(token_of_256_bytes_is_kept_whole),
      cmocka_unit_test(blank_token_refused_and_open_token_file_warns),
      cmocka_unit_test(state_folder_is_made_0700),
      cmocka_unit_test(missing_socket_folder_is_named),
      cmocka_unit_test(escape_makes_peer_strings_one_line),
      cmocka_unit_test(log_line_cannot_be_split_by_a_name),
      cmocka_unit_test(refusals_logged_once_per_peer),
      cmocka_unit_test(module_cache_bounded_lru_in_memory_and_on_disk),
      cmocka_unit_test(pinned_image_survives_eviction),
      cmocka_unit_test(view_texts_list_tenants_escaped),
      cmocka_unit_test(view_texts_show_variant_launches_and_turnaround),
      cmocka_unit_test(weight_rules_pick_the_most_specific),
      cmocka_unit_test(lc_request_is_first_launch_to_synchronising_reply),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
