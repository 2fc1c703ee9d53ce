/* wire-int.h: declarations shared by wire/'s own .c files (and its tests).
 *
 * Layers, bottom up:
 *   frame.c      header encode/decode and wire__rx, the incremental message
 *                assembler every receiver (guest, daemon, fuzzer) feeds bytes
 *                into: it checks every length before allocating, joins
 *                multi-frame messages, expands BATCH frames, inflates zstd and
 *                resolves shared-memory descriptors through a hook;
 *   hello.c      HELLO / WELCOME / REFUSE / BYE payload codecs;
 *   txplan.c     cutting a message into frames (chunks, zstd) as iovecs;
 *   shm.c        the shared-memory ring and data-region layout (both sides);
 *   rbulk.c      RDMA bulk rules without verbs (REGION frames, descriptor
 *                bounds, span placement, the per-message plan);
 *   guest*.c     wire_conn over struct wire__gtp_ops (shm, tcp, rdma);
 *   server*.c    wire_server over struct wire__stp_ops (shm, tcp, rdma).
 * Nothing here is exported from the guest library (-fvisibility=hidden).
 */
#ifndef TALLY_WIRE_INT_H
#define TALLY_WIRE_INT_H

#include "wire/proto.h"
#include "wire/wire.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "wire/wire-le.h"

/* Little-endian bytes: wire_le_rd32/rd64/wr32/wr64 (wire/wire-le.h). */

/* ------------------------------------------------------------------ frames */

typedef struct wire__hdr {
  uint8_t version;
  uint8_t kind;
  uint16_t flags;
  uint32_t len;
  uint32_t aux;
  uint64_t id;
} wire__hdr;

void wire__hdr_encode(uint8_t out[WIRE__HDR_LEN], const wire__hdr *h);
/* Decodes and checks 24 bytes: magic, version (== want_version unless 0),
 * kind in 1..WIRE__K_MAX, known flags, len <= WIRE__FRAME_MAX.  Returns 0,
 * -EPROTO or -EMSGSIZE and writes the reason into why. */
int wire__hdr_decode(const uint8_t in[WIRE__HDR_LEN], uint8_t want_version, wire__hdr *h, char *why,
                     size_t why_len);

/* One complete message as the assembler delivers it. BATCH frames arrive as
 * one POST per record (batch_index counts them). */
typedef struct wire__msg {
  uint8_t kind;
  uint64_t id;
  const uint8_t *data; /* NULL when placed */
  size_t len;
  bool placed; /* the bytes are already where rx->place said (data NULL) */
} wire__msg;

/* deliver returns 0 to go on, 1 to stop after this message (pause), or a
 * negative status to fail the connection (why may be set by the callee).
 * resolve maps a shared-memory descriptor to bytes, or returns NULL. */
typedef int (*wire__rx_deliver_fn)(void *ctx, const wire__msg *m);
typedef const uint8_t *(*wire__rx_resolve_fn)(void *ctx, uint64_t pos, uint32_t len);
/* place (optional): asked when a multi-frame message of total bytes starts.
 * It may answer 1 with buffers (*iov, *cnt) that hold at least total bytes:
 * every chunk is then copied there as it arrives (no join buffer, no second
 * copy) and the message is delivered with placed = true.  0 = join as
 * usual.  The buffers must stay valid until that delivery or until the
 * stream fails (the owner's rule: guest.c). */
typedef int (*wire__rx_place_fn)(void *ctx, uint8_t kind, uint64_t id, size_t total,
                                 const struct iovec **iov, int *cnt);

