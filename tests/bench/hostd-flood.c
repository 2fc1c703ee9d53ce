/* hostd-flood.c: 1,000 half-open connections at 1 byte/s against
 * tallyd-record while 20 authenticated tenants connect and run; prints how
 * many were served, their connect time (p50/p99/max: wire_conn_open plus
 * the first call answered) and the daemon's descriptors before, at the
 * peak and after.
 *
 * usage: cd BUILDDIR && tests/bench/hostd-flood [SECONDS]   (default 10)
 * The flood comes from 10 loopback addresses (127.0.2.1-10, 100 each); a
 * connection the daemon sheds is reopened at the next tick, as a real
 * flooder would.  The daemon runs with its defaults (handshake deadline,
 * half-open caps).  Extra daemon flags: TALLYD_ARGS (space-separated);
 * TALLYD_NOFILE=256 runs the daemon under that descriptor limit;
 * HOSTD_FLOOD_CONNS=N floods with N connections instead (0: the baseline).
 */
#include "tests/hostd-chaos.h"

#include <poll.h>
#include <pthread.h>


#define FLOOD_MAX 1000
#define GOOD      20

static int FLOOD = FLOOD_MAX; /* HOSTD_FLOOD_CONNS=0: the same run without a flood */

static chaos_daemon_t D;
static double connect_ms[GOOD];
static int good_ok[GOOD], good_tries[GOOD];

/* One authenticated tenant: connect (retrying a shed connect for up to
 * 10 s), first call, then 100 more calls, close. */
static void *good(void *arg) {
  int i = (int)(intptr_t)arg, rc;
  wire_conn_t *c = NULL;
  uint64_t t0 = chaos_now_ms();
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do
    rc = chaos_tenant(&D, true, "good", D.token, &c), good_tries[i]++;
  while (rc != 0 && chaos_now_ms() - t0 < 10000);
  if (rc == 0)
    rc = chaos_call_hello(c, "flood-good", 0);
  clock_gettime(CLOCK_MONOTONIC, &b);
  connect_ms[i] = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
  for (int k = 0; rc == 0 && k < 100; k++)
    rc = chaos_call_hello(c, "flood-good", 0);
  good_ok[i] = rc == 0;
  wire_conn_close(c);
  return NULL;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* One tick: every open flood connection sends its next HELLO byte;
 * closed ones (shed, or past the deadline) are reopened.  Returns how
 * many are open. */
static int flood_tick(int *fds, size_t *sent, const wire_buf_t *h, unsigned long *reopened) {
  int open = 0;
  for (int i = 0; i < FLOOD; i++) {
    char src[32], junk[256];
    if (fds[i] >= 0 && (recv(fds[i], junk, sizeof(junk), MSG_DONTWAIT) == 0 ||
                        send(fds[i], h->data + sent[i] % (h->len - 1), 1,
                             MSG_NOSIGNAL | MSG_DONTWAIT) != 1)) {
      close(fds[i]);
      fds[i] = -1;
    } else if (fds[i] >= 0) {
      sent[i]++;
    }
    if (fds[i] < 0) {
      snprintf(src, sizeof(src), "127.0.2.%d", 1 + i % 10);
      fds[i] = chaos_tcp_raw(&D, src);
      sent[i] = 0;
      *reopened += fds[i] >= 0;
    }
    open += fds[i] >= 0;
  }
  return open;
}

int main(int argc, char **argv) {
  static int fds[FLOOD_MAX];
  static size_t sent[FLOOD_MAX];
  const char *extra[32] = {NULL};
  char *args = getenv("TALLYD_ARGS") ? strdup(getenv("TALLYD_ARGS")) : NULL;
  int secs = argc > 1 ? atoi(argv[1]) : 10, base, peak = 0, after, served = 0, n = 0, open = 0;
  int retries = 0;
  unsigned long reopened = 0;
  pthread_t th[GOOD];
  wire_buf_t h;
  uint64_t end;
  if (getenv("HOSTD_FLOOD_CONNS") && atoi(getenv("HOSTD_FLOOD_CONNS")) >= 0 &&
      atoi(getenv("HOSTD_FLOOD_CONNS")) <= FLOOD_MAX)
    FLOOD = atoi(getenv("HOSTD_FLOOD_CONNS"));
  for (char *t = args ? strtok(args, " ") : NULL; t && n < 31; t = strtok(NULL, " "))
    extra[n++] = t;
  signal(SIGPIPE, SIG_IGN);
  if (chaos_start(&D, "hostd/tallyd-record", extra) != 0) {
    fprintf(stderr, "hostd-flood: tallyd-record did not start (run from the build folder)\n");
    return 1;
  }
  base = chaos_fds(D.pid);
  chaos_hello(&h, "flood", "not-the-token");
  for (int i = 0; i < FLOOD; i++)
    fds[i] = -1;
  end = chaos_now_ms() + (uint64_t)secs * 1000;
  for (int tick = 0; chaos_now_ms() < end; tick++) {
    open = flood_tick(fds, sent, &h, &reopened);
    if (tick == 1) /* the flood is in place: the good tenants come */
      for (int i = 0; i < GOOD; i++)
        pthread_create(&th[i], NULL, good, (void *)(intptr_t)i);
    for (int k = 0; k < 10; k++) { /* 1 byte/s each, descriptors sampled every 100 ms */
      int f = chaos_fds(D.pid);
      peak = f > peak ? f : peak;
      poll(NULL, 0, 100);
    }
  }
  for (int i = 0; i < GOOD; i++) {
    pthread_join(th[i], NULL);
    served += good_ok[i];
    retries += good_tries[i] - 1;
  }
  for (int i = 0; i < FLOOD; i++)
    if (fds[i] >= 0)
      close(fds[i]);
  for (int k = 0; k < 100 && chaos_fds(D.pid) > base; k++)
    poll(NULL, 0, 50);
  after = chaos_fds(D.pid);
  qsort(connect_ms, GOOD, sizeof(double), cmp);
  printf("flood: %d half-open connections at 1 byte/s for %d s (%d open at the end, %lu "
         "reopened after the daemon closed them)\n", FLOOD, secs, open, reopened);
  printf("good tenants served: %d of %d (%d connects retried); connect + first call: p50 %.2f ms, "
         "p99 %.2f ms, max %.2f ms\n", served, GOOD, retries, connect_ms[GOOD / 2],
         connect_ms[(GOOD * 99 + 99) / 100 - 1], connect_ms[GOOD - 1]);
  printf("daemon descriptors: baseline %d, peak %d, after %d\n", base, peak, after);
  wire_buf_close(&h);
  chaos_stop(&D);
  free(args);
  return served == GOOD && after <= base ? 0 : 1;
}
