/* wire.h: the public API of wire/, the Tally wire protocol.
 *
 * API: stable (changes are listed in wire/README.md under "API changes").
 *
 * wire/ carries every CUDA call of every tenant between the guest library and
 * tallyd.  It knows no other Tally module and no CUDA header.  Payloads are
 * opaque bytes to wire: callers put their own call id and arguments in them,
 * usually with the little-endian wire_buf / wire_rd helpers below.
 *
 * Two sides:
 *   - guest (client): wire_conn_*.  Blocking, no event loop, thread-safe,
 *     at most one background thread (heartbeats).  All calls and posts of a
 *     connection travel on ONE ordered channel, so the order of one thread's
 *     calls is the order the daemon sees them.
 *   - daemon (server): wire_server_* / wire_tenant_*, on a caller-supplied
 *     libuv loop.  Callbacks run on the loop thread.
 *
 * Functions return 0 or a negative errno value; codes errno lacks sit far from
 * errno's range (cf. libuv's UV__EOF) and are listed once, in WIRE_ERRNO_MAP.
 * The byte format is specified in wire/PROTOCOL.md (tables in wire/proto.h).
 */
#ifndef TALLY_WIRE_H
#define TALLY_WIRE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* X(name, value, message): our own codes, beyond errno's range. */
#define WIRE_ERRNO_MAP(X)                                                                          \
  X(WIRE_EVERSION, -4000, "no protocol version in common with the peer")                           \
  X(WIRE_ETOKEN, -4001, "authentication token refused")                                            \
  X(WIRE_EPEERDEAD, -4002, "peer stopped answering (heartbeat timeout)")                           \
  X(WIRE_EREFUSED, -4003, "daemon refused the tenant")                                             \
  X(WIRE_ECLOSED, -4004, "connection closed by the peer")

enum {
#define WIRE__ENUM(name, value, msg) name = (value),
  WIRE_ERRNO_MAP(WIRE__ENUM)
#undef WIRE__ENUM
};

/* Returns a static, human-readable message for a status returned by any
 * wire_ function: 0, a negative errno value or one of WIRE_ERRNO_MAP. Never
 * NULL. */
const char *wire_strerror(int status);

/* ------------------------------------------------------------------ limits */

#define WIRE_VERSION     1   /* the protocol version this build speaks best */
#define WIRE_VERSION_MIN 1   /* the oldest it still accepts */
#define WIRE_TENANT_MAX  64  /* bytes of a tenant name, excluding NUL */
#define WIRE_TOKEN_MAX   256 /* bytes of a token, excluding NUL */
/* Default and hard ceiling of one message (a call, post or reply payload).
 * 256 MiB memcpys must fit with their arguments; 1 GiB leaves room and still
 * bounds what a hostile tenant can make the daemon allocate. */
#define WIRE_MSG_MAX_DEFAULT ((size_t)1 << 30)

/* ------------------------------------------------------------ content ids */

/* XXH3-64 (seed 0) of len bytes: the id under which module images and other
 * blobs travel and are cached.  Pure; any thread. */
uint64_t wire_content_id(const void *data, size_t len);

/* --------------------------------------------- little-endian arguments
 *
 * wire_buf_t: a growable writer.  Every put is little-endian.  Errors are
 * sticky: after an allocation failure every later put does nothing, and
 * wire_buf_status() (and each put) returns -ENOMEM.
 * wire_rd_t: a bounds-checked reader over bytes the caller owns.  Every get
 * returns 0 or -EPROTO (sticky: after one failure all later gets fail and
 * output values are zeroed), never reading past the end.
 */
typedef struct wire_buf {
  uint8_t *data; /* bytes written so far (malloc'd; NULL when cap == 0) */
  size_t len;    /* bytes used */
  size_t cap;    /* bytes allocated */
  int err;       /* 0 or -ENOMEM, sticky */
} wire_buf_t;

