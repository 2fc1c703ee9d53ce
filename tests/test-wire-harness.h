/* test-wire-harness.h: a wire_server on its own loop thread, for the wire
 * tests and wire-bench.  A CALL starting with 'X' makes the daemon close the
 * tenant with -EPROTO and a reason; 'Z' + u64 n answers n zero bytes; 'E'
 * answers 1 byte whatever the request size.
 *
 * harness_start() runs a server (UNIX socket for shm and/or TCP on an
 * ephemeral port) on a private uv loop in a thread.  Its on_msg answers each
 * CALL with the request bytes (echo) unless the first byte of the request is
 * 'W': then a worker thread answers through wire_tenant_reply_mt, or 'C':
 * through wire_tenant_reply_mt_copy, overwriting its buffer right after.  POSTs are
 * counted and their per-thread sequence checked: a post body starting with
 * "S" u32 thread u32 seq must have seq = previous + 1 for that thread.
 * A descriptor passed with wire_conn_send_fd gets "tag <tag>" written into
 * it and closed; on_fd records the POST count it saw and answers 7.  A
 * tenant named "later" is refused with -EAGAIN ("come back later").  A
 * tenant named "noted" is published the word 7 from on_connect; 'N' + u32
 * publishes that word (wire_tenant_note) before the echo; note_rc keeps
 * the last wire_tenant_note status.
 * Everything the tests read is atomic or read after harness_stop().
 */
#ifndef TALLY_TEST_WIRE_HARNESS_H
#define TALLY_TEST_WIRE_HARNESS_H

#include "wire/wire.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#define H_THREADS 64

typedef struct harness {
  uv_loop_t loop;
  uv_async_t stop;
  wire_server_t *s;
  pthread_t th;
  wire_server_opts_t opts;
  char path[108];
  char url_shm[120];
  char url_tcp[64];
  _Atomic int connects, closes, posts, calls, order_errors, blobs_put;
  _Atomic int last_close_status;
  _Atomic int note_rc; /* the last wire_tenant_note status */
  _Atomic int fds, fd_posts_seen; /* on_fd calls; posts counted at the last */
  _Atomic int rx_bad; /* messages whose rx_ns was 0, in the future or over 5 s old */
  char last_why[640];             /* written on the loop thread before closes++ */
  uint32_t next_seq[H_THREADS];
  _Atomic uint64_t post_bytes;
  _Atomic uint64_t blob_have; /* id the daemon claims to hold */
  bool pause_posts;           /* pause on each POST, resume from a thread */
  _Atomic int pause_violations;
  _Atomic int paused_now;
  wire_tenant_t *kept; /* tenant "keep": a ref held for the test */
  uint8_t *zeros;      /* 'Z' replies (loop thread) */
  size_t zcap;
} harness;

typedef struct h_work {
  wire_tenant_t *t;
  uint64_t id;
  void *buf;
  size_t len;
  harness *h;
  bool resume;
  bool copy; /* 'C': wire_tenant_reply_mt_copy, the buffer stays ours */
} h_work;

static void *h_worker(void *arg) {
  h_work *w = arg;
  if (w->resume) {
    /* The paused payload must still be readable and intact. */
    const uint8_t *p = w->buf;
    size_t i;
    for (i = 0; i < w->len; i++)
      if (p[i] != (uint8_t)(i * 7))
        atomic_fetch_add(&w->h->pause_violations, 1);
    atomic_store(&w->h->paused_now, 0);
    wire_tenant_resume(w->t);
  } else if (w->copy) {
    wire_tenant_reply_mt_copy(w->t, w->id, w->buf, w->len);
    memset(w->buf, 0xee, w->len); /* what was sent must not change */
    free(w->buf);
  } else {
    wire_tenant_reply_mt(w->t, w->id, w->buf, w->len);
  }
  wire_tenant_unref(w->t);
  free(w);
  return NULL;
}

static void h_spawn(h_work *w) {
  pthread_t th;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&th, &a, h_worker, w) != 0)
    abort(); /* test infrastructure: no threads, no test */
  pthread_attr_destroy(&a);
}

