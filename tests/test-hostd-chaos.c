/* test-hostd-chaos.c: tallyd-record under attack and churn, as one process
 * among hostile and careless ones (TAP).
 *
 * One daemon (short handshake deadline, small caches and quotas so the
 * bounds are reached in seconds) takes: half-open floods over TCP and UNIX,
 * a HELLO dripped a byte at a time, malformed first frames, refused tokens,
 * a name that tries to forge a log line, module uploads past the tenant's
 * quota and the cache's bounds, tenant churn, 64 concurrent tenants, kill -9
 * of tenants at random points (one mid-copy), and a stopped tenant.  After
 * each, the daemon must be alive, a good tenant must still be served within
 * a bound, and at the end descriptors and memory must be back near their
 * baseline.  Waits are bounded polls; the bound for "served" is generous
 * (a correctness bound, not a latency measurement: see
 * tests/bench/hostd-flood.c for that).  KEEP=1 keeps the daemon's folder.
 */
#include "tests/hostd-chaos.h"
#include "tests/spawn-env.h"


static chaos_daemon_t D;
static const char *B = "."; /* the build folder */
static int n_test, n_fail, fd_base;
static long rss_base;

static void tap(bool ok, const char *fmt, ...) {
  va_list ap;
  printf("%s %d - ", ok ? "ok" : "not ok", ++n_test);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
  fflush(stdout);
  n_fail += !ok;
}

/* The first request of every tenant, the call protocol's HELLO
 * (wire/call.def), answered by the tenant's worker: 0 when it was. */
static int call_hello(wire_conn_t *c) {
  int r = chaos_call_hello(c, "chaos", 1);
  return r <= 0 ? r : -EPROTO;
}

/* A good tenant is served: it connects (TCP with the token, or UNIX) and
 * its first call is answered, all within bound_ms (retrying a connect the
 * daemon shed: a guest library retries the same way). */
static bool served(bool tcp, int bound_ms) {
  wire_conn_t *c = NULL;
  uint64_t t0 = chaos_now_ms();
  int rc;
  do
    rc = chaos_tenant(&D, tcp, "good", tcp ? D.token : NULL, &c);
  while (rc != 0 && chaos_now_ms() - t0 < (uint64_t)bound_ms && (chaos_nap(), 1));
  if (rc == 0)
    rc = call_hello(c);
  wire_conn_close(c);
  if (rc)
    printf("# %s tenant not served: %s\n", tcp ? "TCP" : "UNIX", wire_strerror(rc));
  return rc == 0 && chaos_now_ms() - t0 <= (uint64_t)bound_ms && chaos_alive(&D);
}

/* Memory bounds mean nothing under AddressSanitizer: its quarantine keeps
 * freed blocks, and the daemon is built with the same flags as this test. */
#if defined(__SANITIZE_ADDRESS__)
#define MEMORY_CHECKED 0
#else
#define MEMORY_CHECKED 1
#endif

static void tap_memory(long grown_kb, long bound_kb, const char *what) {
  if (!MEMORY_CHECKED) {
    printf("ok %d - %s # SKIP AddressSanitizer build (quarantine keeps freed memory)\n", ++n_test,
           what);
    return;
  }
  tap(grown_kb < bound_kb, "%s (%+ld KiB, bound %ld KiB)", what, grown_kb, bound_kb);
}

static bool fds_at_base(void *arg) {
  (void)arg;
  return chaos_fds(D.pid) <= fd_base;
}

static bool tenants_zero(void *arg) {
  char cmd[300], line[256];
  bool zero = false;
  FILE *p;
  (void)arg;
  snprintf(cmd, sizeof(cmd), "%s/hostd/tallyctl --socket %s.ctl metrics 2>/dev/null", B, D.sock);
  if (!(p = popen(cmd, "r")))
    return false;
  while (fgets(line, sizeof(line), p))
    zero |= strcmp(line, "tally_tenants 0\n") == 0;
  pclose(p);
  return zero;
}

/* Every tenant gone and the descriptors back to the baseline. */
static bool back_to_base(void) {
  return chaos_wait(tenants_zero, NULL, 10000) && chaos_wait(fds_at_base, NULL, 10000);
}

/* ---- finding 1: exhaustion before authentication ---- */

/* 300 silent connections per transport (more than --max-halfopen 64): the
 * oldest are shed, the daemon holds at most the cap, a good tenant on each
 * transport is served meanwhile, and everything returns after. */
static void halfopen_flood_sheds_oldest_and_serves_good_tenants(void) {
  static int fds[600];
  int n = 0, peak;
  for (int i = 0; i < 300; i++) {
    fds[n] = chaos_tcp_raw(&D, "127.0.0.2");
    n += fds[n] >= 0;
    fds[n] = chaos_unix_raw(&D);
    n += fds[n] >= 0;
  }
  peak = chaos_fds(D.pid);
  tap(n == 600 && peak <= fd_base + 64 + 8,
      "finding 1: 600 half-open connections: daemon holds %d descriptors (baseline %d, cap 64)",
      peak, fd_base);
  tap(served(true, 5000) && served(false, 5000),
      "finding 1: a good TCP tenant (token) and a UNIX tenant are served during the flood");
  for (int i = 0; i < n; i++)
    close(fds[i]);
  tap(back_to_base(), "finding 1: descriptors back to baseline after the flood (%d)",
      chaos_fds(D.pid));
}