void wire_buf_init(wire_buf_t *b);
void wire_buf_close(wire_buf_t *b); /* frees the storage; NULL ok */
void wire_buf_reset(wire_buf_t *b); /* len = 0, err = 0, storage kept */
int wire_buf_reserve(wire_buf_t *b, size_t extra);
int wire_buf_status(const wire_buf_t *b);
int wire_buf_put_u8(wire_buf_t *b, uint8_t v);
int wire_buf_put_u16(wire_buf_t *b, uint16_t v);
int wire_buf_put_u32(wire_buf_t *b, uint32_t v);
int wire_buf_put_u64(wire_buf_t *b, uint64_t v);
int wire_buf_put_i32(wire_buf_t *b, int32_t v);
int wire_buf_put_i64(wire_buf_t *b, int64_t v);
int wire_buf_put_f64(wire_buf_t *b, double v);
int wire_buf_put_bytes(wire_buf_t *b, const void *p, size_t n); /* raw, no length */
int wire_buf_put_blob(wire_buf_t *b, const void *p, size_t n);  /* u32 length + bytes */
int wire_buf_put_str(wire_buf_t *b, const char *s);             /* u32 length + bytes, no NUL */

typedef struct wire_rd {
  const uint8_t *data; /* not owned */
  size_t len;          /* bytes in data */
  size_t off;          /* next byte to read */
  int err;             /* 0 or -EPROTO, sticky */
} wire_rd_t;

void wire_rd_init(wire_rd_t *r, const void *data, size_t len);
int wire_rd_status(const wire_rd_t *r);
size_t wire_rd_left(const wire_rd_t *r);
int wire_rd_get_u8(wire_rd_t *r, uint8_t *v);
int wire_rd_get_u16(wire_rd_t *r, uint16_t *v);
int wire_rd_get_u32(wire_rd_t *r, uint32_t *v);
int wire_rd_get_u64(wire_rd_t *r, uint64_t *v);
int wire_rd_get_i32(wire_rd_t *r, int32_t *v);
int wire_rd_get_i64(wire_rd_t *r, int64_t *v);
int wire_rd_get_f64(wire_rd_t *r, double *v);
int wire_rd_get_bytes(wire_rd_t *r, void *dst, size_t n); /* copies n raw bytes */
/* Zero-copy: *p points into the reader's data (valid as long as it is).
 * blob: u32 length + bytes; the length is checked against the bytes left. */
int wire_rd_get_blob(wire_rd_t *r, const void **p, size_t *n);
/* Like get_blob, but also refuses lengths above max_len and embedded NULs;
 * the string is NOT NUL-terminated: use the returned length. */
int wire_rd_get_str(wire_rd_t *r, const char **s, size_t *n, size_t max_len);

/* ------------------------------------------------------------- handshake */

typedef enum wire_prio {
  WIRE_PRIO_LATENCY_CRITICAL = 0, /* one per GPU: highest stream priority */
  WIRE_PRIO_BEST_EFFORT = 1,      /* scheduled around the latency-critical tenant */
} wire_prio_t;

/* Capabilities, offered by the guest and acknowledged by the daemon.  The
 * negotiated set is the intersection. */
#define WIRE_CAP_ZSTD (1u << 0) /* bulk payloads may be zstd-compressed (when it pays) */

/* What a guest says about itself. */
typedef struct wire_hello {
  const char *tenant; /* 1..WIRE_TENANT_MAX bytes, no NUL inside */
  wire_prio_t prio;
  const char *token; /* NULL or "" = none; required by TCP daemons that have one */
  uint32_t caps;     /* WIRE_CAP_* offered */
} wire_hello_t;

/* What the daemon learns about a tenant (valid for the tenant's lifetime). */
typedef struct wire_tenant_info {
  char name[WIRE_TENANT_MAX + 1]; /* NUL-terminated */
  wire_prio_t prio;
  uint32_t caps;         /* negotiated (intersection) */
  uint16_t version;      /* protocol version chosen */
  const char *transport; /* "shm", "tcp" or "rdma" (static string) */
  bool local;            /* true for shm: uid/pid come from SO_PEERCRED */
  uid_t uid;             /* SO_PEERCRED, or (uid_t)-1 when !local */
  pid_t pid;             /* SO_PEERCRED, or 0 when !local */
  char peer[64];         /* "pid 1234" or "10.0.0.2:40112", for logs */
} wire_tenant_info_t;

/* ------------------------------------------------------------ guest side */

typedef struct wire_conn wire_conn_t;