typedef struct wire__rx {
  /* configuration (set by the owner before feeding) */
  size_t max_msg;     /* largest message accepted */
  uint32_t frame_max; /* largest frame payload accepted (<= WIRE__FRAME_MAX) */
  uint8_t version;    /* version every frame must carry */
  uint32_t kinds;     /* bit k set = kind k accepted from this peer */
  bool zstd_ok;       /* ZSTD flag accepted */
  wire__rx_deliver_fn deliver;
  wire__rx_resolve_fn resolve; /* NULL: SHMDATA flag refused */
  wire__rx_place_fn place;     /* NULL: multi-frame messages are joined */
  /* optional, with place: copies n bytes of a placed chunk to offset off
   * of the placed buffers (the guest splits large ones over two threads);
   * NULL = wire__iov_copy_in.  First argument ctx. */
  void (*copy_in)(void *ctx, const struct iovec *iov, int cnt, size_t off, const uint8_t *src,
                  size_t n);
  void *resolve_ctx; /* first argument of resolve */
  void *ctx;         /* first argument of deliver */
  /* header being assembled */
  uint8_t hdr_bytes[WIRE__HDR_LEN];
  size_t hdr_have;
  bool in_payload; /* h is valid and its payload is being read */
  bool streaming;  /* in_payload of a plain chunk: bytes go to the message */
  wire__hdr h;
  /* frame payload split across feeds: copied here */
  uint8_t *fbuf;
  size_t fcap, fhave;
  /* multi-frame message being joined */
  uint8_t *mbuf; /* kept between messages until wire__rx_trim */
  size_t mcap;
  size_t mlen, mhave;
  uint8_t mkind;
  uint64_t mid;
  bool in_multi;
  const struct iovec *piov; /* in_multi and placed: the destination */
  int pcnt;                 /* 0 = joining into mbuf */
  /* BATCH records still to deliver (after a pause) */
  const uint8_t *batch_p;
  size_t batch_left;
  uint32_t batch_n;
  uint8_t *zbuf; /* inflated single frames (WIRE__FRAME_MAX bytes, on first use) */
  void *zctx;    /* ZSTD_DCtx, made on first use */
  char why[192]; /* reason of the last error */
} wire__rx;

void wire__rx_init(wire__rx *rx, size_t max_msg, uint32_t kinds, wire__rx_deliver_fn deliver,
                   void *ctx);
void wire__rx_close(wire__rx *rx);
/* Feeds n bytes.  Delivers each complete message through rx->deliver.
 * *used gets the bytes consumed: all of them, unless deliver asked to stop,
 * in which case the bytes [p, p + *used) must stay valid until the next call
 * (which may pass the remaining bytes, or none, to finish a pending batch).
 * Returns 0, 1 (stopped by deliver), or a negative status (rx->why says why;
 * the stream is then unusable). */
int wire__rx_feed(wire__rx *rx, const uint8_t *p, size_t n, size_t *used);
/* Frees the buffer kept for multi-frame messages (call when the peer is
 * idle and no delivered payload is still in use, i.e. not while paused). */
void wire__rx_trim(wire__rx *rx);
/* True when a paused BATCH still has records to deliver. */
bool wire__rx_pending(const wire__rx *rx);
/* True between frames: nothing of a header, frame, message or batch held. */
bool wire__rx_idle(const wire__rx *rx);

/* The next record of a BATCH payload (u32 len | bytes) at *p, *left bytes
 * of payload remaining: sets *data and *len and steps *p and *left past it.
 * The length is read once (the bytes may be guest memory that still
 * changes).  0, -1 when fewer than 4 bytes are left for its length, -2 when
 * its bytes run past the end (then *len is the length read). */
static inline int wire__batch_rec(const uint8_t **p, size_t *left, const uint8_t **data,
                                  uint32_t *len) {
  if (*left < 4)
    return -1;
  *len = wire_le_rd32(*p);
  if (*len > *left - 4)
    return -2;
  *data = *p + 4;
  *p += 4 + (size_t)*len;
  *left -= 4 + (size_t)*len;
  return 0;
}

/* Writes an escaped sample of up to 16 bytes ("\x00AB...") into out. */
void wire__escape(char *out, size_t out_len, const uint8_t *p, size_t n);

/* ------------------------------------------------------------- handshake */

typedef struct wire__hello {
  uint16_t vmin, vmax;
  uint8_t prio;
  uint32_t caps;
  char tenant[WIRE_TENANT_MAX + 1];
  char token[WIRE_TOKEN_MAX + 1];
} wire__hello;