/* A HELLO dripped a byte at a time is closed at the handshake deadline
 * (--handshake-ms 1000) however lively it looks, with a logged reason. */
static void slowloris_hello_closed_at_deadline(void) {
  wire_buf_t b;
  chaos_logwait_t w = {&D, "handshake deadline", 1};
  int fd = chaos_tcp_raw(&D, "127.0.0.4");
  size_t sent = 0;
  uint64_t t0 = chaos_now_ms();
  bool closed = false;
  chaos_hello(&b, "slow", D.token);
  while (fd >= 0 && sent + 1 < b.len && chaos_now_ms() - t0 < 5000 && !closed) {
    if (send(fd, b.data + sent, 1, MSG_NOSIGNAL) != 1)
      closed = true;
    else
      sent++;
    closed = closed || chaos_closed_within(fd, 100);
  }
  tap(closed && chaos_now_ms() - t0 < 3000 && chaos_wait(chaos_log_has, &w, 2000),
      "finding 1: a HELLO dripped a byte per 100 ms is closed at the 1 s deadline "
      "(after %llu ms, %zu bytes) and logged", (unsigned long long)(chaos_now_ms() - t0), sent);
  wire_buf_close(&b);
  if (fd >= 0)
    close(fd);
}

/* ---- finding 3 and 4: the longest token; refusals logged once per peer ---- */

static void token_of_protocol_maximum_works_and_prefix_is_refused(void) {
  wire_conn_t *c = NULL;
  char prefix[WIRE_TOKEN_MAX + 1];
  int full = chaos_tenant(&D, true, "tok", D.token, &c), part;
  wire_conn_close(c);
  c = NULL;
  snprintf(prefix, sizeof(prefix), "%.*s", WIRE_TOKEN_MAX - 1, D.token);
  part = chaos_tenant(&D, true, "tok", prefix, &c);
  wire_conn_close(c);
  tap(full == 0 && part == WIRE_ETOKEN,
      "finding 3: a 256-byte token is accepted (%d) and its 255-byte prefix refused (%d)", full,
      part);
}

/* Three bad tokens from one address: one log line naming the peer, uid and
 * reason; the next line for that peer says how many were not logged. */
static void refusals_logged_once_per_peer_with_reason(void) {
  chaos_logwait_t w = {&D, "refused peer \"127.0.0.3:", 1};
  wire_buf_t b;
  chaos_hello(&b, "badtok", "wrong");
  for (int i = 0; i < 3; i++) {
    int fd = chaos_tcp_raw(&D, "127.0.0.3");
    if (fd >= 0 && send(fd, b.data, b.len, MSG_NOSIGNAL) == (ssize_t)b.len)
      chaos_closed_within(fd, 2000);
    if (fd >= 0)
      close(fd);
  }
  wire_buf_close(&b);
  tap(chaos_wait(chaos_log_has, &w, 2000) && chaos_log_count(&D, "refused peer \"127.0.0.3:") == 1 &&
          chaos_log_count(&D, "uid -: token: token refused") >= 1,
      "finding 4: 3 bad tokens from 127.0.0.3 give one line with peer, uid and reason");
}

/* ---- finding 6: log injection ---- */

static void tenant_name_cannot_forge_log_lines(void) {
  wire_conn_t *c = NULL;
  chaos_logwait_t w = {&D, "FORGED", 1};
  int rc = chaos_tenant(&D, false, "x\n2026-01-01T00:00:00.000Z tallyd warn: FORGED\x1b[31m",
                        NULL, &c);
  wire_conn_close(c);
  tap(rc == 0 && chaos_wait(chaos_log_has, &w, 2000) &&
          chaos_log_count(&D, "x\\n2026-01-01T00:00:00.000Z tallyd warn: FORGED\\x1b[31m") ==
              chaos_log_count(&D, "FORGED") &&
          chaos_log_count(&D, "\x1b") == 0,
      "finding 6: a tenant name with a newline and an escape byte is logged escaped, one line");
}

/* ---- finding 5: module uploads and the module cache are bounded ---- */

/* Bytes of the files in the daemon's module folder. */
static long long modules_on_disk(void) {
  char path[256];
  long long sum = 0;
  struct dirent *e;
  DIR *d;
  snprintf(path, sizeof(path), "%s/state/modules", D.dir);
  if (!(d = opendir(path)))
    return -1;
  while ((e = readdir(d)) != NULL) {
    char f[600];
    struct stat st;
    snprintf(f, sizeof(f), "%s/%s", path, e->d_name);
    if (e->d_name[0] != '.' && stat(f, &st) == 0)
      sum += st.st_size;
  }
  closedir(d);
  return sum;
}

/* n images of 1 MiB, distinct by seed; returns how many were accepted. */
static int upload(const char *name, int n, int seed) {
  wire_conn_t *c = NULL;
  uint8_t *img = malloc(1 << 20);
  int ok = 0;
  if (!img || chaos_tenant(&D, false, name, NULL, &c) != 0) {
    free(img);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    uint64_t id;
    memset(img, seed + i, 1 << 20);
    ok += wire_conn_blob_offer(c, img, 1 << 20, &id) == 0;
  }
  wire_conn_close(c);
  free(img);
  return ok;
}

