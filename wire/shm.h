/* shm.h: the shared-memory transport's region layout and ring primitives,
 * used by both sides (guest-shm.c, server-shm.c); internal to wire/.
 *
 * One memfd per tenant, made by the daemon and handed to the guest with
 * SCM_RIGHTS together with three eventfds (daemon doorbell, guest rx
 * doorbell, guest tx doorbell).  Layout (R = ring bytes, D = data bytes, both
 * per direction; R a power of two):
 *   off            size  meaning
 *   0              8     magic "TALLYSHM"
 *   8              4     layout version (1)
 *   12             4     R
 *   16             8     D
 *   1024           384   g2d ring control (guest -> daemon), see below
 *   2048           384   d2g ring control (daemon -> guest)
 *   4096           R     g2d ring bytes
 *   4096+R         R     d2g ring bytes
 *   4096+2R        D     g2d data region
 *   4096+2R+D      D     d2g data region
 * Ring control, each field on its own 64-byte line (no false sharing):
 *   +0    u64  head       producer: bytes ever written (byte p at ring[p % R])
 *   +64   u64  tail       consumer: bytes ever consumed
 *   +128  u32  sleeping   consumer: 1 = about to block, ring my doorbell
 *   +192  u32  waiting    producer: 1 = blocked on space, ring its doorbell
 *   +256  u64  data_tail  consumer: data-region bytes released (positions)
 * The ring carries ordinary frames (proto.h).  Payloads above the inline
 * limit go to the data region and the ring carries a SHMDATA descriptor
 * (pos, len): bytes at data[pos % D], contiguous (a span that would wrap
 * starts over at offset 0).  Positions only grow; the consumer releases data
 * in order by storing data_tail = pos + len of the last message consumed.
 * When the consumer has released everything (data_tail == the producer's
 * data head), the producer starts the next span at the next multiple of D,
 * i.e. at offset 0, so request/reply traffic keeps reusing the low pages.
 * D is large and sparse (1 GiB by default: a 256 MiB message is one span,
 * delivered without a join copy); pages above WIRE__SHM_DATA_WARM that a
 * large message touched are returned to the kernel (MADV_REMOVE, a hole in
 * the memfd) by the producer once its region has been empty and unused above
 * the warm part for WIRE__SHM_TRIM_IDLE_NS, so a tenant pins only the warm
 * part between bursts of large messages.
 * Every index read from shared memory is validated (head - tail <= R,
 * descriptor inside the region): the peer may be hostile.  Wakeups follow the
 * Dekker pattern: publish, full fence, read the peer's flag.
 */
#ifndef TALLY_WIRE_SHM_H
#define TALLY_WIRE_SHM_H

#include "wire/wire-int.h"

#define WIRE__SHM_MAGIC "TALLYSHM"
#define WIRE__SHM_CTL   4096
/* Messages up to 64 KiB (a full post batch) travel inline in the ring; a
 * larger one costs one extra descriptor frame but no ring wrap copies. */
#define WIRE__SHM_INLINE ((size_t)64 << 10)

/* Data-region bytes kept resident between large messages: 64 MiB, the
 * size of the data region before it became 1 GiB and sparse, at which
 * 1-16 MiB messages ran at 9-10 GB/s. */
#define WIRE__SHM_DATA_WARM ((uint64_t)64 << 20)
/* Pages above the warm part go back after 5 s without use: long enough that
 * a loop moving large tensors every few seconds reuses them (first-touch
 * faults of shmem pages ran at ~1 GB/s on the development VM against ~4 GB/s
 * warm), short enough to free them between bursts. */
#define WIRE__SHM_TRIM_IDLE_NS 5000000000ull