/* Tuning; a zeroed struct (or NULL) means every default. */
typedef struct wire_conn_opts {
  uint32_t heartbeat_ms;       /* idle interval between heartbeats; 0 = 500 */
  uint32_t dead_after_ms;      /* no byte from the daemon for this long = dead; 0 = 5000 */
  uint32_t connect_timeout_ms; /* 0 = 5000 */
  size_t batch_bytes;          /* posts are flushed when the batch reaches this; 0 = 64 KiB */
  bool no_thread;              /* true: no heartbeat thread (tests, benches) */
  int32_t spin_us;             /* a reply wait polls this long before it blocks: 0 = the
                                  transport's rule (TALLY_WIRE_SPIN_US, wire/README.md),
                                  < 0 = never, > 0 = this many us (at most 1 s) */
  bool post_now;               /* true: a post made when nothing was sent for 20 us goes
                                  out at once (a polling daemon starts on it while the next
                                  is made); the posts right behind it are sent together
                                  within 20 us of it, or with the next call */
  bool post_after_reply;       /* with post_now, on shared memory (where a send is a write
                                  into the ring, not a system call): the first post after
                                  a call's reply goes out at once too (launch + sync: the
                                  daemon launches while the guest makes the sync) */
  bool post_when_drained;      /* with post_now, on shared memory: a post goes out at once
                                  when the daemon has taken every byte sent before and
                                  polls the ring (it is launching the last batch), so a
                                  burst reaches it in pieces it never waits for instead of
                                  one batch per 20 us */
  uint32_t busy_poll_us;       /* TCP: SO_BUSY_POLL on the socket (best effort: raising it
                                  above net.core.busy_read needs CAP_NET_ADMIN); 0 = off */
  uint32_t timed_ms;           /* > 0: the connection's first call (the caller's own hello)
                                  fails the connection with -ETIMEDOUT when no reply comes
                                  within this many ms; later calls are untimed */
} wire_conn_opts_t;

/* Connects to url, performs the handshake and starts the connection's one
 * background thread (all signals blocked; none with opts->no_thread).
 * After fork() the child must not use its parent's connections: they share
 * the parent's socket and rings; open new ones in the child.  URLs:
 *   "unix:/path" or "/path"  shared memory, set up over that UNIX socket;
 *   "tcp://host:port"        TCP (host may be a name, IPv4 or [IPv6]);
 *   "rdma://host:port"       RDMA verbs (only when built with rdma-core).
 * On success *out is a connection usable from any number of threads.
 * On failure returns e.g. -ECONNREFUSED, WIRE_EVERSION, WIRE_ETOKEN,
 * WIRE_EREFUSED, -ETIMEDOUT, -EINVAL (bad url or hello), and, when errbuf is
 * not NULL, writes a NUL-terminated explanation into it that says what the
 * daemon expected (e.g. "daemon speaks protocol versions 2..3, we offered
 * 1..1").  errbuf may be NULL. */
int wire_conn_open(wire_conn_t **out, const char *url, const wire_hello_t *hello,
                   const wire_conn_opts_t *opts, char *errbuf, size_t errlen);

/* Orderly close: flushes pending posts, says goodbye, joins the background
 * thread and frees everything.  NULL ok.  No other call on c may be running
 * or start afterwards. */
void wire_conn_close(wire_conn_t *c);

/* For the child of a fork() (a pthread_atfork child handler): closes this
 * process's copies of the connection's descriptors and unmaps the region it
 * shares with the daemon, with no I/O, no lock and no allocation, so the
 * parent's connection goes on untouched and the daemon sees the tenant leave
 * when the parent does, whatever the child does.  c must not be used in this
 * process afterwards, not even closed (its memory is left to the process).
 * Over RDMA nothing is closed: the verbs library owns those descriptors.
 * NULL ok. */
void wire_conn_forget(wire_conn_t *c);

/* Synchronous call: sends the request (the concatenation of req[0..req_cnt))
 * after every post queued before it by any thread, and waits for the reply.
 * The reply is scattered into rep[0..rep_cnt) in order; *rep_len (may be NULL)
 * gets the reply's full length.  A reply longer than the rep iovecs hold
 * returns -EMSGSIZE (the excess is discarded, *rep_len still says how long it
 * was).  Requests and replies may be of any size up to the negotiated maximum;
 * wire picks inline frames, the shared-memory data region or chunks.
 * Thread-safe; calls of different threads may be in flight together.
 * Errors: -ECONNRESET / WIRE_ECLOSED / WIRE_EPEERDEAD once the connection is
 * lost (and for every later call), -EMSGSIZE, -EINVAL. */
