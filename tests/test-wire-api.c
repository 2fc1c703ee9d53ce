/* test-wire-api.c: wire API additions made after it was declared stable:
 * descriptor passing, the "come back later" refusal,
 * listening sockets inherited across exec and the daemon's notes.
 *
 * Against the harness daemon of test-wire-harness.h: a descriptor sent with
 * wire_conn_send_fd must be usable by the daemon (it writes through it and
 * the guest reads the bytes back), arrive after every earlier post, fail
 * cleanly over TCP, with a bad fd or without an on_fd callback; -EAGAIN from
 * on_connect must reach the guest with its reason; a server given an already
 * listening socket must accept on it, including a guest that connected
 * while no server was running but the socket stayed open.  No sleeps: each
 * step waits on a call or on poll().
 */
#include "tests/test-wire-harness.h"
#include "wire/wire-int.h" /* wire__tcp_direct_cut */

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static int open_url(wire_conn_t **c, const char *url, const char *tenant, char *err, size_t n) {
  wire_hello_t hello = {.tenant = tenant, .prio = WIRE_PRIO_BEST_EFFORT};
  wire_conn_opts_t o = {.no_thread = true};
  return wire_conn_open(c, url, &hello, &o, err, n);
}

static wire_conn_t *must_open(const char *url, const char *tenant) {
  wire_conn_t *c = NULL;
  char err[256];
  int rc = open_url(&c, url, tenant, err, sizeof(err));
  if (rc)
    fail_msg("wire_conn_open(%s): %s (%s)", url, wire_strerror(rc), err);
  return c;
}

static void echo_works(wire_conn_t *c) {
  char out[16] = {0};
  struct iovec req = {"ping", 4}, rep = {out, sizeof(out)};
  size_t n = 0;
  assert_int_equal(wire_conn_call(c, &req, 1, &rep, 1, &n), 0);
  assert_int_equal(n, 4);
  assert_memory_equal(out, "ping", 4);
}

/* ---------------------------------------------------------- fd passing */

static void sent_fd_is_written_by_the_daemon_and_read_back_by_the_guest(void **st) {
  harness h;
  wire_conn_t *c;
  int p[2];
  char b[64] = {0};
  ssize_t n;

  assert_int_equal(harness_start(&h, NULL), 0);
  c = must_open(h.url_shm, "fd");
  assert_int_equal(pipe(p), 0);
  assert_int_equal(wire_conn_send_fd(c, p[1], 424242), 7); /* on_fd's status */
  close(p[1]); /* the daemon closed its duplicate: EOF after its bytes */
  n = read(p[0], b, sizeof(b) - 1);
  assert_int_equal(n, 10);
  assert_string_equal(b, "tag 424242");
  assert_int_equal(read(p[0], b, sizeof(b)), 0);
  close(p[0]);
  assert_int_equal(atomic_load(&h.fds), 1);
  echo_works(c); /* the channel goes on after an FD message */
  wire_conn_close(c);
  harness_stop(&h);
}

typedef struct poster {
  wire_conn_t *c;
  uint32_t th;
} poster;

static void *post_100(void *arg) {
  poster *p = arg;
  uint32_t i;
  for (i = 0; i < 100; i++)
    if (harness_post_seq(p->c, p->th, i) != 0)
      return (void *)1;
  return NULL;
}

static void sent_fd_reaches_the_daemon_after_every_earlier_post(void **st) {
  harness h;
  wire_conn_t *c;
  pthread_t th[4];
  poster ps[4];
  void *r;
  int p[2], i;

  assert_int_equal(harness_start(&h, NULL), 0);
  c = must_open(h.url_shm, "fd-order");
  /* 4 threads queue 100 posts each (they sit in the batch: no call has
   * flushed them); the FD message must come after all 400. */
  for (i = 0; i < 4; i++) {
    ps[i] = (poster){c, (uint32_t)i};
    assert_int_equal(pthread_create(&th[i], NULL, post_100, &ps[i]), 0);
  }
  for (i = 0; i < 4; i++) {
    assert_int_equal(pthread_join(th[i], &r), 0);
    assert_null(r);
  }
  assert_int_equal(pipe(p), 0);
  assert_int_equal(wire_conn_send_fd(c, p[1], 1), 7);
  assert_int_equal(atomic_load(&h.fd_posts_seen), 400);
  close(p[0]);
  close(p[1]);
  wire_conn_close(c);
  harness_stop(&h);
  assert_int_equal(atomic_load(&h.order_errors), 0);
}