/* --tenant-upload 4M: a tenant's 5th 1 MiB image is refused.  With
 * --modcache-mem 2M and --modcache-disk 3M, 12 images from three tenants
 * leave at most 3 MiB on disk and the daemon's memory near its baseline. */
static void module_uploads_and_cache_are_bounded(void) {
  int a = upload("up1", 8, 1), b, c;
  long rss;
  long long disk;
  b = upload("up2", 4, 20);
  c = upload("up3", 4, 40);
  disk = modules_on_disk();
  rss = chaos_rss_kb(D.pid);
  tap(a == 4, "finding 5: a tenant's uploads stop at --tenant-upload 4M (%d of 8 accepted)", a);
  tap(b == 4 && c == 4 && disk > 0 && disk <= (3 << 20),
      "finding 5: the module cache keeps %lld bytes on disk (bound 3 MiB) after 12 MiB of images",
      disk);
  tap_memory(rss - rss_base, 8 * 1024,
             "finding 5: daemon memory after 12 MiB of images (cache bound 2 MiB + slack)");
}

/* ---- chaos: churn, many tenants, deaths, a stopped tenant ---- */

static void tenant_churn_leaves_no_trace(void) {
  int bad = 0;
  for (int i = 0; i < 200; i++) {
    wire_conn_t *c = NULL;
    bad += chaos_tenant(&D, i % 2, "churn", i % 2 ? D.token : NULL, &c) != 0;
    wire_conn_close(c);
  }
  tap(bad == 0 && back_to_base() && served(false, 5000),
      "chaos: 200 tenants connect and leave (UNIX and TCP): %d failed, descriptors back", bad);
}

static void sixty_four_concurrent_tenants_are_served(void) {
  static wire_conn_t *c[64];
  int ok = 0;
  for (int i = 0; i < 64; i++)
    if (chaos_tenant(&D, i % 4 == 0, "many", i % 4 == 0 ? D.token : NULL, &c[i]) != 0)
      c[i] = NULL;
  for (int i = 0; i < 64; i++)
    ok += c[i] && call_hello(c[i]) == 0;
  for (int i = 0; i < 64; i++)
    wire_conn_close(c[i]);
  tap(ok == 64 && back_to_base(), "chaos: 64 concurrent tenants all served (%d), then gone", ok);
}

/* --max-tenants 100: the 101st tenant is told to come back later
 * (-EAGAIN, which the guest library retries; a rate-limited refusal), and
 * admitted once one has left. */
static void tenant_cap_says_retry(void) {
  static wire_conn_t *c[101];
  int ok = 0, last, again;
  for (int i = 0; i < 100; i++)
    ok += chaos_tenant(&D, false, "cap", NULL, &c[i]) == 0;
  last = chaos_tenant(&D, false, "cap-extra", NULL, &c[100]);
  wire_conn_close(c[0]);
  c[0] = NULL;
  do
    again = chaos_tenant(&D, false, "cap-extra", NULL, &c[100]);
  while (again == -EAGAIN && (chaos_nap(), 1));
  for (int i = 0; i < 101; i++)
    wire_conn_close(c[i]);
  tap(ok == 100 && last == -EAGAIN && again == 0 &&
          back_to_base(),
      "chaos: --max-tenants 100: the 101st tenant is told to retry (%d), then admitted (%d)", last,
      again);
}

/* Runs tests/guest-tenant-helper ACTION as tenant NAME (latency-critical
 * when NAME starts with "lc-"); its stdout on a pipe (*out) when out is
 * not NULL.  Its stdin is a pipe whose write end goes to *in (the caller
 * closes it to let alloc-wait go on), or is closed at once when in is
 * NULL. */
static pid_t helper(const char *action, const char *name, int *out, int *in_w) {
  int p[2] = {-1, -1}, in[2] = {-1, -1};
  pid_t pid;
  char bin[256], host[208], tname[200], prio[40];
  snprintf(bin, sizeof(bin), "%s/tests/guest-tenant-helper", B);
  snprintf(host, sizeof(host), "TALLY_HOST=unix:%s", D.sock);
  snprintf(tname, sizeof(tname), "TALLY_NAME=%s", name);
  snprintf(prio, sizeof(prio), "TALLY_PRIORITY=%s",
           strncmp(name, "lc-", 3) == 0 ? "latency-critical" : "best-effort");
  const char *vars[] = {host, tname, prio};
  char *argv[] = {bin, (char *)action, NULL};
  char **env = spawn_env(vars, 3);
  if (!env)
    return -1;
  if ((out && pipe(p) != 0) || pipe(in) != 0) {
    free(env);
    return -1;
  }
  if ((pid = fork()) == 0) { /* async-signal-safe calls only, until the exec */
    int devnull = open("/dev/null", O_RDWR);
    if (out)
      dup2(p[1], 1);
    dup2(in[0], 0);
    close(in[1]); /* else stdin never ends: the child would hold its write end */
    dup2(devnull, 2);
    execve(bin, argv, env);
    _exit(127);
  }
  free(env);
  if (out) {
    close(p[1]);
    *out = p[0];
  }
  close(in[0]);
  if (in_w)
    *in_w = in[1];
  else
    close(in[1]);
  return pid;
}