int wire_conn_call(wire_conn_t *c, const struct iovec *req, int req_cnt, const struct iovec *rep,
                   int rep_cnt, size_t *rep_len);

/* Like wire_conn_call, but wire allocates the reply: *rep (free() it) holds
 * *rep_len bytes; *rep is NULL when the reply is empty. */
int wire_conn_call_alloc(wire_conn_t *c, const struct iovec *req, int req_cnt, void **rep,
                         size_t *rep_len);

/* Fire-and-forget: queues the request behind earlier posts and calls of this
 * connection and returns; the bytes are copied before returning (small posts
 * into the batch, large ones are sent at once).  The batch is flushed at the
 * next call, when it reaches batch_bytes, by wire_conn_flush, and by the
 * heartbeat thread when idle.  Returns 0, or the connection's error once it
 * is lost.  Errors the DAEMON meets executing a post are not wire's: by
 * protocol convention (PROTOCOL.md, "Deferred errors") the daemon records the
 * first one per tenant and returns it in the reply to the next call. */
int wire_conn_post(wire_conn_t *c, const struct iovec *req, int req_cnt);

/* Sends every queued post now.  Thread-safe. */
int wire_conn_flush(wire_conn_t *c);

/* The caller had its answer without a reply (a word the daemon had the GPU
 * write): with post_after_reply, the next post goes out at once, as after a
 * call's reply.  Thread-safe. */
void wire_conn_answered(wire_conn_t *c);

/* With TALLY_HOPS=FILE in the environment at open, each call's hand-off
 * times are kept (wire/hops.c has the line format); this appends those not
 * yet written to FILE (wire_conn_close does too).  Call it while no call is
 * in flight (at exit, say).  Nothing happens without the variable. */
void wire_conn_hops_write(wire_conn_t *c);

/* Hand-off times of a post answered without a reply (a word the daemon had
 * the GPU write, which the caller waited on): kept as a call with id 0, its
 * times ns of CLOCK_MONOTONIC (the call began, the post was in the ring or
 * socket, the caller had its answer).  wire_conn_hops_on says whether times
 * are kept, so the caller reads the clock only then.  Thread-safe. */
bool wire_conn_hops_on(const wire_conn_t *c);
void wire_conn_hops_answered(wire_conn_t *c, uint64_t t_call, uint64_t t_sent, uint64_t t_woke);

/* Makes sure the daemon holds the blob data[0..len) (a module image, say),
 * sending the bytes only if it lacks them (have/send exchange, PROTOCOL.md
 * "Content ids").  *id gets wire_content_id(data, len); callers then refer to
 * the blob by id inside their own payloads.  Thread-safe; one or two round
 * trips. */
int wire_conn_blob_offer(wire_conn_t *c, const void *data, size_t len, uint64_t *id);

/* Sends fd (duplicated in transit with SCM_RIGHTS over the connection's UNIX
 * socket) to the daemon together with a caller-chosen tag, and waits until the
 * daemon's on_fd callback has run; returns its status.  Ordered like a call:
 * every post and call queued before it by any thread reaches the daemon's
 * on_msg before on_fd runs.  -EOPNOTSUPP on TCP/RDMA connections, -EBADF for
 * a negative fd.  The caller keeps its own fd.  Thread-safe (several
 * threads take turns: one descriptor is in flight at a time). */
int wire_conn_send_fd(wire_conn_t *c, int fd, uint64_t tag);

/* Once the connection is lost (calls return an error), why: the daemon's
 * BYE text (e.g. its protocol-error reason), "no byte from the daemon for
 * 5012 ms", ...; "" while healthy.  Valid until wire_conn_close. */
const char *wire_conn_why(wire_conn_t *c);

/* The last word the daemon published to this connection with
 * wire_tenant_note (0 before the first one arrives) into *word.  Words
 * travel in order with replies, so a note published before a reply was
 * sent is seen once that reply has been received.  Returns 0, -EOPNOTSUPP
 * when the daemon publishes none (an older daemon), -EINVAL.  Any thread;
 * no system call. */