typedef struct wire__shm_dir {
  uint8_t *ctl;  /* this direction's control block */
  uint8_t *ring; /* R bytes */
  uint64_t r;    /* ring bytes (power of two) */
  uint8_t *data; /* D bytes */
  uint64_t d;    /* data bytes */
  /* producer-private */
  uint64_t head;      /* next ring byte to write (published with release) */
  uint64_t data_head; /* next data position */
  uint64_t hiwater;   /* end offset of the highest data span written (<= d) */
  uint64_t high_ns;   /* when a span last reached above WIRE__SHM_DATA_WARM */
  /* optional (guest g2d, set after wire__shm_bind): copies payload bytes
   * [off, off + n) into the data region; NULL = wire__iov_copy_out */
  void (*copy)(void *ctx, uint8_t *dst, const struct iovec *iov, int cnt, size_t off, size_t n);
  void *copy_ctx;
  /* optional (daemon d2g): messages above chunk_max travel as spans of
   * chunk_max bytes, and on_chunk runs after each span is published, so a
   * sleeping consumer wakes and copies span k while span k + 1 is written
   * (the guest places each span straight into the caller's buffer).
   * 0 = one span up to half the region, as for g2d, which the daemon reads
   * in place. */
  size_t chunk_max;
  size_t chunk_big; /* messages of >= 8 chunk_big use spans of chunk_big (0 = never) */
  void (*on_chunk)(void *ctx);
  void *chunk_ctx;
  /* consumer-private */
  uint64_t rd;       /* ring bytes fed to the assembler */
  uint64_t data_end; /* end of the last data span resolved */
} wire__shm_dir;

/* The daemon's replies above this travel as spans of this size (chunk_max
 * above): small enough that the guest's copy of one span overlaps the
 * daemon's write of the next, large enough that a span's frame (~1 us of
 * work on both sides) is noise next to its copy (~25-50 us). */
#define WIRE__SHM_D2G_CHUNK ((size_t)512 << 10)
/* Replies of 64 MiB and more go as 8 MiB spans instead: large enough for
 * the guest to split its copy-out over two threads (WIRE__PAR_COPY_MIN),
 * small enough that the copies still overlap (1/32 of a 256 MiB reply is
 * copied before the guest starts). */
#define WIRE__SHM_D2G_CHUNK_BIG ((size_t)8 << 20)

#define WIRE__SHM_HEAD      0
#define WIRE__SHM_TAIL      64
#define WIRE__SHM_SLEEPING  128
#define WIRE__SHM_WAITING   192
#define WIRE__SHM_DATA_TAIL 256

static inline uint64_t *wire__shm_u64(const wire__shm_dir *d, size_t off) {
  return (uint64_t *)(d->ctl + off);
}
static inline uint32_t *wire__shm_u32(const wire__shm_dir *d, size_t off) {
  return (uint32_t *)(d->ctl + off);
}

size_t wire__shm_size(uint64_t r, uint64_t d);
/* Points g2d and d2g into a mapped region of wire__shm_size(r, d) bytes. */
void wire__shm_bind(uint8_t *base, uint64_t r, uint64_t d, wire__shm_dir *g2d, wire__shm_dir *d2g);
void wire__shm_init(uint8_t *base, uint64_t r, uint64_t d);
/* Checks the header of a region the peer made. */
int wire__shm_check(const uint8_t *base, size_t size, uint64_t r, uint64_t d);

/* An outgoing message in progress (resumable after -EAGAIN). */
typedef struct wire__shm_tx {
  uint8_t version, kind;
  uint64_t id;
  uint32_t aux; /* BATCH count */
  const struct iovec *iov;
  int cnt;
  size_t len;
  size_t off; /* payload bytes already handed over */
  bool done;
} wire__shm_tx;

/* Moves as much of tx as space allows.  Returns 0 when the whole message is
 * published, -EAGAIN when ring or data space ran out (call again after the
 * consumer frees some), <0 on error.  Single producer per direction.
 * *published is set when at least one frame was published (ring the
 * consumer's doorbell if it sleeps). */
int wire__shm_tx_step(wire__shm_dir *d, wire__shm_tx *tx, bool *published);

/* Producer, when idle (same lock as tx_step): returns the data-region pages
 * above WIRE__SHM_DATA_WARM to the kernel if the consumer has released every
 * span and none reached there for WIRE__SHM_TRIM_IDLE_NS.  Returns 1 if it
 * trimmed, 0 if not, or a negative errno from madvise. */
int wire__shm_trim(wire__shm_dir *d, uint64_t now_ns);

/* Consumer: the readable bytes as up to two contiguous pieces starting at
 * rd.  Returns 0 or -EPROTO (head moved impossibly). */