static int h_on_connect(wire_server_t *s, wire_tenant_t *t, const wire_tenant_info_t *info,
                        char *why, size_t why_len) {
  harness *h = wire_server_data(s);
  if (strcmp(info->name, "refuse-me") == 0) {
    snprintf(why, why_len, "tenant name refuse-me is not welcome");
    return -EPERM;
  }
  if (strcmp(info->name, "later") == 0) {
    snprintf(why, why_len, "daemon is restarting, come back later");
    return -EAGAIN;
  }
  if (strcmp(info->name, "noted") == 0)
    atomic_store(&h->note_rc, wire_tenant_note(t, 7));
  if (strcmp(info->name, "keep") == 0 && h->kept == NULL) {
    wire_tenant_ref(t);
    h->kept = t;
  }
  atomic_fetch_add(&h->connects, 1);
  return 0;
}

/* A post "S" th seq must follow th's previous one (order_errors counts
 * those that do not).  One thread at a time per tenant: on_msg's, or the
 * direct reader's (test-wire-direct.c), which the ring's ownership orders. */
static void harness_check_seq(harness *h, const wire_msg_t *m) {
  uint32_t th, seq;
  if (m->len < 9 || m->data[0] != 'S')
    return;
  memcpy(&th, m->data + 1, 4);
  memcpy(&seq, m->data + 5, 4);
  if (th < H_THREADS) {
    if (seq != h->next_seq[th])
      atomic_fetch_add(&h->order_errors, 1);
    h->next_seq[th] = seq + 1;
  }
}

/* CLOCK_MONOTONIC in ns, the wire's clock. */
static inline uint64_t harness_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void h_on_msg(wire_server_t *s, wire_tenant_t *t, const wire_msg_t *m) {
  harness *h = wire_server_data(s);
  uint64_t now = harness_now_ns();
  if (m->rx_ns == 0 || m->rx_ns > now || now - m->rx_ns > 5000000000u)
    atomic_fetch_add(&h->rx_bad, 1);
  if (atomic_load(&h->paused_now))
    atomic_fetch_add(&h->pause_violations, 1); /* delivered while paused */
  if (m->kind == WIRE_MSG_POST) {
    /* Single writer (the loop thread): relaxed load + store, no locked
     * read-modify-write per post (wire-bench's 4-thread post figure is
     * bound by how fast this consumer runs). */
    atomic_store_explicit(&h->posts, atomic_load_explicit(&h->posts, memory_order_relaxed) + 1,
                          memory_order_release);
    atomic_store_explicit(&h->post_bytes,
                          atomic_load_explicit(&h->post_bytes, memory_order_relaxed) + m->len,
                          memory_order_relaxed);
    harness_check_seq(h, m);
    if (h->pause_posts && m->len > 0 && m->data[0] == 'P') {
      h_work *w = calloc(1, sizeof(*w));
      w->t = t;
      w->h = h;
      w->buf = (void *)(m->data + 1);
      w->len = m->len - 1;
      w->resume = true;
      wire_tenant_ref(t);
      wire_tenant_pause(t);
      atomic_store(&h->paused_now, 1);
      h_spawn(w);
    }
    return;
  }
  atomic_fetch_add(&h->calls, 1);
  if (m->len > 0 && (m->data[0] == 'W' || m->data[0] == 'C')) {
    h_work *w = calloc(1, sizeof(*w));
    w->copy = m->data[0] == 'C';
    w->t = t;
    w->id = m->id;
    w->len = m->len;
    w->buf = malloc(m->len);
    memcpy(w->buf, m->data, m->len);
    w->h = h;
    wire_tenant_ref(t);
    h_spawn(w);
    return;
  }
  if (m->len > 0 && m->data[0] == 'Z') {
    /* Reply with (u64 size) zero bytes: bulk daemon -> guest. */
    uint64_t n = 0;
    struct iovec v;
    memcpy(&n, m->data + 1, m->len >= 9 ? 8 : 0);
    if (n > h->zcap) { /* kept: a fresh buffer per reply would time calloc */
      free(h->zeros);
      h->zeros = calloc(1, n);
      h->zcap = h->zeros ? n : 0;
    }
    v.iov_base = h->zeros;
    v.iov_len = n <= h->zcap ? n : 0;
    wire_tenant_reply(t, m->id, &v, 1);
    return;
  }
  if (m->len == 5 && m->data[0] == 'N') {
    uint32_t word;
    memcpy(&word, m->data + 1, 4);
    atomic_store(&h->note_rc, wire_tenant_note(t, word)); /* then echoed */
  }
  if (m->len > 0 && m->data[0] == 'X') {
    /* The daemon's verdict on a bad request: close with a reason. */
    wire_tenant_close(t, -EPROTO, "request X is malformed (test)");
    return;
  }
  if (m->len > 0 && m->data[0] == 'E') {
    /* Tiny reply whatever the request size: bulk guest -> daemon. */
    struct iovec v = {(void *)m->data, 1};
    wire_tenant_reply(t, m->id, &v, 1);
    return;
  }
  {
    struct iovec v = {(void *)m->data, m->len};
    wire_tenant_reply(t, m->id, &v, 1);
  }
}