int wire_conn_note(wire_conn_t *c, uint32_t *word);

/* The negotiated capabilities (WIRE_CAP_*) and transport name ("shm"...). */
uint32_t wire_conn_caps(const wire_conn_t *c);
const char *wire_conn_transport(const wire_conn_t *c);

/* ----------------------------------------------------------- daemon side */

struct uv_loop_s; /* uv_loop_t: wire.h does not make its includers need uv.h */

typedef struct wire_server wire_server_t;
typedef struct wire_tenant wire_tenant_t;

typedef enum wire_msg_kind {
  WIRE_MSG_CALL = 1, /* synchronous: answer with wire_tenant_reply*(id) exactly once */
  WIRE_MSG_POST = 2, /* fire-and-forget: no reply */
} wire_msg_kind_t;

typedef struct wire_msg {
  wire_msg_kind_t kind;
  uint64_t id;         /* correlation id of a CALL (0 for POST) */
  const uint8_t *data; /* payload: valid until on_msg returns, or until
                          wire_tenant_resume() if on_msg paused the tenant.
                          Over shm it may be memory the guest can still
                          write: read each field once (wire_rd does), never
                          check a value and then read it again. */
  size_t len;
  uint64_t rx_ns; /* CLOCK_MONOTONIC ns when the loop read the bytes holding it
                     (the socket read or ring drain that delivered it) */
} wire_msg_t;

typedef struct wire_server_cb {
  /* A tenant finished the handshake (version agreed, token checked for
   * network transports).  Return 0 to accept, or a negative status to
   * refuse; the guest sees WIRE_EREFUSED (or the status if it is
   * WIRE_ETOKEN or -EAGAIN: "come back later", callers may retry) and
   * refuse_why in its errbuf.  Optional (NULL = accept). */
  int (*on_connect)(wire_server_t *s, wire_tenant_t *t, const wire_tenant_info_t *info,
                    char *refuse_why, size_t why_len);
  /* A call or post arrived, in the tenant's order. Required. */
  void (*on_msg)(wire_server_t *s, wire_tenant_t *t, const wire_msg_t *m);
  /* The tenant is gone: status 0 = orderly close by the guest; WIRE_ECLOSED /
   * -ECONNRESET = it vanished (process died); WIRE_EPEERDEAD = heartbeat
   * timeout; -EPROTO / -EMSGSIZE = it sent bad bytes (why says what, with an
   * escaped sample; log it); anything else = wire_tenant_close's reason.
   * Called once per accepted tenant; after it returns t is released (other
   * threads' wire_tenant_ref keep the memory alive but every reply fails).
   * Optional. */
  void (*on_close)(wire_server_t *s, wire_tenant_t *t, int status, const char *why);
  /* Content ids: does the daemon hold blob id?  Optional (NULL = never). */
  bool (*blob_has)(wire_server_t *s, wire_tenant_t *t, uint64_t id);
  /* Blob bytes arrived, already checked to hash to id; data valid during
   * the call.  Return 0 or a negative status (sent to the guest).
   * Optional (NULL = accepted and dropped). */
  int (*blob_put)(wire_server_t *s, wire_tenant_t *t, uint64_t id, const void *data, size_t len);
  /* A guest sent a descriptor (wire_conn_send_fd), after every message it
   * queued before.  Loop thread.  The callback owns fd (close it when done,
   * also on error).  Return 0, a positive status of the caller's own
   * protocol or a negative errno, which the guest's wire_conn_send_fd
   * returns.  Optional: NULL = wire closes fd and answers
   * -EOPNOTSUPP. */
  int (*on_fd)(wire_server_t *s, wire_tenant_t *t, uint64_t tag, int fd);
  /* A connection ended before its handshake completed: refused (bad
   * HELLO, token, version, on_connect said no), shed to admit a newer one
   * (-EBUSY: too many half-open connections, see halfopen_max), past the
   * handshake deadline (-ETIMEDOUT), or gone (WIRE_ECLOSED/-ECONNRESET).
   * info->peer and info->uid say who; peer_key is the admission key (TCP:
   * the address without port; UNIX: "uid N"; "" when unknown); why is
   * wire's reason, NOT escaped (peer bytes may be in it).  For logs.
   * Optional. */
  void (*on_refuse)(wire_server_t *s, const wire_tenant_info_t *info, const char *peer_key,
                    int status, const char *why);
} wire_server_cb_t;