typedef struct wire__welcome {
  uint16_t version;
  uint32_t caps;
  uint32_t heartbeat_ms;
  uint32_t dead_after_ms;
  uint64_t max_msg_len;
  uint32_t ring_bytes;
  uint64_t data_bytes;
} wire__welcome;

int wire__hello_encode(wire_buf_t *b, const wire__hello *h);
int wire__hello_decode(const uint8_t *p, size_t n, wire__hello *h, char *why, size_t why_len);
int wire__welcome_encode(wire_buf_t *b, const wire__welcome *w);
int wire__welcome_decode(const uint8_t *p, size_t n, wire__welcome *w, char *why, size_t why_len);
/* REFUSE and BYE share one body: i32 status | str why. */
int wire__status_encode(wire_buf_t *b, int32_t status, const char *why);
int wire__status_decode(const uint8_t *p, size_t n, int32_t *status, char *why, size_t why_len);
/* The daemon's decision on a HELLO: 0 with *version chosen, or
 * WIRE_EVERSION / WIRE_ETOKEN / -EINVAL with a message for the guest. */
int wire__hello_check(const wire__hello *h, const char *want_token, bool need_token,
                      uint16_t *version, char *why, size_t why_len);
/* Encodes one whole frame (header + payload) into b. */
int wire__frame_put(wire_buf_t *b, uint8_t version, uint8_t kind, uint64_t id, const void *p,
                    size_t n);

/* ------------------------------------------------------------- iovecs */

size_t wire__iov_len(const struct iovec *iov, int cnt);
/* Copies n bytes starting at byte off of the iovec list into dst. */
void wire__iov_copy_out(void *dst, const struct iovec *iov, int cnt, size_t off, size_t n);
/* Scatters n bytes of src into the iovec list starting at byte off;
 * returns the bytes that fit. */
size_t wire__iov_copy_in(const struct iovec *iov, int cnt, size_t off, const void *src, size_t n);
/* Fills out[0..max) with the slices of iov covering [off, off + n); returns
 * how many entries it used, or -1 if max is too small. */
int wire__iov_slice(struct iovec *out, int max, const struct iovec *iov, int cnt, size_t off,
                    size_t n);

uint64_t wire__now_ns(void);
/* ns from then to now, 0 when then is later: a stamp another thread took
 * after this one read its clock is recent, not 2^64 ns old. */
static inline uint64_t wire__since(uint64_t now, uint64_t then) {
  return now > then ? now - then : 0;
}
/* Messages and batches a connection has handed to its transport (tests). */
uint64_t wire__conn_sends(wire_conn_t *c);
/* Tests: post_now's quiet spell becomes ns (from WIRE__POST_HOLD_US), so a
 * test can tell its other rule apart without racing the clock. */
void wire__conn_set_hold(wire_conn_t *c, uint64_t ns);

/* ------------------------------------------------------------- transports */

/* Per-connection memory of whether compression pays (txplan.c): after a
 * trial that did not, the next `skip` messages go raw without trying, and
 * the pause doubles (up to 64) while the data stays incompressible. */
typedef struct wire__zstate {
  unsigned skip;
  unsigned backoff;
} wire__zstate;

/* Work split into n independent slices.  Threads claim slices with an
 * atomic counter, so the caller never waits for a helper that has not
 * started (a busy background thread simply helps with nothing), only for a
 * slice a helper has claimed (bounded by one slice's work). */
typedef struct wire__par {
  void (*fn)(void *arg, size_t slice);
  void *arg;
  size_t n;           /* slices */
  atomic_size_t next; /* next slice to claim */
} wire__par;
/* Claims and runs slices until none is left (caller and helper alike). */
static inline void wire__par_work(wire__par *job) {
  size_t i;

  while ((i = atomic_fetch_add(&job->next, 1)) < job->n)
    job->fn(job->arg, i);
}
/* Whether very large copies may use the background thread: on hosts with
 * >= 4 online CPUs (like the spin policy, shm.h), or as TALLY_WIRE_PAR_COPY
 * says (0 never, 1 always: for measuring). */