typedef struct fd_sender {
  wire_conn_t *c;
  int th;
  int bad;
} fd_sender;

/* Each descriptor must come back written with its own tag. */
static void *send_20_fds(void *arg) {
  fd_sender *f = arg;
  int i;
  for (i = 0; i < 20; i++) {
    uint64_t tag = (uint64_t)f->th * 1000 + (uint64_t)i;
    char want[64], got[64] = {0};
    int p[2], n;
    if (pipe(p) != 0) {
      f->bad++;
      continue;
    }
    n = snprintf(want, sizeof(want), "tag %llu", (unsigned long long)tag);
    if (wire_conn_send_fd(f->c, p[1], tag) != 7)
      f->bad++;
    close(p[1]);
    if (read(p[0], got, sizeof(got) - 1) != n || strcmp(got, want) != 0)
      f->bad++;
    close(p[0]);
  }
  return NULL;
}

static void fds_sent_from_eight_threads_pair_with_their_tags(void **st) {
  harness h;
  wire_conn_t *c;
  pthread_t th[8];
  fd_sender f[8];
  int i;

  assert_int_equal(harness_start(&h, NULL), 0);
  c = must_open(h.url_shm, "fd-threads");
  for (i = 0; i < 8; i++) {
    f[i] = (fd_sender){c, i, 0};
    assert_int_equal(pthread_create(&th[i], NULL, send_20_fds, &f[i]), 0);
  }
  for (i = 0; i < 8; i++) {
    assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_int_equal(f[i].bad, 0);
  }
  wire_conn_close(c);
  harness_stop(&h);
  assert_int_equal(atomic_load(&h.fds), 160);
}

static void send_fd_over_tcp_is_eopnotsupp(void **st) {
  harness h;
  wire_conn_t *c;

  assert_int_equal(harness_start(&h, NULL), 0);
  c = must_open(h.url_tcp, "fd-tcp");
  assert_int_equal(wire_conn_send_fd(c, 0, 1), -EOPNOTSUPP);
  echo_works(c);
  wire_conn_close(c);
  harness_stop(&h);
  assert_int_equal(atomic_load(&h.fds), 0);
}

static void send_fd_of_a_closed_descriptor_fails_and_the_connection_survives(void **st) {
  harness h;
  wire_conn_t *c;
  int p[2];

  assert_int_equal(harness_start(&h, NULL), 0);
  c = must_open(h.url_shm, "fd-bad");
  assert_int_equal(pipe(p), 0);
  close(p[0]);
  close(p[1]); /* p[1] is now a closed descriptor number */
  assert_int_equal(wire_conn_send_fd(c, p[1], 1), -EBADF);
  assert_int_equal(wire_conn_send_fd(c, -1, 1), -EBADF);
  echo_works(c);
  wire_conn_close(c);
  harness_stop(&h);
  assert_int_equal(atomic_load(&h.fds), 0);
}

static void send_fd_to_a_daemon_without_on_fd_is_eopnotsupp(void **st) {
  harness h;
  wire_server_cb_t cb = h_cb;
  wire_conn_t *c;
  int p[2];
  char b[8];

  cb.on_fd = NULL;
  assert_int_equal(harness_start_cb(&h, NULL, &cb), 0);
  c = must_open(h.url_shm, "fd-none");
  assert_int_equal(pipe(p), 0);
  assert_int_equal(wire_conn_send_fd(c, p[1], 1), -EOPNOTSUPP);
  close(p[1]);
  /* wire closed the daemon's copy: the pipe reads EOF, no writer is left. */
  assert_int_equal(read(p[0], b, sizeof(b)), 0);
  close(p[0]);
  echo_works(c);
  wire_conn_close(c);
  harness_stop(&h);
}