typedef struct wire_server_opts {
  const char *unix_path;  /* listen here for shared-memory tenants; NULL = none */
  const char *tcp_addr;   /* "host:port" / "[v6]:port" for TCP tenants; NULL = none */
  const char *token;      /* required from TCP (and RDMA) tenants; NULL = no check */
  uint32_t heartbeat_ms;  /* 0 = 500 */
  uint32_t dead_after_ms; /* silence that means a dead tenant; 0 = 5000 */
  size_t max_msg_len;     /* largest message accepted; 0 = WIRE_MSG_MAX_DEFAULT */
  size_t shm_ring_bytes;  /* per direction; 0 = 1 MiB; power of two */
  size_t shm_data_bytes;  /* shared data region per direction; 0 = 1 GiB,
                             sparse: pages above 64 MiB are returned after
                             5 s without use (PROTOCOL.md section 10) */
  const char *rdma_addr;  /* "host:port" for RDMA tenants (rdma-core builds); NULL = none */
  int32_t shm_spin_us;    /* after shm traffic the loop polls the rings this
                             long before sleeping again (saves the guests'
                             doorbell syscalls and the daemon's wakeup); pays
                             only with idle cores: wire-bench measured it 6x
                             slower on a loaded 2-CPU host.  > 0 = this many
                             us; < 0 = never; 0 = auto (default): the env
                             TALLY_WIRE_SPIN_US if set (0 = never), else 50 us
                             on hosts with >= 4 online CPUs, else never.
                             Guests spin on replies by the same rule (20 us
                             on small hosts). */
  int unix_listen_fd;     /* > 0: adopt this already-listening UNIX socket
                             (inherited across exec) instead of creating and
                             binding unix_path; the path is then neither
                             unlinked nor re-bound.  0 = bind as usual */
  int tcp_listen_fd;      /* > 0: adopt this already-listening TCP socket
                             instead of binding tcp_addr; 0 = bind as usual.
                             An adopted descriptor belongs to the server from
                             then on (wire_server_close closes it). */
  int32_t tcp_spin_us;    /* the same for TCP: after a read the loop polls its
                             sockets with a zero timeout this long before
                             sleeping in epoll_wait again.  Same values and
                             auto rule as shm_spin_us; TCP guests spin on
                             replies only where auto says 50 us (never on
                             small hosts). */
  /* Admission before the handshake (a peer that has not sent a valid HELLO
   * holds a descriptor and a buffer and nothing else).  Over a cap, the
   * OLDEST half-open connection (of all, or of that peer) is closed to make
   * room, never the new one: a flood of slow connections cannot lock out a
   * tenant that completes its HELLO at once (on_refuse says -EBUSY). */
  uint32_t handshake_ms;      /* a connection must complete its HELLO this long
                                 after accept, however slowly it trickles
                                 bytes; 0 = WIRE_HANDSHAKE_MS_DEFAULT */
  uint32_t halfopen_max;      /* half-open connections, all peers; 0 =
                                 WIRE_HALFOPEN_MAX_DEFAULT, lowered to a
                                 quarter of RLIMIT_NOFILE (at least 8) */
  uint32_t halfopen_per_peer; /* the same per peer (TCP: address; UNIX:
                                 uid); 0 = WIRE_HALFOPEN_PEER_DEFAULT */
  uint32_t unix_mode;         /* permission bits of the UNIX socket file, set
                                 before listen, whatever the umask; 0 = 0660 */
  bool unix_gid_set;          /* true: chown the socket file to unix_gid */
  gid_t unix_gid;
  bool lc_poll;               /* true: while a latency-critical tenant is connected
                                 the loop never sleeps: it polls the shm rings and
                                 the TCP sockets without end (one core busy), so that
                                 tenant's requests after an idle gap are read without a
                                 doorbell or an epoll wakeup; its TCP socket also gets
                                 SO_BUSY_POLL (best effort).  false: the spins above */
  uint32_t lc_busy_poll_us;   /* SO_BUSY_POLL of a latency-critical TCP tenant's socket
                                 under lc_poll; 0 = 50 */
  bool lc_direct;             /* with lc_poll: a latency-critical shared-memory tenant's
                                 ring may be read by its own executor thread
                                 (wire_tenant_direct) instead of the loop */
  uint32_t lc_direct_stuck_us; /* lc_direct: bytes wait this long in a ring (or socket)
                                 its busy executor holds before the loop takes it back;
                                 0 = 50 */
  bool lc_direct_tcp;         /* with lc_direct: a latency-critical TCP tenant's socket
                                 too (its executor peeks at the socket and consumes
                                 the frames it takes) */
} wire_server_opts_t;

