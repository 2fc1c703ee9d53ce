/* chan.c: the guest's one ordered channel to tallyd, over wire/.
 *
 * wire_conn carries everything: shared memory set up over the UNIX socket
 * for local tenants (the bulk of a copy goes through the shared data
 * region), TCP for remote ones, heartbeats, the handshake (name, priority
 * class, token) and content-id blob transfer.  This file only frames our
 * call protocol (wire/call.def) inside wire's opaque payloads:
 * fire-and-forget requests are wire posts (batched by wire and sent before
 * the next call), synchronous ones wire calls.  Requests are structs of the
 * call vocabulary (wire/call.def) encoded here by its one encoder: the fixed
 * part on the stack, tails sent from where the caller keeps them.  wire_conn is thread-safe, so
 * no lock is held here across a round trip.  A broken channel is final:
 * guest__g.lost is set, one line is logged, and every later call fails with
 * a CUresult from guest__cu_error (the daemon has freed what we owned).
 *
 * Connecting: a daemon that is restarting (tallyd re-executes itself after a
 * tenant's GPU fault) refuses with -EAGAIN, "come back
 * later".  The guest then retries with a short backoff for up to
 * TALLY_CONNECT_WAIT_MS (default 10000; 0 = no retry), logging one line.  An
 * unreachable daemon (ECONNREFUSED, ENOENT) still fails at once, unless the
 * daemon already said it was restarting: then losing the connection during
 * the handshake is the exec itself, and the guest keeps trying.
 */
#include "guestlib/guest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "wire/wire.h"

/* The connection; written once by guest__chan_open before guest__g.inited,
 * read by every call after (wire_conn is thread-safe). */
static wire_conn_t *conn;

#define ENV_CONNECT_WAIT "TALLY_CONNECT_WAIT_MS"
/* How long a restarting daemon is waited for: tallyd-record restarts in tens
 * of ms; the real tallyd after its grace period (2 s by default) plus cuInit. */
#define CONNECT_WAIT_DEFAULT_MS 10000
#define CONNECT_WAIT_MAX_MS     3600000 /* an hour: anything above is a typo */
/* Backoff between attempts: from 10 ms (a restart is often that quick)
 * doubling to 250 ms (at most 4 refused handshakes a second). */
/* With TALLY_CONNECT_WAIT_MS=0 (no retry) one attempt still gets this long
 * to connect and be answered (wire's own default). */
#define CONNECT_NO_WAIT_MS 5000
#define RETRY_FIRST_MS 10
#define RETRY_MAX_MS   250

/* A number from the environment in 0..max, else dflt (a bad value is
 * logged once, naming the variable). */
long guest__env_long(const char *name, long dflt, long max) {
  const char *v = getenv(name);
  char *end = NULL;
  long n;
  if (!v || !*v)
    return dflt;
  n = strtol(v, &end, 10);
  if (!end || *end || n < 0 || n > max) {
    guest__log("%s=%s: expected 0..%ld; using %ld", name, v, max, dflt);
    return dflt;
  }
  return n;
}

static long connect_wait_ms(void) {
  return guest__env_long(ENV_CONNECT_WAIT, CONNECT_WAIT_DEFAULT_MS, CONNECT_WAIT_MAX_MS);
}

/* The latency-critical tenant's side of the LC path (docs/lc-path.md): its
 * synchronising calls spin TALLY_LC_SPIN_US (default 50000 us with 4 or more
 * CPUs online, else the transport's rule) before they block, as the driver
 * spins in a synchronisation natively (without end): a wait that outlasts
 * the spin pays the thread's wake-up when its answer comes, and a 1000-kernel
 * chain's synchronisation (3 ms) outlasted the former 2 ms; and a post made
 * after a quiet spell goes out at once (TALLY_LC_POST_NOW=1) so a polling
 * daemon launches the kernel while the next is made; the burst behind it
 * follows within 20 us, one send for all (wire/guest.c).  TALLY_LC_POST_NOW=2 also sends the first
 * post after a call's reply at once over shared memory, so a launch + sync
 * overlaps the launch with the making of the sync; 3 (the default with 4 or
 * more CPUs; 0 below) also sends a post at once whenever the daemon has taken
 * everything sent before, so a burst's launches never wait in the batch while
 * the daemon has nothing left to launch.  Over TCP its socket asks for
 * SO_BUSY_POLL. */
#define LC_SPIN_DEFAULT_US 50000
#define LC_SPIN_MAX_US     1000000
#define LC_MIN_CPUS        4
static bool big_host(void) {
  return sysconf(_SC_NPROCESSORS_ONLN) >= LC_MIN_CPUS;
}