bool wire__par_enabled(void);
/* The guest splits its copy of a shm message of at least PAR_COPY_MIN bytes
 * into the data region (guest-shm.c): one core's memcpy ran at 3.7-8.5 GB/s
 * for 16-256 MiB on the 16-CPU GPU hosts, under the 8 GB/s target, while
 * two cores together reached 8.4-13.2 GB/s.  Below 8 MiB the helper's
 * wakeup (tens of us) is a large share of the copy.  Slices of 2 MiB: fine
 * enough that the two threads finish together, large enough that claiming
 * one (an atomic add) costs nothing. */
#define WIRE__PAR_COPY_MIN   ((size_t)8 << 20)
#define WIRE__PAR_COPY_SLICE ((size_t)2 << 20)

/* Guest side: blocking byte transport under wire_conn.  Ops:
 *   send     writes the frames iov[0..cnt) completely (all or error);
 *   send_msg optional: sends one whole message its own way (shm: data
 *            region for large payloads); NULL = frames over send;
 *   peek     waits up to timeout_ms for bytes from the daemon and points *p
 *            at them (n > 0), returns 0, -ETIMEDOUT, or a loss status;
 *   consume  releases the first n peeked bytes (they may be reused);
 *   resolve  maps a shm descriptor (optional);
 *   close    frees the transport (NULL ok).
 * Thread rules: send under wire_conn's tx lock, peek/consume under its rx
 * role (one reader at a time); the two may run concurrently. */
typedef struct wire__gtp wire__gtp;
struct wire__gtp_ops {
  const char *name;
  int (*send)(wire__gtp *t, const struct iovec *iov, int cnt);
  int (*send_msg)(wire__gtp *t, uint8_t version, uint8_t kind, uint64_t id, const struct iovec *iov,
                  int cnt, size_t len);
  int (*peek)(wire__gtp *t, const uint8_t **p, size_t *n, int timeout_ms);
  void (*consume)(wire__gtp *t, size_t n);
  const uint8_t *(*resolve)(wire__gtp *t, uint64_t pos, uint32_t len);
  void (*close)(wire__gtp *t);
  /* optional (shm): sends fd out of band (SCM_RIGHTS) ahead of the FD frame
   * that send_msg publishes next; tx lock held.  NULL = -EOPNOTSUPP. */
  int (*send_fd)(wire__gtp *t, int fd);
  /* optional (shm): housekeeping when idle (returns unused data-region
   * pages); tx lock held.  Called by the background thread. */
  void (*idle)(wire__gtp *t, uint64_t now_ns);
  /* optional (shm): true when the consumer has taken every byte sent and
   * polls (has not said it sleeps); any thread, no lock (a hint: it reads
   * two shared words, which may change right after). */
  bool (*drained)(wire__gtp *t);
  /* optional: in the child of a fork, closes this process's copies of the
   * transport's descriptors and unmaps what it shares with the daemon, with
   * no I/O, no lock and no allocation (wire_conn_forget).  NULL = nothing. */
  void (*forget)(wire__gtp *t);
};
struct wire__gtp {
  const struct wire__gtp_ops *ops;
  bool zstd;       /* negotiated: the tx plan may compress */
  wire__zstate zs; /* under the connection's tx lock */
  /* Called every 100 ms by a send blocked on a full ring or socket (tx lock
   * held): returns the connection's error, first reading what the daemon
   * sent if no thread is reading, so a frozen daemon is declared dead by its
   * silence instead of hanging the sender forever (guest.c). */
  int (*check)(void *ctx);
  void *check_ctx;
  /* Optional (guest.c sets it when the connection has its background thread
   * and the host >= 4 online CPUs): runs job's slices on the calling thread
   * and the background thread together, returning when all are done.  Used
   * for very large copies (guest-shm.c).  NULL: do the work inline. */
  void (*par)(void *ctx, wire__par *job);
  void *par_ctx;
  /* How long a reply wait polls before it blocks (0 = never): set by the
   * transport's open (wire__spin_us), replaced by wire_conn_opts_t.spin_us
   * when the caller gives one (guest.c). */
  uint64_t spin_ns;
};