/* Reads the helper's stdout until it has printed want (bounded). */
static bool helper_says(int fd, const char *want, int ms) {
  char buf[4096];
  size_t n = 0;
  uint64_t end = chaos_now_ms() + (uint64_t)ms;
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  while (chaos_now_ms() < end && n + 1 < sizeof(buf)) {
    ssize_t r = read(fd, buf + n, sizeof(buf) - 1 - n);
    if (r > 0) {
      n += (size_t)r;
      buf[n] = 0;
      if (strstr(buf, want))
        return true;
    } else if (r == 0) {
      return false;
    } else {
      chaos_nap();
    }
  }
  return false;
}

/* kill -9 of tenants at random moments: while they set up, while one
 * copies 16 MiB at a time, after they own memory, streams, events and a
 * module.  The daemon cleans each up and serves the next tenant. */
static void tenants_killed_at_random_points_are_cleaned_up(void) {
  int alive = 0, copying = 0;
  srand(1234);
  for (int i = 0; i < 24; i++) {
    int out = -1;
    const char *act = i % 3 == 0 ? "copy-loop" : i % 3 == 1 ? "healthy" : "die";
    pid_t p = helper(act, "victim", &out, NULL);
    struct timespec ts = {0, (long)(rand() % 30) * 1000000L};
    if (i % 3 == 0) /* then some copies in: most kills land inside one */
      copying += helper_says(out, "copying", 10000), ts.tv_nsec += 20000000L;
    nanosleep(&ts, NULL);
    kill(p, SIGKILL);
    waitpid(p, NULL, 0);
    close(out);
    alive += chaos_alive(&D);
    if (getenv("CHAOS_DEBUG"))
      printf("# victim %d: %s pid %d\n", i, act, (int)p);
  }
  tap(alive == 24 && copying == 8 && back_to_base() && served(false, 5000),
      "chaos: 24 tenants killed with SIGKILL (8 mid-copy): daemon up, all cleaned, next served");
}

/* --tenant-hostfns 8: a tenant whose stream is held by its first host
 * function posts 11 more; the 9th to 12th get out of memory (at its next
 * synchronisation, as a post's error), the others run, another tenant is
 * served meanwhile, and the units come back when the gates open (8 more
 * all run). */
static void pending_host_functions_are_bounded(void) {
  int out = -1, in = -1;
  pid_t p = helper("hostfn-quota", "hostfns", &out, &in);
  bool ready = helper_says(out, "ready", 10000), others = served(false, 5000), first, again;
  char rest[256];
  size_t n = 0;
  uint64_t end = chaos_now_ms() + 10000;
  close(in);
  while (n + 1 < sizeof(rest) && chaos_now_ms() < end) { /* its output until it exits */
    ssize_t r = read(out, rest + n, sizeof(rest) - 1 - n);
    if (r == 0)
      break;
    if (r > 0)
      n += (size_t)r;
    else
      chaos_nap();
  }
  rest[n] = 0;
  first = strstr(rest, "sync 2 ran 7\n") != NULL;
  again = strstr(rest, "again 0 ran 15\n") != NULL;
  if (!first || !again)
    printf("# hostfn-quota: ready %d, others %d, then said: %s\n", ready, others, rest);
  kill(p, SIGKILL);
  waitpid(p, NULL, 0);
  close(out);
  tap(ready && others && first && again && back_to_base(),
      "quota: pending host functions stop at --tenant-hostfns 8 with out of memory, others are "
      "served, the quota comes back as gates open");
}

/* A tenant stopped with SIGSTOP holds its memory; others are served while
 * it is stopped, and it is dropped once its heartbeats stop counting. */
static void stopped_tenant_does_not_stall_others(void) {
  int out = -1, in = -1;
  pid_t p = helper("alloc-wait", "stopped", &out, &in);
  bool ready = helper_says(out, "ptr", 10000), others;
  kill(p, SIGSTOP);
  others = served(false, 5000) && served(true, 5000);
  tap(ready && others, "chaos: tenants are served while another is stopped (SIGSTOP)");
  kill(p, SIGKILL);
  kill(p, SIGCONT);
  waitpid(p, NULL, 0);
  close(out);
  close(in);
  tap(back_to_base(), "chaos: the stopped tenant, killed, is cleaned up");
}

/* ---- malformed first frames (every case refused with a reason) ---- */

/* A frame header (wire/proto.h) + payload into out; returns its length. */
static size_t frame(uint8_t *out, uint32_t magic, uint8_t ver, uint8_t kind, uint16_t flags,
                    uint32_t len, const void *p, size_t n) {
  uint32_t zero = 0;
  uint64_t id = 0;
  memcpy(out, &magic, 4);
  out[4] = ver;
  out[5] = kind;
  memcpy(out + 6, &flags, 2);
  memcpy(out + 8, &len, 4);
  memcpy(out + 12, &zero, 4);
  memcpy(out + 16, &id, 8);
  memcpy(out + 24, p, n);
  return 24 + n;
}