/* A reply spin in wire's terms (0 = the transport's rule, < 0 = never) from
 * the environment's NAME (us, 0 = never), else dflt_us on a host of 4 or
 * more CPUs, else the transport's rule. */
static int32_t reply_spin(const char *name, long dflt_us) {
  long spin = guest__env_long(name, big_host() ? dflt_us : -1, LC_SPIN_MAX_US);
  return spin < 0 ? 0 : spin == 0 ? -1 : (int32_t)spin;
}

int32_t guest__lc_spin_us(void) {
  return reply_spin("TALLY_LC_SPIN_US", LC_SPIN_DEFAULT_US);
}

static void lc_opts(wire_conn_opts_t *o) {
  o->spin_us = guest__lc_spin_us();
  long now = guest__env_long("TALLY_LC_POST_NOW", big_host() ? 3 : 0, 3);
  o->post_now = now >= 1;
  o->post_after_reply = now >= 2;
  o->post_when_drained = now >= 3;
  o->busy_poll_us = 50;
}

/* A best-effort tenant's reply waits spin TALLY_BE_SPIN_US (default 1000 us
 * with 4 or more CPUs online, else the transport's rule) before they block:
 * a framework that ends each step with a host function (XLA) waits for it in
 * such a wait, and a thread woken from sleep there cost a JAX jit step about
 * 85 us on the H200 (docs/lc-path.md, "A tenant at work").  The spin is the
 * tenant's own CPU and only while it waits for an answer. */
#define BE_SPIN_DEFAULT_US 1000
static void be_opts(wire_conn_opts_t *o) {
  o->spin_us = reply_spin("TALLY_BE_SPIN_US", BE_SPIN_DEFAULT_US);
}

/* TALLY_HOPS: the calls' hand-off times reach the file when the process
 * exits (nothing else closes the channel). */
static void hops_at_exit(void) {
  if (!guest__g.forked) /* a child's copy of the parent's hops is the parent's to write */
    wire_conn_hops_write(conn);
}

/* fork() of a connected tenant: the child shares the parent's socket and
 * shared ring, so one request from it would corrupt the parent's channel, and
 * its copy of the socket would keep the tenant alive in tallyd after the
 * parent exits.  The child gets neither: its copies are closed and unmapped
 * (wire_conn_forget: system calls only, as a child handler requires) and every
 * later call answers CUDA_ERROR_NOT_INITIALIZED, as the driver does in a
 * child.  Threads do not survive a fork, so nothing else of the channel runs
 * there.  A process forked before cuInit connects on its own. */
static void forked_child(void) {
  __atomic_store_n(&guest__g.forked, true, __ATOMIC_RELEASE);
  __atomic_store_n(&guest__g.lost, true, __ATOMIC_RELEASE);
  wire_conn_forget(conn);
}

static void watch_forks(void) {
  int rc = pthread_atfork(NULL, NULL, forked_child);
  if (rc != 0)
    guest__log("pthread_atfork: %s; a child of fork() that uses CUDA would share this "
               "process's channel", strerror(rc));
}

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int guest__chan_open(const char *url, const char *name, int latency_critical, const char *token,
                     char *err, size_t errlen) {
  wire_hello_t hello;
  long wait_ms = -1, start = now_ms(), delay = RETRY_FIRST_MS;
  long limit = connect_wait_ms(); /* the whole connect, hello call included */
  bool restarting = false; /* the daemon said -EAGAIN at least once */
  wire_conn_opts_t o;
  int rc;

  memset(&o, 0, sizeof(o));
  if (limit == 0)
    limit = CONNECT_NO_WAIT_MS;
  if (latency_critical)
    lc_opts(&o);
  else
    be_opts(&o);

  memset(&hello, 0, sizeof(hello));
  hello.tenant = name;
  hello.prio = latency_critical ? WIRE_PRIO_LATENCY_CRITICAL : WIRE_PRIO_BEST_EFFORT;
  hello.token = token;
  hello.caps = WIRE_CAP_ZSTD;
  for (;;) {
    long left;
    struct timespec ts;
    left = limit - (now_ms() - start);
    o.connect_timeout_ms = (uint32_t)(left > 0 ? left : 1);
    o.timed_ms = o.connect_timeout_ms; /* the HELLO call that follows (entry.c) */
    rc = wire_conn_open(&conn, url, &hello, &o, err, errlen);
    if (rc == 0) {
      static pthread_once_t once = PTHREAD_ONCE_INIT;
      (void)pthread_once(&once, watch_forks);
    }
    if (rc == 0 && getenv("TALLY_HOPS"))
      atexit(hops_at_exit);
    if (rc == 0 && guest__debug()) /* tests/gpu/tenant-churn reports the slowest */
      guest__log("connected to tallyd at %s in %ld ms", url, now_ms() - start);
    if (rc == 0 || (rc != -EAGAIN && (!restarting || rc == WIRE_ETOKEN || rc == WIRE_EVERSION ||
                                      rc == WIRE_EREFUSED || rc == -EINVAL)))
      return rc;
    if (wait_ms < 0) { /* the first refusal */
      wait_ms = connect_wait_ms();
      if (wait_ms > 0)
        guest__log("tallyd at %s asks us to come back later (%s); retrying for up to %ld ms (%s)",
                   url, err && err[0] ? err : wire_strerror(rc), wait_ms, ENV_CONNECT_WAIT);
    }
    restarting = true;
    left = wait_ms - (now_ms() - start);
    if (left <= 0)
      return rc;
    if (delay > left)
      delay = left;
    ts.tv_sec = delay / 1000;
    ts.tv_nsec = (delay % 1000) * 1000000;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
      ;
    delay = delay * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : delay * 2;
  }
}