/* Copies n bytes between the iovec list (from offset off) and one flat
 * buffer: into dst when dst is set (sending into the shm data region), else
 * from src into the list (placing a reply).  With t->par and at least
 * WIRE__PAR_COPY_MIN bytes, in WIRE__PAR_COPY_SLICE slices on the calling
 * and the background thread together (guest-io.c). */
void wire__par_iov_copy(const wire__gtp *t, uint8_t *dst, const uint8_t *src,
                        const struct iovec *iov, int cnt, size_t off, size_t n);

/* Connect + handshake for each guest transport: fills *out on success.
 * hello_frame is the encoded HELLO frame; *welcome is filled. On refusal
 * returns the refusal status with why filled. */
int wire__gtp_tcp_open(wire__gtp **out, const char *hostport, const uint8_t *hello_frame,
                       size_t hello_len, uint32_t timeout_ms, wire__welcome *welcome, char *why,
                       size_t why_len);
/* The guest's hand-off times (hops.c): NULL unless TALLY_HOPS names a file. */
typedef struct wire__hops wire__hops;
wire__hops *wire__hops_new(const char *tenant);
void wire__hops_add(wire__hops *h, uint64_t id, uint64_t t_call, uint64_t t_sent, uint64_t t_woke);
void wire__hops_write(wire__hops *h); /* appends what is new to the file */

/* SO_BUSY_POLL on a TCP guest transport's socket (-EPERM without
 * CAP_NET_ADMIN above the system's net.core.busy_read). */
int wire__gtp_tcp_busy_poll(wire__gtp *t, uint32_t us);
int wire__gtp_shm_open(wire__gtp **out, const char *path, const uint8_t *hello_frame,
                       size_t hello_len, uint32_t timeout_ms, wire__welcome *welcome, char *why,
                       size_t why_len);
/* guest-rdma.c, or guest-rdma-none.c (-EPROTONOSUPPORT) without rdma-core. */
int wire__gtp_rdma_open(wire__gtp **out, const char *hostport, const uint8_t *hello_frame,
                        size_t hello_len, uint32_t timeout_ms, wire__welcome *welcome, char *why,
                        size_t why_len);
/* Reads one handshake answer frame (WELCOME or REFUSE) from a blocking fd;
 * used by tcp and shm. fds (may be NULL) receives up to nfds SCM_RIGHTS fds. */
int wire__handshake_read(int fd, uint32_t timeout_ms, wire__welcome *w, int *fds, int nfds,
                         int *got_fds, char *why, size_t why_len);
/* Blocking helpers for guest transports (guest-io.c).  write_all waits in
 * 100 ms slices, calling t->check between them (t may be NULL). */
int wire__write_all(int fd, const struct iovec *iov, int cnt, wire__gtp *t);
int wire__wait_fd(int fd, short events, int timeout_ms);

/* Frames for one message over a byte stream: chunks of `chunk` bytes, zstd
 * when z is not NULL (negotiated) and it pays.  Calls emit(arg, iov, cnt)
 * once per frame.  Caller holds the connection's send lock (z is its). */
typedef int (*wire__emit_fn)(void *arg, const struct iovec *iov, int cnt);
/* A wire__emit_fn that appends every frame to the wire_buf_t *arg. */
int wire__emit_to_buf(void *arg, const struct iovec *iov, int cnt);
int wire__send_frames(uint8_t version, uint8_t kind, uint64_t id, const struct iovec *iov, int cnt,
                      size_t len, uint32_t chunk, wire__zstate *z, wire__emit_fn emit, void *arg);

/* Emits one frame of kind/flags/aux/id carrying bytes [off, off + n) of the
 * iovec list (txplan.c; gathers into a temporary buffer only when the list
 * is pathologically fragmented). */
int wire__emit_frame(uint8_t version, uint8_t kind, uint64_t id, uint16_t flags, uint32_t aux,
                     const struct iovec *iov, int cnt, size_t off, size_t n, wire__emit_fn emit,
                     void *arg);