/* A HELLO payload with the given versions, name and token lengths (the
 * bytes of name/token are 'n'/'t'). */
static size_t hello_body(uint8_t *out, uint16_t vmin, uint16_t vmax, uint32_t nlen, uint32_t tlen) {
  size_t o = 0;
  uint32_t caps = 0;
  memcpy(out + o, &vmin, 2), o += 2;
  memcpy(out + o, &vmax, 2), o += 2;
  memset(out + o, 0, 4), o += 4;
  memcpy(out + o, &caps, 4), o += 4;
  memcpy(out + o, &nlen, 4), o += 4;
  memset(out + o, 'n', nlen < 100 ? nlen : 100), o += nlen < 100 ? nlen : 100;
  memcpy(out + o, &tlen, 4), o += 4;
  memset(out + o, 't', tlen < 400 ? tlen : 400), o += tlen < 400 ? tlen : 400;
  return o;
}

#define MAGIC WIRE__MAGIC
static void malformed_first_frames_are_refused(void) {
  static uint8_t f[2048], body[1024];
  static const char *names[] = {"HTTP request",       "zero header",          "oversized length",
                                "unknown flags",      "CALL before HELLO",    "truncated HELLO",
                                "empty name",         "name past its length", "unknown versions",
                                "token too long",     "frame version 0",      "zstd HELLO",
                                "unknown frame kind"};
  int closed = 0, cases = (int)(sizeof(names) / sizeof(names[0]));
  for (int i = 0; i < cases * 2; i++) {
    int c = i % cases, fd;
    size_t n = 0, b = hello_body(body, 1, 1, 4, 0);
    char src[32];
    switch (c) {
    case 0: n = (size_t)sprintf((char *)f, "GET / HTTP/1.0\r\n\r\n"); break;
    case 1: memset(f, 0, 24), n = 24; break;
    case 2: n = frame(f, MAGIC, 1, WIRE__K_HELLO, 0, 1u << 20, body, b); break;
    case 3: n = frame(f, MAGIC, 1, WIRE__K_HELLO, 0x80, (uint32_t)b, body, b); break;
    case 4: n = frame(f, MAGIC, 1, WIRE__K_CALL, 0, (uint32_t)b, body, b); break;
    case 5: n = frame(f, MAGIC, 1, WIRE__K_HELLO, 0, 10, body, 10); break;
    case 6: b = hello_body(body, 1, 1, 0, 0), n = frame(f, MAGIC, 1, 1, 0, (uint32_t)b, body, b); break;
    case 7: b = hello_body(body, 1, 1, 1000, 0), n = frame(f, MAGIC, 1, 1, 0, (uint32_t)b, body, b); break;
    case 8: b = hello_body(body, 90, 99, 4, 0), n = frame(f, MAGIC, 1, 1, 0, (uint32_t)b, body, b); break;
    case 9: b = hello_body(body, 1, 1, 4, 300), n = frame(f, MAGIC, 1, 1, 0, (uint32_t)b, body, b); break;
    case 10: n = frame(f, MAGIC, 0, WIRE__K_HELLO, 0, (uint32_t)b, body, b); break;
    case 11: n = frame(f, MAGIC, 1, WIRE__K_HELLO, 2, (uint32_t)b, body, b); break;
    default: n = frame(f, MAGIC, 1, 99, 0, (uint32_t)b, body, b);
    }
    snprintf(src, sizeof(src), "127.0.1.%d", c + 1);
    fd = i < cases ? chaos_tcp_raw(&D, src) : chaos_unix_raw(&D);
    if (fd >= 0 && send(fd, f, n, MSG_NOSIGNAL) >= 0 && chaos_closed_within(fd, 3000))
      closed++;
    else
      printf("# %s (%s) was not closed\n", names[c], i < cases ? "tcp" : "unix");
    if (fd >= 0)
      close(fd);
  }
  tap(closed == 2 * cases && chaos_alive(&D) && served(true, 5000),
      "chaos: %d malformed first frames over TCP and UNIX each closed (%d), daemon serves on",
      2 * cases, closed);
  tap(chaos_log_count(&D, "refused peer \"127.0.1.") >= cases,
      "finding 4: each malformed case from its own address is logged with its reason");
}

/* ---- finding 10: the operator's view ---- */

static char *run(const char *cmd) {
  static char out[65536];
  size_t n = 0;
  FILE *p = popen(cmd, "r");
  out[0] = 0;
  if (!p)
    return out;
  n = fread(out, 1, sizeof(out) - 1, p);
  out[n] = 0;
  pclose(p);
  return out;
}

/* One GET over HTTP/1.0 to --metrics-listen; the whole answer. */
static char *http_get(int port, const char *req) {
  static char out[65536];
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  size_t n = 0;
  ssize_t r;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  out[0] = 0;
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
      send(fd, req, strlen(req), MSG_NOSIGNAL) < 0) {
    if (fd >= 0)
      close(fd);
    return out;
  }
  while (n + 1 < sizeof(out) && (r = recv(fd, out + n, sizeof(out) - 1 - n, 0)) > 0)
    n += (size_t)r;
  out[n] = 0;
  close(fd);
  return out;
}