int wire__shm_readable(wire__shm_dir *d, const uint8_t **p1, size_t *n1, const uint8_t **p2,
                       size_t *n2);
/* Consumer: copies n ring bytes from position pos into dst, across the wrap
 * (ring_write's other direction); n <= d->r. */
void wire__shm_copy_out(const wire__shm_dir *d, uint64_t pos, void *dst, size_t n);
/* Consumer: maps a descriptor; records data_end.  NULL if out of bounds. */
const uint8_t *wire__shm_resolve(wire__shm_dir *d, uint64_t pos, uint32_t len);
/* Consumer: publishes tail = rd and data_tail = data_end.  Returns true if
 * the producer waits for space (ring its doorbell). */
bool wire__shm_release(wire__shm_dir *d);
/* Consumer about to block: sets sleeping, fences, and returns true if data
 * arrived meanwhile (then do not block; sleeping is cleared). */
bool wire__shm_sleep_prepare(wire__shm_dir *d);
void wire__shm_sleep_done(wire__shm_dir *d);
/* Producer after publishing: true if the consumer sleeps (ring it). */
bool wire__shm_consumer_sleeps(wire__shm_dir *d);
/* Producer blocked on space: set/clear waiting (set fences). */
void wire__shm_wait_set(wire__shm_dir *d, bool on);

/* Spinning before sleeping (both sides; shm and TCP).  Returns the spin budget in us:
 * TALLY_WIRE_SPIN_US from the environment when set (0 = never spin, capped
 * at 1000), else WIRE__SPIN_US_AUTO on hosts with >= 4 online CPUs (idle
 * cores make a spin cheap and save a ~5-10 us wakeup per message on a VM),
 * else small_host_us (with 2 CPUs a spinning side steals the CPU its peer
 * needs: the daemon's spin measured 6x slower there). */
#define WIRE__SPIN_US_AUTO 50
int wire__spin_us(int small_host_us);

static inline void wire__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

int wire__efd_ring(int fd);
void wire__efd_drain(int fd);

/* Direct reading (wire.h, wire_tenant_direct; direct.c).  Who reads the g2d
 * ring, or a TCP tenant's socket (the owner word; "the ring" below is
 * either): the loop (LOOP); the tenant's executor, polling or
 * busy elsewhere (READER), consuming a frame (TAKING) or running the
 * requests of the frame it consumed (RUNNING); nobody, the transport being
 * closed (CLOSED).  Invariants:
 *   - only the owner touches the consumer side (rd, data_end, tail); the
 *     loop's copy is in its shm_stp, the reader's in g2d below, and each is
 *     copied into the other at the hand-off, under the owner word's
 *     release/acquire;
 *   - the loop hands the ring over (LOOP -> READER) only when it is empty,
 *     its framing state idle and the tenant not paused, and only while a
 *     reader holds a reference;
 *   - the reader consumes a frame only after READER -> TAKING succeeded,
 *     and publishes RUNNING only once rd and the tail moved past it; it
 *     gives the ring back (READER -> LOOP) without consuming the frame it
 *     refused, and after running returns it to itself (RUNNING -> READER)
 *     only if the loop did not take it meanwhile;
 *   - the reader gives back, unread, a BATCH frame longer than
 *     WIRE__DR_BURST_BYTES: a burst is read by the loop while the reader
 *     runs what came before it;
 *   - the loop takes the ring back (READER or RUNNING -> LOOP, never from
 *     TAKING) when bytes have waited unread for WIRE__DR_STUCK_NS, the
 *     reader being busy with a request (its own or one the loop queued):
 *     frames only the loop reads (a host function's wait, a blob, a
 *     descriptor, a heartbeat) never wait for a request that may itself be
 *     waiting for them;
 *   - the region stays mapped until the last reference goes (the transport
 *     gives its mapping to this struct when it closes), and a TCP reader's
 *     dup of the socket stays open as long (the transport shuts the
 *     connection down when it closes);
 *   - CLOSED is stored whatever the state: a reader that was TAKING then
 *     stores RUNNING over it and may read on until its executor sees the
 *     tenant closed (which runs nothing more); it only ever reads the mapped
 *     region or its own socket, whose end it finds. */