/* ------------------------------------------------ RDMA bulk (rbulk.c)
 * The verbs-free half of RDMA bulk transfers (PROTOCOL.md section 12), kept
 * apart from rdma.c so that every rule about bytes from the peer is a pure
 * function tested without a device: the REGION announcement codec, the
 * writer's span placement in the peer's landing region, the reader's bounds
 * check of a descriptor, and the per-message plan (WRITE spans, or chunked
 * SENDs when the peer's region has no room). */

/* Messages below 64 KiB go as SENDs: one copy into a send buffer costs
 * about what an extra WRITE work request does, and it keeps the region for
 * payloads where a copy hurts (a guess: never measured, no device here). */
#define WIRE__RDMA_BULK_MIN ((size_t)64 << 10)
/* A writer whose peer has not yet released room waits at most 2 ms, then
 * sends that piece as chunked SENDs: long enough to cover one D/4 piece of
 * a 32 MiB region at 100 Gb/s (8 MiB in ~0.7 ms) plus the reader's copy,
 * short enough that a paused reader costs a fallback, not a stall. */
#define WIRE__RBULK_ROOM_WAIT_NS 2000000ull

typedef struct wire__rbulk_region {
  uint64_t addr;     /* landing region, peer's virtual address */
  uint64_t len;      /* D */
  uint32_t rkey;     /* landing region's rkey */
  uint32_t ctl_rkey; /* release word's rkey */
  uint64_t ctl_addr; /* release word, 8-aligned */
} wire__rbulk_region;

void wire__rbulk_region_encode(uint8_t out[WIRE__RBULK_REGION_LEN], const wire__rbulk_region *r);
/* Checks n == WIRE__RBULK_REGION_LEN, D within WIRE__RBULK_REGION_MIN..MAX,
 * no address range that wraps, an 8-aligned release word.  0 or -EPROTO. */
int wire__rbulk_region_decode(const uint8_t *p, size_t n, wire__rbulk_region *r, char *why,
                              size_t why_len);
/* One received SEND, before the assembler sees it: returns 1 when it is a
 * REGION frame (decoded into *r), 0 when it is anything else (feed it to the
 * assembler, which judges it), -EPROTO (why filled) for a malformed REGION
 * frame: not alone in its SEND, wrong version, flags, aux, id or length. */
int wire__rbulk_classify(const uint8_t *p, size_t n, uint8_t version, wire__rbulk_region *r,
                         char *why, size_t why_len);
/* Encodes a whole REGION frame (header + payload) into out. */
void wire__rbulk_region_frame(uint8_t out[WIRE__HDR_LEN + WIRE__RBULK_REGION_LEN], uint8_t version,
                              const wire__rbulk_region *r);

/* Writer side: positions in the peer's landing region (same rules as the
 * shm data region: positions only grow, a span never wraps, it starts over
 * at offset 0 once the reader released everything).  Owned by the sending
 * thread. */
typedef struct wire__rbulk_tx {
  uint64_t d;    /* usable region bytes (0: no REGION from the peer yet) */
  uint64_t head; /* next position */
} wire__rbulk_tx;
/* Places n bytes given the reader's released position: 0 with *pos,
 * -EAGAIN (no room now), -EMSGSIZE (n > d), -EPROTO (released > head: the
 * reader wrote an impossible release word). */
int wire__rbulk_place(wire__rbulk_tx *tx, uint64_t released, size_t n, uint64_t *pos);
/* Piece size for a message of len bytes: 0 = send it as SENDs (no region,
 * or below WIRE__RDMA_BULK_MIN), len when it fits half the region (one
 * span, read in place), else a quarter of the region (joined by the
 * reader). */
size_t wire__rbulk_piece(const wire__rbulk_tx *tx, size_t len);

/* Reader side: the landing region and what was consumed.  Owned by the
 * reading thread. */