static int metrics_port(void) {
  char line[1024];
  int port = 0;
  FILE *f = fopen(D.log, "r");
  while (f && fgets(line, sizeof(line), f))
    if (strstr(line, "metrics at http://127.0.0.1:"))
      port = atoi(strstr(line, "127.0.0.1:") + 10);
  if (f)
    fclose(f);
  return port;
}

static void tallyctl_and_metrics_show_tenants(void) {
  char cmd[300], *o;
  int out = -1, out2 = -1, in = -1, in2 = -1, port = metrics_port();
  pid_t p = helper("alloc-wait", "lc-serve", &out, &in);
  pid_t p2 = helper("alloc-wait", "be-train", &out2, &in2);
  bool ready = helper_says(out, "ptr", 10000) && helper_says(out2, "ptr", 10000), st, me, ht, bad;
  snprintf(cmd, sizeof(cmd), "%s/hostd/tallyctl --socket %s.ctl status", B, D.sock);
  o = run(cmd);
  st = strstr(o, "lc-serve") && strstr(o, "be-train") && strstr(o, "latency-critical") &&
       strstr(o, "best-effort") && strstr(o, "shm") && strstr(o, "QUEUE") && strstr(o, "LC_P99");
  printf("# tallyctl status (recording device):\n");
  for (char *l = strtok(o, "\n"); l; l = strtok(NULL, "\n"))
    printf("#   %s\n", l);
  snprintf(cmd, sizeof(cmd), "%s/hostd/tallyctl --socket %s.ctl metrics", B, D.sock);
  o = run(cmd);
  me = strstr(o, "tally_tenants 2\n") && strstr(o, "tally_tenant_kernels_total{tenant=\"lc-serve\"") &&
       strstr(o, "tally_tenant_weight{tenant=\"be-train\"");
  o = http_get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  ht = strncmp(o, "HTTP/1.0 200", 12) == 0 && strstr(o, "tally_tenants 2\n");
  bad = strncmp(http_get(port, "POST /metrics HTTP/1.0\r\n\r\n"), "HTTP/1.0 405", 12) == 0 &&
        strncmp(http_get(port, "GET /x HTTP/1.0\r\n\r\n"), "HTTP/1.0 404", 12) == 0 &&
        strncmp(http_get(port, "\x01\x02 garbage\n\n"), "HTTP/1.0 400", 12) == 0;
  kill(p, SIGKILL);
  kill(p2, SIGKILL);
  waitpid(p, NULL, 0);
  waitpid(p2, NULL, 0);
  close(out), close(out2), close(in), close(in2);
  tap(ready && st, "finding 10: tallyctl status lists an LC and a BE tenant (name, class, "
      "transport, queue, LC latency columns)");
  tap(me && ht, "finding 10: tallyctl metrics and GET /metrics give the Prometheus text");
  tap(bad && chaos_alive(&D), "finding 10: /metrics answers 405/404/400 to other requests");
}

/* The latency-critical tenant's request latency (hostd/latency.c: first
 * launch received to the reply of the synchronising call): 10 requests of
 * three launches 3 ms apart and a synchronisation each show a p50 of about
 * 6 ms (a per-call measure would show microseconds), and the
 * scheduler's GPU time and weight are shown for both tenants. */
static void lc_request_latency_and_gpu_time_are_shown(void) {
  char cmd[300], *o, *line;
  int out = -1, out2 = -1, in = -1, in2 = -1;
  long p50 = -1, p99 = -1;
  bool gpu_lc = false, gpu_be = false, metric;
  pid_t p = helper("lc-requests", "lc-req", &out, &in);
  pid_t p2 = helper("alloc-wait", "be-idle", &out2, &in2);
  bool ready = helper_says(out, "done", 10000) && helper_says(out2, "ptr", 10000);
  snprintf(cmd, sizeof(cmd), "%s/hostd/tallyctl --socket %s.ctl status", B, D.sock);
  o = run(cmd);
  for (line = strtok(o, "\n"); line; line = strtok(NULL, "\n")) {
    char gpu[32] = "", weight[16] = "", l50[32] = "", l99[32] = "";
    printf("#   %s\n", line);
    /* ID NAME PEER(2-4 words) CLASS WEIGHT TRANSPORT SINCE DEVMEM KERNELS GPUTIME QUEUE P50 P99 */
    if (strstr(line, "lc-req") || strstr(line, "be-idle")) {
      const char *c = strstr(line, strstr(line, "lc-req") ? "latency-critical" : "best-effort");
      if (sscanf(c, "%*s %15s %*s %*s %*s %*s %31s %*s %31s %31s", weight, gpu, l50, l99) != 4)
        continue;
      if (strstr(line, "lc-req")) {
        gpu_lc = strcmp(gpu, "-") != 0 && strcmp(weight, "1") == 0;
        p50 = atol(l50), p99 = atol(l99);
      } else {
        gpu_be = strcmp(gpu, "0ms") == 0 && strcmp(weight, "3") == 0;
      }
    }
  }
  snprintf(cmd, sizeof(cmd), "%s/hostd/tallyctl --socket %s.ctl metrics", B, D.sock);
  o = run(cmd);
  metric = strstr(o, "tally_lc_request_latency_microseconds{tenant=\"lc-req\",quantile=\"0.5\"}") &&
           strstr(o, "tally_tenant_gpu_seconds_total{tenant=\"be-idle\"");
  kill(p, SIGKILL);
  kill(p2, SIGKILL);
  waitpid(p, NULL, 0);
  waitpid(p2, NULL, 0);
  close(out), close(out2), close(in), close(in2);
  tap(ready && metric && p50 >= 5000 && p99 >= p50 && p99 < 1000000,
      "finding 10: LC request latency over the last minute: p50 %ld us, p99 %ld us (>= 5000; "
      "tallyd sees the first launch a little after the guest sent it), also in /metrics",
      p50, p99);
  tap(ready && gpu_lc && gpu_be, "finding 10: GPU time and weight (--tenant-weight "
      "best-effort=3) shown for the LC and the BE tenant");
  tap(back_to_base(), "finding 10: both tenants gone");
}