#define WIRE_HANDSHAKE_MS_DEFAULT  5000
#define WIRE_HALFOPEN_MAX_DEFAULT  256
#define WIRE_HALFOPEN_PEER_DEFAULT 32

/* Starts listening on loop.  cb is copied; user is returned by
 * wire_server_data.  Returns -EADDRINUSE, -EACCES, -EINVAL, -ENOMEM,
 * -EPROTONOSUPPORT (rdma_addr in a build without rdma-core)...
 * The daemon process must ignore SIGPIPE: libuv writes to a vanished TCP
 * guest can raise it (wire reports the loss as a status instead). */
int wire_server_new(wire_server_t **out, struct uv_loop_s *loop, const wire_server_opts_t *opts,
                    const wire_server_cb_t *cb, void *user);

/* Stops listening and closes every tenant (on_close with -ECANCELED).  The
 * memory goes once libuv has closed the handles and the last tenant ref is
 * dropped: keep running the loop until uv_run returns.  Threads that hold
 * tenant refs may still call wire_tenant_reply_mt / _resume / _unref
 * afterwards (replies then fail with -ECONNRESET).  NULL ok.  Loop thread
 * only. */
void wire_server_close(wire_server_t *s);

void *wire_server_data(const wire_server_t *s);
/* Bound TCP port (useful with port 0), or 0 when not listening on TCP. */
int wire_server_tcp_port(const wire_server_t *s);

/* The listening descriptors (-1 in each when none), so that a daemon that
 * re-executes itself can clear FD_CLOEXEC on them before execve and pass
 * them to the new image's wire_server_opts_t.  Either pointer may be NULL.
 * Returns 0, or -EINVAL when s is NULL.  Loop thread. */
int wire_server_listen_fds(const wire_server_t *s, int *unix_fd, int *tcp_fd);

/* Tenant accessors; loop thread unless said otherwise. */
const wire_tenant_info_t *wire_tenant_info(const wire_tenant_t *t);
void wire_tenant_set_data(wire_tenant_t *t, void *data);
void *wire_tenant_data(const wire_tenant_t *t);

/* Answers call id with the concatenation of iov[0..cnt).  Loop thread only;
 * the bytes are copied or sent before it returns.  Returns -ENOENT for an id
 * that is not an outstanding call, -ECONNRESET once the tenant is closed. */
int wire_tenant_reply(wire_tenant_t *t, uint64_t id, const struct iovec *iov, int cnt);

/* Answers call id from ANY thread (e.g. after a stream sync on a GPU thread).
 * Takes ownership of buf (malloc'd, len bytes) in every case: wire free()s
 * it once sent or when the tenant is gone.  Over shm the calling thread
 * writes the reply into the ring itself when it fits whole and no earlier
 * reply is queued (no wakeup of the loop thread); otherwise, and over TCP,
 * the loop thread sends it (uv_async).  Either way a reply never overtakes
 * one already queued.  Returns 0 or -ECONNRESET (tenant closed). */
int wire_tenant_reply_mt(wire_tenant_t *t, uint64_t id, void *buf, size_t len);

/* As wire_tenant_reply_mt, but buf stays the caller's: when the reply goes
 * out directly nothing is allocated (a worker can answer every call from one
 * buffer it keeps); otherwise wire copies it for the loop thread.  Returns 0,
 * -ECONNRESET (tenant closed) or -ENOMEM (the copy). */
int wire_tenant_reply_mt_copy(wire_tenant_t *t, uint64_t id, const void *buf, size_t len);

/* Keeps t's memory alive for another thread (for wire_tenant_reply_mt);
 * any thread.  Every ref needs an unref. */