typedef struct wire__rbulk_rx {
  const uint8_t *base; /* landing region */
  uint64_t d;          /* its bytes */
  uint64_t end;        /* end of the last span resolved: released once consumed */
  uint64_t released;   /* last position published to the writer */
} wire__rbulk_rx;
/* Maps a descriptor from the peer: NULL unless 0 < len <= d, the span lies
 * inside the region without wrapping, and pos >= the end of the previous
 * span (positions only grow).  Records end = pos + len. */
const uint8_t *wire__rbulk_resolve(wire__rbulk_rx *rx, uint64_t pos, uint32_t len);
/* True (with *value) when consumed spans should be released to the writer;
 * marks them published. */
bool wire__rbulk_release_due(wire__rbulk_rx *rx, uint64_t *value);

/* How a transport moves one span (rdma.c with verbs, the tests in memory):
 *   write     copies bytes [off, off + n) of the iovecs to the span at pos
 *             (RDMA: into the bounce buffer, then posts the WRITE, which
 *             precedes the descriptor SEND on the same queue pair);
 *   released  reads the writer's release word (the reader's position);
 *   wait      optional: lets time pass while the region is full (<0 fails
 *             the message); NULL = never wait, fall back at once. */
typedef struct wire__rbulk_ops {
  int (*write)(void *arg, uint64_t pos, const struct iovec *iov, int cnt, size_t off, size_t n);
  uint64_t (*released)(void *arg);
  int (*wait)(void *arg);
} wire__rbulk_ops;
/* Sends one message: each piece (wire__rbulk_piece) is written into the
 * peer's region and announced by a descriptor frame, or, when the region
 * has no room within the wait, sent as WIRE__TCP_CHUNK frames of the same
 * message (a one-piece message goes through wire__send_frames, zstd z
 * included).  Frames go out through emit(arg).  Returns 0 or <0. */
int wire__rbulk_send(wire__rbulk_tx *tx, const wire__rbulk_ops *ops, uint8_t version, uint8_t kind,
                     uint64_t id, const struct iovec *iov, int cnt, size_t len, wire__zstate *z,
                     wire__emit_fn emit, void *arg);

/* ------------------------------------------------------------ daemon side */

/* Daemon-side transport, loop thread only.  Ops:
 *   welcome  sends the handshake answer frame (shm attaches its fds);
 *   send     sends one message; the bytes are copied or sent before it
 *            returns (aux: BATCH count, else 0);
 *   resume   re-feeds bytes held back by a pause and restarts reading;
 *   close    stops reading/writing and closes the handles; when libuv has
 *            closed them, calls wire__tenant_release(t). */
struct wire__stp_ops {
  const char *name;
  int (*welcome)(wire_tenant_t *t, const void *frame, size_t len);
  int (*send)(wire_tenant_t *t, uint8_t kind, uint64_t id, const struct iovec *iov, int cnt,
              size_t len);
  /* optional: like send with one malloc'd buffer whose ownership passes to
   * the transport in every case (it keeps it if it must queue) */
  int (*send_owned)(wire_tenant_t *t, uint8_t kind, uint64_t id, void *buf, size_t len);
  void (*resume)(wire_tenant_t *t);
  void (*close)(wire_tenant_t *t);
  /* optional (shm): the next descriptor the guest sent out of band, for a
   * FD frame.  Returns 0 with *fd (the caller owns it), -EPROTO (why
   * filled: no descriptor came; the tenant is then closed), or another
   * negative status the guest gets back (-EMFILE: lost in transit). */
  int (*take_fd)(wire_tenant_t *t, int *fd, char *why, size_t why_len);
  /* optional (shm): sends a REPLY from ANY thread if it can go out whole
   * right now, ahead of nothing (no queued reply): returns 0 when sent (buf
   * stays the caller's), -EAGAIN when it must take the loop thread's path
   * instead.  Called with the tenant's tx lock held and the tenant not
   * closed (server.c), which keeps the transport alive. */
  int (*send_direct)(wire_tenant_t *t, uint64_t id, const void *buf, size_t len);
  /* optional: housekeeping on each heartbeat tick (shm: returns unused
   * data-region pages; tcp: frees a large idle framing buffer).  Loop
   * thread. */
  void (*idle)(wire_tenant_t *t, uint64_t now_ns);
};