/* ------------------------------------- replies sent from worker threads */

typedef struct caller {
  wire_conn_t *c;
  int th;
  int bad;
} caller;

/* Alternates worker-thread replies ('W': wire_tenant_reply_mt, sent
 * directly into the ring on shm and written on the socket by the worker on
 * TCP; 'C': the same through wire_tenant_reply_mt_copy, whose buffer the
 * worker overwrites right after) with loop-thread replies (echo), each
 * carrying the thread and sequence, and checks every reply's bytes. */
static void *call_mixed(void *arg) {
  caller *k = arg;
  int i;
  for (i = 0; i < 200; i++) {
    char req[32], out[32];
    int n = snprintf(req, sizeof(req), "%c%d-%d", "eWC"[i % 3], k->th, i);
    struct iovec q = {req, (size_t)n}, r = {out, sizeof(out)};
    size_t got = 0;
    if (wire_conn_call(k->c, &q, 1, &r, 1, &got) != 0 || got != (size_t)n ||
        memcmp(out, req, (size_t)n) != 0)
      k->bad++;
  }
  return NULL;
}

static void replies_interleave_from_eight_threads(bool tcp) {
  harness h;
  wire_conn_t *c;
  pthread_t th[8];
  caller k[8];
  int i;

  assert_int_equal(harness_start(&h, NULL), 0);
  c = must_open(tcp ? h.url_tcp : h.url_shm, "mixed");
  for (i = 0; i < 8; i++) {
    k[i] = (caller){c, i, 0};
    assert_int_equal(pthread_create(&th[i], NULL, call_mixed, &k[i]), 0);
  }
  for (i = 0; i < 8; i++) {
    assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_int_equal(k[i].bad, 0);
  }
  wire_conn_close(c);
  harness_stop(&h);
  assert_int_equal(atomic_load(&h.calls), 8 * 200);
}

static void worker_and_loop_replies_interleave_from_eight_threads(void **st) {
  (void)st;
  replies_interleave_from_eight_threads(false);
}

static void worker_and_loop_replies_interleave_over_tcp(void **st) {
  (void)st;
  replies_interleave_from_eight_threads(true);
}

/* The same when every direct TCP reply is taken by the socket only in part
 * (cut after 5 bytes, inside its header): the rest is parked, the loop
 * writes it before anything else, and every reply still arrives whole. */
static void direct_replies_taken_in_part_over_tcp(void **st) {
  (void)st;
  atomic_store(&wire__tcp_direct_cut, 5);
  replies_interleave_from_eight_threads(true);
  atomic_store(&wire__tcp_direct_cut, 0);
}

/* ---------------------------------------------------------------- notes */

static uint32_t note_of(wire_conn_t *c) {
  uint32_t w = 0xdeadbeef;
  assert_int_equal(wire_conn_note(c, &w), 0);
  return w;
}

/* Publishes word through an 'N' call; its reply proves the note arrived. */
static void publish(harness *h, wire_conn_t *c, uint32_t word) {
  uint8_t req[5] = {'N'}, out[5];
  struct iovec q = {req, 5}, r = {out, 5};
  memcpy(req + 1, &word, 4);
  assert_int_equal(wire_conn_call(c, &q, 1, &r, 1, NULL), 0);
  assert_int_equal(atomic_load(&h->note_rc), 0);
}

/* A word published from on_connect follows the WELCOME; later words replace
 * it, each seen by the guest once the reply after it arrived; the same word
 * twice is fine; a tenant nothing was published to reads 0. */