enum {
  WIRE__DR_LOOP = 0,
  WIRE__DR_READER = 1,
  WIRE__DR_CLOSED = 2,
  WIRE__DR_TAKING = 3,
  WIRE__DR_RUNNING = 4
};
/* How long bytes may wait in a ring its reader holds before the loop takes
 * the ring back (wire_server_opts_t.lc_direct_stuck_us overrides): longer
 * than a launch burst's run (a few launches of 4 us), short next to what a
 * blocked request waits for. */
#define WIRE__DR_STUCK_NS 50000u
/* The longest BATCH frame the reader takes itself.  A frame is copied out
 * whole before any of it runs, so a reader that took a burst's frame (tens of
 * launches, kilobytes written by the guest's core) would copy it on the
 * request path; the loop reads it instead, message by message, while the
 * reader issues the launches before it, as two stages of one pipeline.  A
 * request's few posts and its call (under 1 KiB) stay the reader's. */
#define WIRE__DR_BURST_BYTES 4096u

/* The owner word: the state above in its low 3 bits and, above them, a
 * generation the loop advances at every hand-over, so a reader's
 * compare-and-swap made from a word it read before the loop took the ring
 * back and handed it over again fails (the ABA case: a reader that copied a
 * frame the loop then consumed must not consume from the new position). */
static inline unsigned wire__dr_state(unsigned w) {
  return w & 7u;
}
static inline unsigned wire__dr_word(unsigned w, unsigned state) {
  return (w & ~7u) | state;
}

struct wire_direct {
  _Atomic unsigned owner;  /* wire__dr_state / generation */
  _Atomic int refs;        /* the tenant's, + 1 while a reader holds it (wire_tenant_direct) */
  _Atomic uint64_t rx_ns;  /* the reader's last frame consumed */
  _Atomic uint64_t frames; /* frames the reader consumed */
  _Atomic uint64_t given;  /* frames it gave back to the loop, or the loop took back */
  uint64_t stuck_ns;       /* the loop's reclaim delay (WIRE__DR_STUCK_NS or the option) */
  wire_tenant_t *t;        /* its call table (the reader holds a ref on t) */
  int (*add_call)(wire_tenant_t *t, uint64_t id); /* records a CALL read (server.c) */
  uint8_t version;
  wire__shm_dir g2d;       /* the reader's consumer side (owner == READER) */
  int efd_tx;              /* shm: a dup of the guest's tx doorbell (waiting for space); -1 */
  int fd;                  /* TCP: a dup of the socket (its number is never reused while
                              the reader may use it); -1 over shared memory */
  void *map;               /* the region, once the transport closed */
  size_t map_len;
  uint8_t *buf;            /* one frame copied out (WIRE__HDR_LEN + WIRE_DIRECT_MAX) */
  /* TCP: bytes wire_direct_ready peeked into buf (0: none), under owner word
   * peek_w: while the word is unchanged nobody consumed from the socket, so
   * the next read starts from them instead of peeking again. */
  size_t peek_n;
  unsigned peek_w;
};

/* Loop thread, at WELCOME: one reference, the tenant's.  add_call records
 * each CALL the reader takes (wire__tenant_add_call). */
wire_direct_t *wire__direct_new(wire_tenant_t *t, const wire__shm_dir *g2d, int efd_tx,
                                uint8_t version, int (*add_call)(wire_tenant_t *t, uint64_t id));
/* The same for a TCP tenant's socket fd (server-tcp.c): the reader peeks at
 * the socket's bytes and consumes a frame only once it claimed it. */
wire_direct_t *wire__direct_new_tcp(wire_tenant_t *t, int fd, uint8_t version,
                                    int (*add_call)(wire_tenant_t *t, uint64_t id));
/* Loop thread: hands the ring over (LOOP -> READER, a new generation); the
 * caller copied its consumer side into the reader's first. */
void wire__direct_hand_over(wire_direct_t *d);
/* Loop thread: takes the ring back from a reader that holds it (READER or
 * RUNNING -> LOOP, counted as given back).  True when the loop owns it now
 * (also when the reader had given it back), false while TAKING. */
bool wire__direct_reclaim(wire_direct_t *d);


#endif /* TALLY_WIRE_SHM_H */