/* Made by a listener when a connection arrives: state HELLO, one ref. */
wire_tenant_t *wire__tenant_new(wire_server_t *s, const struct wire__stp_ops *ops, void *tp,
                                bool need_token);
void *wire__tenant_tp(const wire_tenant_t *t);
wire_tenant_info_t *wire__tenant_info_mut(wire_tenant_t *t);
wire_server_t *wire__tenant_server(const wire_tenant_t *t);
/* Bytes from the guest: returns 0 (all used), 1 (paused: keep the bytes
 * [p, p + *used) and call again after resume), or <0 (the tenant has been
 * closed; t may not be touched unless the caller holds a ref). */
int wire__tenant_feed(wire_tenant_t *t, const uint8_t *p, size_t n, size_t *used);
/* The transport lost the guest (EOF, reset...): closes t with status. */
/* Transport, right after wire__tenant_new and the peer fields: counts the
 * new connection as half-open under key (TCP: address; UNIX: "uid N"),
 * closing the oldest half-open connections that put it over
 * halfopen_max / halfopen_per_peer (server.c, admission). */
void wire__tenant_admit(wire_tenant_t *t, const char *key);
void wire__tenant_lost(wire_tenant_t *t, int status, const char *why);
/* Runs fn(arg) now, or, if t was closed while paused, at its last unref
 * (a worker may still read the paused payload).  Transports pass the frees
 * of buffers a payload may point into. */
void wire__tenant_defer(wire_tenant_t *t, void (*fn)(void *), void *arg);
/* Last step of closing, from the transport's close callback. */
void wire__tenant_release(wire_tenant_t *t);
/* Set by the transport: the resolver for shm descriptors. */
void wire__tenant_set_resolve(wire_tenant_t *t, wire__rx_resolve_fn fn, void *ctx);
bool wire__tenant_paused(const wire_tenant_t *t);
/* Direct reading (shm.h): the transport publishes t's reader at WELCOME (t
 * then holds its reference); whether t's framing is between frames and t
 * not paused (the ring may be handed over); a CALL id the reader read
 * (0 or -EPROTO: duplicate or too many, as for the loop). */
void wire__tenant_set_direct(wire_tenant_t *t, wire_direct_t *d);
bool wire__tenant_rx_idle(const wire_tenant_t *t);
int wire__tenant_add_call(wire_tenant_t *t, uint64_t id);
void wire__direct_unref(wire_direct_t *d);
/* wire_tenant_direct's reference: the reader exists from now on. */
wire_direct_t *wire__direct_take(wire_direct_t *d);
/* Loop thread: the tenant's last-heard time given the reader's: now while
 * the reader owns a ring with unread bytes, else the later of the two. */
uint64_t wire__direct_rx_ns(wire_direct_t *d, uint64_t loop_rx_ns, uint64_t now);

struct uv_loop_s *wire__server_loop(const wire_server_t *s);
const wire_server_opts_t *wire__server_opts(const wire_server_t *s);

/* Listeners (server-tcp.c, server-shm.c): start / stop. */
int wire__tcp_listen(wire_server_t *s, const char *addr, void **listener);
/* Tests only: when > 0, a worker's direct TCP reply stops after this many
 * bytes as if the socket were full, so its rest takes the parked-tail path. */
extern _Atomic size_t wire__tcp_direct_cut;
void wire__tcp_unlisten(void *listener);
int wire__tcp_port(void *listener);
/* The listening descriptor, or -1.  Listeners adopt opts' *_listen_fd when
 * it is > 0 instead of binding. */
int wire__tcp_listen_fd(void *listener);
int wire__shm_listen_fd(void *listener);
int wire__shm_listen(wire_server_t *s, const char *path, void **listener);
void wire__shm_unlisten(void *listener);
/* RDMA (server-rdma.c, or server-rdma-none.c: -EPROTONOSUPPORT). */
int wire__rdma_listen(wire_server_t *s, const char *addr, void **listener);
void wire__rdma_unlisten(void *listener);

#endif /* TALLY_WIRE_INT_H */