void guest__chan_close(void) {
  wire_conn_close(conn);
  conn = NULL;
}

static int channel_lost(int status) {
  if (!__atomic_exchange_n(&guest__g.lost, true, __ATOMIC_ACQ_REL)) {
    const char *why = conn ? wire_conn_why(conn) : NULL; /* e.g. the daemon's close reason */
    guest__log("lost the channel to tallyd at %s (%s%s%s); CUDA calls fail from now on",
               guest__g.addr, wire_strerror(status), why && *why ? ": " : "", why ? why : "");
  }
  return status;
}

/* The iovec of request q of op: header, fixed part (into fixed), tails.
 * Returns the iovec count, or -EMSGSIZE / -EINVAL. */
static int req_iov(uint32_t op, uint32_t flags, const void *q, uint8_t *hdr, uint8_t *fixed,
                   struct iovec *iov) {
  const call_msg_t *m = call_req_msg(op);
  call_view_t tails[CALL_TAILS_MAX];
  size_t len;
  int n = 0, nt;

  if (!m)
    return -EINVAL;
  nt = call_encode(m, q, fixed, tails);
  if (nt < 0)
    return nt;
  len = call_msg_fixed(m);
  iov[n].iov_base = hdr;
  iov[n++].iov_len = CALL_HDR_LEN;
  if (len) {
    iov[n].iov_base = fixed;
    iov[n++].iov_len = len;
  }
  for (int i = 0; i < nt; i++)
    if (tails[i].len) {
      iov[n].iov_base = (void *)tails[i].p;
      iov[n++].iov_len = tails[i].len;
      len += tails[i].len;
    }
  if (len > CALL_MAX_LEN)
    return -EMSGSIZE;
  call_hdr_write(hdr, op, flags, (uint32_t)len);
  return n;
}

int guest__post(uint32_t op, const void *q) {
  uint8_t hdr[CALL_HDR_LEN], fixed[CALL_REQ_FIXED_MAX];
  struct iovec iov[2 + CALL_TAILS_MAX];
  int n, rc;

  if (!conn || guest__g.lost)
    return -ENOTCONN;
  if ((n = req_iov(op, CALL_ASYNC, q, hdr, fixed, iov)) < 0)
    return n;
  rc = wire_conn_post(conn, iov, n);
  /* A host function is how XLA learns a step ended (it then waits on the
   * host, making no call that would flush); a graph is a whole step of GPU
   * work: neither waits in the batch (call.def, CALL_M_PROMPT). */
  if (rc == 0 && (call_op_modes(op) & CALL_M_PROMPT))
    rc = wire_conn_flush(conn);
  return rc ? channel_lost(rc) : 0;
}

void guest__answered(void) {
  if (conn)
    wire_conn_answered(conn);
}

bool guest__hops_on(void) {
  return wire_conn_hops_on(conn);
}

void guest__hops_answered(uint64_t t_call, uint64_t t_sent, uint64_t t_woke) {
  wire_conn_hops_answered(conn, t_call, t_sent, t_woke);
}

CUresult guest__post_cu(uint32_t op, const void *q) {
  int rc = guest__post(op, q);
  return rc ? guest__cu_error(rc) : CUDA_SUCCESS;
}