void wire_tenant_ref(wire_tenant_t *t);
void wire_tenant_unref(wire_tenant_t *t);

/* Inside on_msg: keep this message's payload valid and deliver no further
 * message of t until wire_tenant_resume (callable from any thread).  Lets a
 * worker thread consume a large payload without a copy; order is kept.
 * Take a wire_tenant_ref for the worker: if the tenant closes (dies) while
 * paused, the payload stays valid until that last unref. */
void wire_tenant_pause(wire_tenant_t *t);
void wire_tenant_resume(wire_tenant_t *t);

/* Publishes a 32-bit word to t's guest, which reads the latest with
 * wire_conn_note (a NOTE frame, PROTOCOL.md section 3; its meaning is the
 * caller's).  The same word twice sends nothing the second time.  Callable
 * from on_connect: the word then follows the WELCOME.  Returns 0,
 * -EOPNOTSUPP when the guest does not take notes (an older guest),
 * -ECONNRESET once t is closed, or the transport's send error.  Loop
 * thread. */
int wire_tenant_note(wire_tenant_t *t, uint32_t word);

/* ---- direct reading (shared memory, and TCP with lc_direct_tcp) ----
 *
 * A latency-critical tenant's executor (the one thread that runs its
 * messages, polling) may read the tenant's ring, or its TCP socket, itself
 * instead of having the loop read it and hand each message over.  The ring
 * (or socket) has one reader at a time: the loop hands it to the executor
 * when it is empty (a socket: when libuv reads it) and its framing idle, and
 * takes it back whenever the executor meets a frame it does not take
 * (anything but plain calls and posts up to WIRE_DIRECT_MAX bytes and
 * batches of posts up to 4 KiB, or a message ok() refuses: a longer batch, a
 * burst, is read by the loop while the executor runs what came before it)
 * or a socket's end; messages the loop read meanwhile went to on_msg, and
 * the executor must run those it queued before it reads again
 * (wire_direct_read returns 0 while the loop owns it).  A socket's bytes are
 * peeked at and consumed only once the frame is claimed, so a frame given
 * back is still in the socket for the loop.  Replies go as usual
 * (wire_tenant_reply_mt*).  The tenant is not declared dead for silence
 * while the executor owns a ring or socket with unread bytes (it is busy). */
#define WIRE_DIRECT_MAX ((size_t)64 << 10)

typedef struct wire_direct wire_direct_t;

/* Any thread holding a ref on t: t's direct reader (a reference released with
 * wire_direct_release), or NULL: not a shared-memory tenant (nor a TCP one
 * under lc_direct_tcp), not latency-critical under lc_poll and lc_direct, or
 * not past its WELCOME yet (ask again later).  At most one thread may use it. */
wire_direct_t *wire_tenant_direct(wire_tenant_t *t);

/* The executor: true when the ring is its to read and holds bytes (a socket:
 * one recv(2) that peeks; at the socket's end it is given back to the loop,
 * which reports the end, and this is false). */
bool wire_direct_ready(wire_direct_t *d);

/* The executor: takes the next frame when it owns the ring and the frame
 * holds only calls and posts that ok(ctx, m) accepts (each m->data a copy,
 * valid during run; m->rx_ns when it was read), then calls run(ctx, m) for
 * each in order.  ok is asked after the look at the ring's owner that the
 * claim depends on: whatever on_msg got before the loop last handed the ring
 * over is visible to ok (it may refuse while those are unrun).  Returns how
 * many ran: 0 when the ring is empty, the loop owns it, the tenant closed,
 * or the frame went back to the loop. */
int wire_direct_read(wire_direct_t *d, bool (*ok)(void *ctx, const wire_msg_t *m),
                     void (*run)(void *ctx, const wire_msg_t *m), void *ctx);

/* Frames the executor read itself, and how many it gave back to the loop. */
void wire_direct_counts(const wire_direct_t *d, uint64_t *read, uint64_t *given_back);

void wire_direct_release(wire_direct_t *d);

/* Closes t with status (e.g. -EPROTO after a malformed payload) and a reason
 * that is passed on to on_close; the guest sees the connection lost. Loop
 * thread only; idempotent. */
void wire_tenant_close(wire_tenant_t *t, int status, const char *why);

#endif /* TALLY_WIRE_H */