/* A scrape connection that never sends its request is closed by the
 * responder's deadline, and 100 of them leave no descriptor behind. */
static void metrics_slowloris_is_bounded(void) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)metrics_port())};
  int fds[100], n = 0, closed = 0;
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  for (int i = 0; i < 100; i++) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        send(fd, "GET /met", 8, MSG_NOSIGNAL) == 8)
      fds[n++] = fd;
    else if (fd >= 0)
      close(fd);
  }
  for (int i = 0; i < n; i++) {
    closed += chaos_closed_within(fds[i], 6000);
    close(fds[i]);
  }
  tap(n == 100 && closed == 100 && back_to_base(),
      "chaos: 100 stalled /metrics requests are all closed (deadline or connection cap)");
}

/* ---- findings 2, 7, 8: safe defaults, each a short-lived daemon ---- */

/* Runs tallyd-record with args (a shell fragment) under umask 000; its exit
 * status (124: still running after 3 s, then stopped) and stderr in err. */
static int tallyd_once(const char *args, char *err, size_t cap) {
  char cmd[2048], path[128];
  int st;
  FILE *f;
  size_t n;
  snprintf(path, sizeof(path), "%s/once.err", D.dir);
  snprintf(cmd, sizeof(cmd), "umask 000; timeout -s TERM 1 %s/hostd/tallyd-record %s 2>%s",
           B, args, path);
  st = system(cmd);
  err[0] = 0;
  if ((f = fopen(path, "r")) != NULL) {
    n = fread(err, 1, cap - 1, f);
    err[n] = 0;
    fclose(f);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_file(const char *path, const char *text, mode_t mode) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
  if (fd >= 0) {
    if (write(fd, text, strlen(text)) < 0)
      perror(path);
    fchmod(fd, mode);
    close(fd);
  }
}

static void authentication_cannot_be_silently_off(void) {
  static char err[8192];
  char args[1024], tok[128];
  int rc;
  rc = tallyd_once("--listen-unix '' --listen-tcp 0.0.0.0:0 --state-dir ''", err, sizeof(err));
  tap(rc == 2 && strstr(err, "--insecure-no-token"),
      "finding 2: a non-loopback --listen-tcp without a token is refused (exit %d)", rc);
  snprintf(tok, sizeof(tok), "%s/blank", D.dir);
  write_file(tok, " \n", 0600);
  snprintf(args, sizeof(args), "--listen-unix '' --listen-tcp 127.0.0.1:0 --state-dir '' "
           "--token-file %s", tok);
  rc = tallyd_once(args, err, sizeof(err));
  tap(rc == 1 && strstr(err, "empty or blank"), "finding 2: a blank token file is refused");
  snprintf(tok, sizeof(tok), "%s/open", D.dir);
  write_file(tok, "secret\n", 0644);
  snprintf(args, sizeof(args), "--listen-unix '' --listen-tcp 127.0.0.1:0 --state-dir '' "
           "--token-file %s", tok);
  rc = tallyd_once(args, err, sizeof(err));
  tap((rc == 0 || rc == 124) && strstr(err, "readable by group or others"),
      "finding 2: a token file readable by others is accepted with a warning");
  rc = tallyd_once("--listen-unix '' --listen-tcp 127.0.0.1:0 --state-dir ''", err, sizeof(err));
  tap((rc == 0 || rc == 124) && strstr(err, "without --token-file"),
      "finding 2: loopback TCP without a token starts with a warning");
}

/* The daemon under test was started with umask 000. */
static void socket_mode_and_state_folder_are_private(void) {
  static char err[8192];
  char args[600], state[160];
  struct stat ss = {0}, sc = {0}, sd = {0};
  char ctl[160];
  snprintf(ctl, sizeof(ctl), "%s.ctl", D.sock);
  stat(D.sock, &ss);
  stat(ctl, &sc);
  tap((ss.st_mode & 0777) == 0660 && (sc.st_mode & 0777) == 0660,
      "finding 7: under umask 000 the tenants' socket is %o and the control socket %o (0660)",
      (unsigned)(ss.st_mode & 0777), (unsigned)(sc.st_mode & 0777));
  snprintf(state, sizeof(state), "%s/open-state", D.dir);
  mkdir(state, 0755);
  chmod(state, 0755);
  snprintf(args, sizeof(args), "--listen-unix '' --listen-tcp 127.0.0.1:0 --state-dir %s", state);
  tallyd_once(args, err, sizeof(err));
  stat(state, &sd);
  tap((sd.st_mode & 0777) == 0700, "finding 7: an existing 0755 state folder is made 0700 (%o)",
      (unsigned)(sd.st_mode & 0777));
}

static void missing_socket_folder_is_named(void) {
  static char err[8192];
  int rc = tallyd_once("--listen-unix /nonexistent-tally-dir/t.sock --state-dir ''", err,
                       sizeof(err));
  tap(rc == 1 && strstr(err, "folder /nonexistent-tally-dir does not exist"),
      "finding 8: --listen-unix in a missing folder says the folder does not exist (exit %d)", rc);
}

/* Every command's --help and --version: stdout, exit 0 (GNU). */
static void every_command_helps_on_stdout(void) {
  static const char *cmds[] = {"guestlib/tally-run", "hostd/tallyd-record", "hostd/tallyd",
                               "hostd/tallyctl", "sim/tally-sim", "sim/tally-pairs",
                               "rewrite/tally-ptx"};
  int good = 0;
  for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
    for (int v = 0; v < 2; v++) {
      char cmd[512];
      snprintf(cmd, sizeof(cmd), "%s/%s %s 2>/dev/null | grep -q .", B, cmds[i],
               v ? "--version" : "--help");
      int st = system(cmd);
      snprintf(cmd, sizeof(cmd), "%s/%s %s >/dev/null 2>&1", B, cmds[i], v ? "--version" : "--help");
      if (st == 0 && system(cmd) == 0)
        good++;
      else
        printf("# %s %s: not on stdout with exit 0\n", cmds[i], v ? "--version" : "--help");
    }
  }
  tap(good == 14, "finding 9: tally-run, tallyd (both backends), tallyctl, tally-sim, "
      "tally-pairs, tally-ptx --help and --version print to stdout and exit 0");
}