static void notes(bool tcp) {
  harness h;
  wire_conn_t *c, *plain;
  uint32_t w;

  assert_int_equal(harness_start(&h, NULL), 0);
  c = must_open(tcp ? h.url_tcp : h.url_shm, "noted");
  plain = must_open(tcp ? h.url_tcp : h.url_shm, "plain");
  assert_int_equal(atomic_load(&h.note_rc), 0);
  echo_works(c);
  assert_int_equal(note_of(c), 7);
  publish(&h, c, 42);
  assert_int_equal(note_of(c), 42);
  publish(&h, c, 42);
  publish(&h, c, 0);
  assert_int_equal(note_of(c), 0);
  publish(&h, c, 0xffffffffu);
  assert_int_equal(note_of(c), 0xffffffffu);
  echo_works(plain);
  assert_int_equal(note_of(plain), 0);
  assert_int_equal(wire_conn_note(NULL, &w), -EINVAL);
  assert_int_equal(wire_conn_note(c, NULL), -EINVAL);
  wire_conn_close(plain);
  wire_conn_close(c);
  harness_stop(&h);
  assert_int_equal(atomic_load(&h.closes), 2);
}

static void daemon_notes_reach_the_guest_in_order_with_replies(void **st) {
  (void)st;
  notes(false);
}

static void daemon_notes_reach_the_guest_over_tcp(void **st) {
  (void)st;
  notes(true);
}

/* ------------------------------------------------------- -EAGAIN refusal */

static void eagain_refusal_reaches_the_guest_with_the_reason(void **st) {
  harness h;
  wire_conn_t *c = NULL;
  char err[256] = "";

  assert_int_equal(harness_start(&h, NULL), 0);
  assert_int_equal(open_url(&c, h.url_shm, "later", err, sizeof(err)), -EAGAIN);
  assert_null(c);
  assert_non_null(strstr(err, "come back later"));
  err[0] = 0;
  assert_int_equal(open_url(&c, h.url_tcp, "later", err, sizeof(err)), -EAGAIN);
  assert_non_null(strstr(err, "come back later"));
  /* Other refusals keep their WIRE_EREFUSED. */
  assert_int_equal(open_url(&c, h.url_shm, "refuse-me", err, sizeof(err)), WIRE_EREFUSED);
  harness_stop(&h);
}

/* ------------------------------------------------ inherited listen fds */

static int bound_unix_socket(char *path, size_t n) {
  static int seq;
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  snprintf(path, n, "/tmp/tally-wire-api-%d-%d.sock", (int)getpid(), seq++);
  unlink(path);
  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 16) != 0)
    fail_msg("cannot make a listening socket at %s: %s", path, strerror(errno));
  return fd;
}

static void server_adopting_a_unix_socket_accepts_on_it_and_keeps_the_path(void **st) {
  harness h;
  wire_server_opts_t o = {0};
  wire_conn_t *c;
  char path[108], url[120];
  int fd, ufd = 0, tfd = 0;
  struct stat sb;

  fd = bound_unix_socket(path, sizeof(path));
  o.unix_listen_fd = fd;
  assert_int_equal(harness_start(&h, &o), 0);
  snprintf(url, sizeof(url), "unix:%s", path);
  c = must_open(url, "adopted");
  echo_works(c);
  assert_int_equal(wire_server_listen_fds(h.s, &ufd, &tfd), 0);
  assert_int_equal(ufd, fd);
  assert_true(tfd > 0); /* the harness also binds TCP */
  wire_conn_close(c);
  harness_stop(&h);
  /* An adopted socket's path belongs to whoever bound it. */
  assert_int_equal(stat(path, &sb), 0);
  unlink(path);
}

typedef struct opener {
  char url[120];
  wire_conn_t *c;
  int rc;
  char err[256];
} opener;

static void *open_main(void *arg) {
  opener *o = arg;
  o->rc = open_url(&o->c, o->url, "queued", o->err, sizeof(o->err));
  return NULL;
}