int guest__call(uint32_t op, uint32_t flags, const void *q, CUresult *rc_out, void *out,
                size_t out_cap, size_t *out_len, void **out_alloc) {
  uint8_t hdr[CALL_HDR_LEN], fixed[CALL_REQ_FIXED_MAX], rep[CALL_REPLY_HDR_LEN];
  struct iovec iov[2 + CALL_TAILS_MAX], riov[2];
  call_reply_hdr_t rh;
  size_t got = 0;
  void *abuf = NULL;
  int n, rc;

  if (!conn || guest__g.lost)
    return -ENOTCONN;
  if ((n = req_iov(op, flags & ~CALL_ASYNC, q, hdr, fixed, iov)) < 0)
    return n;
  if (out_alloc) {
    rc = wire_conn_call_alloc(conn, iov, n, &abuf, &got);
    if (rc == 0 && got >= CALL_REPLY_HDR_LEN)
      memcpy(rep, abuf, CALL_REPLY_HDR_LEN);
  } else {
    riov[0].iov_base = rep;
    riov[0].iov_len = sizeof(rep);
    riov[1].iov_base = out;
    riov[1].iov_len = out_cap;
    rc = wire_conn_call(conn, iov, n, riov, out_cap ? 2 : 1, &got);
  }
  if (rc == -EMSGSIZE) /* the daemon answered more than the call allows */
    rc = -EPROTO;
  if (rc == 0 && got < CALL_REPLY_HDR_LEN)
    rc = -EPROTO;
  if (rc == 0) {
    call_reply_hdr_read(rep, &rh);
    if (rh.len != got - CALL_REPLY_HDR_LEN)
      rc = -EPROTO;
  }
  if (rc) {
    free(abuf);
    return channel_lost(rc);
  }
  if (out_alloc) {
    /* Results follow the reply header: move them to the buffer's start. */
    memmove(abuf, (uint8_t *)abuf + CALL_REPLY_HDR_LEN, rh.len);
    *out_alloc = abuf;
  }
  if (out_len)
    *out_len = rh.len;
  *rc_out = (CUresult)rh.result;
  return 0;
}

/* The largest reply guest__rpc decodes (fixed replies only). */
#define RPC_REPLY_MAX 128 /* TENSOR_MAP: a CUtensorMap */

CUresult guest__rpc(uint32_t op, uint32_t flags, const void *q, void *rep) {
  const call_msg_t *m = call_rep_msg(op);
  uint8_t buf[RPC_REPLY_MAX];
  size_t want = m ? call_msg_fixed(m) : 0, got = 0;
  CUresult res = CUDA_SUCCESS;
  int rc;

  if (!m || want > sizeof(buf) || call_msg_ntails(m))
    return guest__cu_error(-EINVAL);
  rc = guest__call(op, flags, q, &res, buf, want, &got, NULL);
  if (rc)
    return guest__cu_error(rc);
  if (res != CUDA_SUCCESS) {
    if (guest__debug())
      guest__log("request %s answered %d", call_op_name(op), (int)res);
    return res;
  }
  if (got != want || (rep && call_decode(m, buf, got, rep, NULL, NULL) != 0))
    return guest__cu_error(-EPROTO);
  if (op == CALL_OP_STREAM_SYNC)
    guest__synced(op, ((const call_stream_sync_req_t *)q)->stream);
  else if (op == CALL_OP_STREAM_QUERY)
    guest__synced(op, ((const call_stream_query_req_t *)q)->stream);
  else if (op == CALL_OP_CTX_SYNC)
    guest__synced(op, 0);
  return CUDA_SUCCESS;
}

/* What a synchronisation covers is read back from device mirrors and graph
 * stages. */
void guest__synced(uint32_t op, uint64_t stream) {
  guest__mirror_synced(op, stream);
  guest__gstage_synced(op, stream);
}

int guest__blob_offer(const void *data, size_t len, uint64_t *id) {
  int rc;
  if (!conn || guest__g.lost)
    return -ENOTCONN;
  rc = wire_conn_blob_offer(conn, data, len, id);
  return rc ? channel_lost(rc) : 0;
}

bool guest__chan_shm(void) {
  return conn && !guest__g.lost && strcmp(wire_conn_transport(conn), "shm") == 0;
}

int guest__chan_note(uint32_t *word) {
  if (!conn || guest__g.lost)
    return -ENOTCONN;
  return wire_conn_note(conn, word);
}

int guest__send_fd(int fd, uint64_t tag) {
  int rc;
  if (!conn || guest__g.lost)
    return -ENOTCONN;
  rc = wire_conn_send_fd(conn, fd, tag);
  /* The daemon refusing the descriptor is not a broken channel. */
  if (rc == -ECONNRESET || rc == WIRE_ECLOSED || rc == WIRE_EPEERDEAD)
    return channel_lost(rc);
  return rc;
}