static void h_on_close(wire_server_t *s, wire_tenant_t *t, int status, const char *why) {
  harness *h = wire_server_data(s);
  atomic_store(&h->last_close_status, status);
  snprintf(h->last_why, sizeof(h->last_why), "%s", why ? why : "");
  atomic_fetch_add(&h->closes, 1);
}

static bool h_blob_has(wire_server_t *s, wire_tenant_t *t, uint64_t id) {
  harness *h = wire_server_data(s);
  return atomic_load(&h->blob_have) == id;
}

static int h_blob_put(wire_server_t *s, wire_tenant_t *t, uint64_t id, const void *d, size_t n) {
  harness *h = wire_server_data(s);
  atomic_store(&h->blob_have, id);
  atomic_fetch_add(&h->blobs_put, 1);
  return 0;
}

static int h_on_fd(wire_server_t *s, wire_tenant_t *t, uint64_t tag, int fd) {
  harness *h = wire_server_data(s);
  char b[64];
  int n = snprintf(b, sizeof(b), "tag %llu", (unsigned long long)tag);
  ssize_t w = write(fd, b, (size_t)n);
  close(fd);
  atomic_store(&h->fd_posts_seen, atomic_load(&h->posts));
  atomic_fetch_add(&h->fds, 1);
  return w == n ? 7 : -EIO;
}

static void h_on_stop(uv_async_t *a) {
  harness *h = a->data;
  wire_server_close(h->s);
  uv_close((uv_handle_t *)&h->stop, NULL);
}

static void *h_loop_main(void *arg) {
  harness *h = arg;
  uv_run(&h->loop, UV_RUN_DEFAULT);
  return NULL;
}

static const wire_server_cb_t h_cb = {
    .on_connect = h_on_connect,
    .on_msg = h_on_msg,
    .on_close = h_on_close,
    .blob_has = h_blob_has,
    .blob_put = h_blob_put,
    .on_fd = h_on_fd,
};

/* Posts one ordered record as h_on_msg checks them: 'S', then the sending
 * thread th and its number seq (u32 each).  wire_conn_post's result. */
__attribute__((unused)) static int harness_post_seq(wire_conn_t *c, uint32_t th, uint32_t seq) {
  uint8_t body[9] = {'S'};
  struct iovec v = {body, sizeof(body)};
  memcpy(body + 1, &th, 4);
  memcpy(body + 5, &seq, 4);
  return wire_conn_post(c, &v, 1);
}

/* opts may be NULL; cb NULL = h_cb.  Returns 0 or a status. */
__attribute__((unused)) static int harness_start_cb(harness *h, const wire_server_opts_t *opts,
                                                    const wire_server_cb_t *cb) {
  static _Atomic int seq;
  int rc;

  memset(h, 0, sizeof(*h));
  if (opts)
    h->opts = *opts;
  snprintf(h->path, sizeof(h->path), "/tmp/tally-wire-test-%d-%d.sock", (int)getpid(),
           atomic_fetch_add(&seq, 1));
  h->opts.unix_path = h->path;
  if (h->opts.tcp_addr == NULL)
    h->opts.tcp_addr = "127.0.0.1:0";
  uv_loop_init(&h->loop);
  rc = wire_server_new(&h->s, &h->loop, &h->opts, cb ? cb : &h_cb, h);
  if (rc)
    return rc;
  uv_async_init(&h->loop, &h->stop, h_on_stop);
  h->stop.data = h;
  snprintf(h->url_shm, sizeof(h->url_shm), "unix:%s", h->path);
  snprintf(h->url_tcp, sizeof(h->url_tcp), "tcp://127.0.0.1:%d", wire_server_tcp_port(h->s));
  return pthread_create(&h->th, NULL, h_loop_main, h) ? -EAGAIN : 0;
}

__attribute__((unused)) static int harness_start(harness *h, const wire_server_opts_t *opts) {
  return harness_start_cb(h, opts, NULL);
}

__attribute__((unused)) static void harness_stop(harness *h) {
  uv_async_send(&h->stop);
  pthread_join(h->th, NULL);
  uv_loop_close(&h->loop);
  free(h->zeros);
  h->zeros = NULL;
}

#endif /* TALLY_TEST_WIRE_HARNESS_H */