static void guest_queued_while_no_server_ran_is_accepted_by_the_next_one(void **st) {
  harness h1, h2;
  wire_server_opts_t o = {0};
  opener op = {0};
  pthread_t th;
  char path[108];
  int fd, kept, ufd = -1;
  struct pollfd pfd;

  fd = bound_unix_socket(path, sizeof(path));
  o.unix_listen_fd = fd;
  assert_int_equal(harness_start(&h1, &o), 0);
  /* What a re-executing daemon does: keep the listening descriptor (here a
   * dup, since h1's close closes its own) and stop serving. */
  assert_int_equal(wire_server_listen_fds(h1.s, &ufd, NULL), 0);
  kept = fcntl(ufd, F_DUPFD_CLOEXEC, 0);
  assert_true(kept > 0);
  harness_stop(&h1);
  /* A guest connects now: the kernel queues it in the backlog. */
  snprintf(op.url, sizeof(op.url), "unix:%s", path);
  assert_int_equal(pthread_create(&th, NULL, open_main, &op), 0);
  pfd = (struct pollfd){.fd = kept, .events = POLLIN};
  assert_int_equal(poll(&pfd, 1, 10000), 1); /* a connection is pending */
  o.unix_listen_fd = kept;
  assert_int_equal(harness_start(&h2, &o), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  if (op.rc)
    fail_msg("queued guest: %s (%s)", wire_strerror(op.rc), op.err);
  echo_works(op.c);
  wire_conn_close(op.c);
  harness_stop(&h2);
  assert_int_equal(atomic_load(&h2.connects), 1);
  unlink(path);
}

static void server_adopting_a_tcp_socket_accepts_on_it(void **st) {
  harness h;
  wire_server_opts_t o = {0};
  struct sockaddr_in sa = {.sin_family = AF_INET};
  socklen_t sl = sizeof(sa);
  wire_conn_t *c;
  char url[64];
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), tfd = -1;

  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_true(fd >= 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(fd, 16), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
  o.tcp_listen_fd = fd;
  assert_int_equal(harness_start(&h, &o), 0);
  assert_int_equal(wire_server_tcp_port(h.s), ntohs(sa.sin_port));
  assert_int_equal(wire_server_listen_fds(h.s, NULL, &tfd), 0);
  assert_int_equal(tfd, fd);
  snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", ntohs(sa.sin_port));
  c = must_open(url, "adopted-tcp");
  echo_works(c);
  wire_conn_close(c);
  harness_stop(&h);
}

static void listen_fds_are_minus_one_when_not_listening(void **st) {
  uv_loop_t loop;
  wire_server_t *s = NULL;
  wire_server_opts_t o = {.tcp_addr = "127.0.0.1:0"};
  int ufd = 0, tfd = 0;

  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(wire_server_new(&s, &loop, &o, &h_cb, NULL), 0);
  assert_int_equal(wire_server_listen_fds(s, &ufd, &tfd), 0);
  assert_int_equal(ufd, -1);
  assert_true(tfd > 0);
  assert_int_equal(wire_server_listen_fds(NULL, &ufd, &tfd), -EINVAL);
  wire_server_close(s);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  /* Watchdog: a hang fails the program after 120 s instead of stalling
   * make check; the suite takes well under a second. */
  alarm(120);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sent_fd_is_written_by_the_daemon_and_read_back_by_the_guest),
      cmocka_unit_test(sent_fd_reaches_the_daemon_after_every_earlier_post),
      cmocka_unit_test(fds_sent_from_eight_threads_pair_with_their_tags),
      cmocka_unit_test(send_fd_over_tcp_is_eopnotsupp),
      cmocka_unit_test(send_fd_of_a_closed_descriptor_fails_and_the_connection_survives),
      cmocka_unit_test(send_fd_to_a_daemon_without_on_fd_is_eopnotsupp),
      cmocka_unit_test(worker_and_loop_replies_interleave_from_eight_threads),
      cmocka_unit_test(worker_and_loop_replies_interleave_over_tcp),
      cmocka_unit_test(direct_replies_taken_in_part_over_tcp),
      cmocka_unit_test(daemon_notes_reach_the_guest_in_order_with_replies),
      cmocka_unit_test(daemon_notes_reach_the_guest_over_tcp),
      cmocka_unit_test(eagain_refusal_reaches_the_guest_with_the_reason),
      cmocka_unit_test(server_adopting_a_unix_socket_accepts_on_it_and_keeps_the_path),
      cmocka_unit_test(guest_queued_while_no_server_ran_is_accepted_by_the_next_one),
      cmocka_unit_test(server_adopting_a_tcp_socket_accepts_on_it),
      cmocka_unit_test(listen_fds_are_minus_one_when_not_listening),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