int main(int argc, char **argv) {
  const char *extra[] = {"--handshake-ms", "1000", "--max-halfopen", "64",
                         "--max-halfopen-per-peer", "16", "--max-tenants", "100",
                         "--tenant-upload", "4M", "--modcache-mem", "2M", "--modcache-disk", "3M",
                         "--tenant-hostfns", "8", "--tenant-weight", "best-effort=3",
                         "--metrics-listen", "127.0.0.1:0", NULL};
  char bin[256];
  (void)argc, (void)argv;
  signal(SIGPIPE, SIG_IGN);
  if (getenv("TALLY_BUILDDIR"))
    B = getenv("TALLY_BUILDDIR");
  snprintf(bin, sizeof(bin), "%s/hostd/tallyd-record", B);
  printf("1..37\n");
  umask(0);
  if (chaos_start(&D, bin, extra) != 0) {
    printf("Bail out! tallyd-record did not start (%s)\n", D.log);
    return 1;
  }
  umask(022);
  fd_base = chaos_fds(D.pid);
  rss_base = chaos_rss_kb(D.pid);
  socket_mode_and_state_folder_are_private();
  halfopen_flood_sheds_oldest_and_serves_good_tenants();
  slowloris_hello_closed_at_deadline();
  token_of_protocol_maximum_works_and_prefix_is_refused();
  refusals_logged_once_per_peer_with_reason();
  tenant_name_cannot_forge_log_lines();
  module_uploads_and_cache_are_bounded();
  tenant_churn_leaves_no_trace();
  sixty_four_concurrent_tenants_are_served();
  tenant_cap_says_retry();
  tenants_killed_at_random_points_are_cleaned_up();
  stopped_tenant_does_not_stall_others();
  pending_host_functions_are_bounded();
  malformed_first_frames_are_refused();
  tallyctl_and_metrics_show_tenants();
  lc_request_latency_and_gpu_time_are_shown();
  metrics_slowloris_is_bounded();
  authentication_cannot_be_silently_off();
  missing_socket_folder_is_named();
  every_command_helps_on_stdout();
  tap(chaos_alive(&D) && back_to_base(), "chaos: daemon up, descriptors at baseline (%d of %d)",
      chaos_fds(D.pid), fd_base);
  if (getenv("CHAOS_DEBUG")) {
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "awk '/^[0-9a-f]+-/{m=$1\" \"$6} /^Rss:/{if ($2>500) print \"# \"$2\" kB \"m}' /proc/%d/smaps; grep -E 'Rss|Threads' /proc/%d/status | sed 's/^/# /'", (int)D.pid, (int)D.pid);
    if (system(cmd) != 0)
      printf("# no smaps\n");
  }
  tap_memory(chaos_rss_kb(D.pid) - rss_base, 8 * 1024,
             "chaos: daemon memory back near its baseline after everything");
  tap(chaos_stop(&D) == 0, "chaos: SIGTERM ends the daemon with status 0");
  return n_fail ? 1 : 0;
}
