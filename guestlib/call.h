/* call.h: the CUDA call protocol spoken between guestlib/ and hostd/.
 *
 * wire/ carries frames and knows no CUDA; this header says what is inside a
 * frame.  Both sides include it (hostd/ reads guestlib/call.h and nothing
 * else of guestlib/).  One tenant has one ordered channel: the guest sends
 * requests in program order, the host executes them in that order and answers
 * every request that is not GUEST_CALL_ASYNC, in order, so no sequence number
 * is needed.  Fire-and-forget requests (launches, async copies and memsets,
 * event records) are batched by the guest and sent ahead of the next
 * synchronous request; their errors are kept by the host and returned by the
 * next request flagged GUEST_CALL_SYNCPOINT (stream/event/context
 * synchronize, queries, synchronous copies), as CUDA reports asynchronous
 * errors.  All integers are little-endian; handles and device pointers are the
 * host's own values (identity-mapped, BRIEF decision 2) carried as u64.
 *
 * Each request is one wire payload (a wire post when GUEST_CALL_ASYNC, else
 * a wire call whose reply payload is the reply below).
 * Request header (16 bytes), followed by `len` bytes of arguments:
 *   OFFSET SIZE MEANING
 *   0      4    op (enum guest_op)
 *   4      4    flags: bit 0 GUEST_CALL_ASYNC (no reply), bit 1 GUEST_CALL_SYNCPOINT
 *   8      4    len: bytes of arguments that follow (<= GUEST_CALL_MAX_LEN)
 *   12     4    reserved, 0
 * Reply header (8 bytes), followed by `len` bytes of results:
 *   0      4    CUresult, unchanged from the driver (or a deferred one)
 *   4      4    len (<= GUEST_CALL_MAX_LEN)
 *
 * Argument layouts are listed with each op below as "args -> results"; u64 h
 * is a handle, p a device pointer, s a stream (0 legacy NULL stream of this
 * tenant, 1 CU_STREAM_LEGACY, 2 | N << 32 the per-thread default stream of
 * the tenant's thread N (N >= 1), else a host stream).
 */
#ifndef TALLY_GUEST_CALL_H
#define TALLY_GUEST_CALL_H

#include <stddef.h>
#include <stdint.h>

#define GUEST_CALL_ASYNC     1u
#define GUEST_CALL_SYNCPOINT 2u
#define GUEST_CALL_HDR_LEN   16
#define GUEST_REPLY_HDR_LEN  8
/* One frame holds at most 16 MiB of arguments: copies are cut into chunks of
 * GUEST_CALL_CHUNK so neither side ever buffers a whole 64 MiB transfer, and
 * a decoder can refuse a larger length before allocating. */
#define GUEST_CALL_MAX_LEN  (16u << 20)
#define GUEST_CALL_CHUNK    (8u << 20)
#define GUEST_BLOB_MAX      (1u << 30) /* 1 GiB: cuBLASLt's largest fatbins are far below */
#define GUEST_PROTO_VERSION 2          /* 2: 16 function attributes and their valid mask */
#define GUEST_NAME_MAX      256
#define GUEST_ATTR_MAX      160 /* > CU_DEVICE_ATTRIBUTE_MAX of CUDA 13.0 (148) */
#define GUEST_MAX_DEVICES   16
#define GUEST_MAX_PARAMS    1024 /* kernel parameters per function */

/* X(op, name): the op list, one place.  Layouts:
 * HELLO        u32 version, u32 priority(0 lc,1 be), name[64], token[64]
 *              -> u32 tenant, u32 ndev, ndev x guest_dev_snapshot
 * MEM_ALLOC    u64 size -> u64 p
 * MEM_FREE     u64 p
 * MEM_INFO     -> u64 free, u64 total
 * HTOD         u64 p, u64 s, u32 async, bytes...      (chunk)
 * DTOH         u64 p, u64 len, u64 s -> bytes
 * DTOD         u64 dst, u64 src, u64 len, u64 s
 * MEMSET       u64 p, u32 value, u32 elem (1,2,4), u64 count, u64 s
 * STREAM_NEW   u32 flags, i32 priority -> u64 s
 * STREAM_DEL   u64 s
 * STREAM_SYNC  u64 s        STREAM_QUERY u64 s      CTX_SYNC (none)
 * EVENT_NEW    u32 flags -> u64 h      EVENT_DEL u64 h
 * EVENT_RECORD u64 h, u64 s, u32 flags
 * EVENT_SYNC   u64 h        EVENT_QUERY u64 h
 * EVENT_TIME   u64 start, u64 end -> f32 ms
 * STREAM_WAIT  u64 s, u64 event, u32 flags
 * MODULE_LOAD  u64 content id, u32 kind (0 module, 1 library), u32 has_image,
 *              [bytes...] -> u64 h, u32 nfunc, nfunc x guest_func_rec
 *              (the guest offers the image with wire's blob have/put first and
 *              sends has_image 0; CUDA_ERROR_FILE_NOT_FOUND: the daemon lacks it)
 * MODULE_UNLOAD u64 h, u32 kind
 * MODULE_GLOBAL u64 module, u32 kind, name... -> u64 p, u64 size
 * LAUNCH       u64 f, u32 grid[3], u32 block[3], u32 shmem, u64 s,
 *              u32 nattr, u32 argbytes, nattr x (u32 id, u32 pad, 8 value bytes x 8), args
 * FUNC_ATTR    u64 f, i32 attr -> i32 value
 * FUNC_SET_ATTR u64 f, i32 attr, i32 value
 * LIBRARY_MODULE u64 library -> u64 module, u32 nfunc, nfunc x guest_func_rec
 *              (the library's module view: CUfunctions; it dies with the library)
 * OCCUPANCY    u64 f, u32 which (0 cuOccupancyMaxActiveClusters,
 *              1 cuOccupancyMaxPotentialClusterSize), u32 grid[3], u32 block[3],
 *              u32 shmem, u32 cluster[3] (all 0: no cluster dimension
 *              attribute), i32 policy (-1: no scheduling policy attribute)
 *              -> i32 value (the guest refuses every other launch attribute)
 * HOSTFN       u64 s, u64 seq (post; cuLaunchHostFunc/cuStreamAddCallback:
 *              the guest keeps seq -> function; the daemon enqueues on s a
 *              driver host function that hands seq to HOSTFN_WAIT when the
 *              stream reaches it, then a gate that keeps s blocked until the
 *              guest says the function ran)
 * HOSTFN_WAIT  u32 done, u32 reserved -> u64 seq (a call handled on the
 *              daemon's loop thread, never queued behind the tenant's other
 *              requests: the worker may be blocked in a synchronisation that
 *              waits for exactly this host function).  done 1: the host
 *              function this call last returned has run (its gate opens).
 *              Answered when a host function of the tenant is reached (its
 *              seq), at once with seq 0 when done is 2 (the guest stops its
 *              host-function thread); one HOSTFN_WAIT may be parked at a time.
 * PINNED_COPY  u64 p, u64 tag, u64 off, u64 len, u64 s, u32 dir (0 HtoD,
 *              1 DtoH), u32 async: a copy between device memory and a pinned
 *              host allocation the guest shared as a memfd (wire_conn_send_fd,
 *              tag), done by the daemon from its own mapping: no bytes on
 *              the wire (post when async HtoD/DtoH, else a call)
 * PINNED_FREE  u64 tag (the daemon unregisters and unmaps it)
 */
#define GUEST_OP_MAP(X)                                                                            \
  X(GUEST_OP_HELLO, 1)                                                                             \
  X(GUEST_OP_MEM_ALLOC, 2)                                                                         \
  X(GUEST_OP_MEM_FREE, 3)                                                                          \
  X(GUEST_OP_MEM_INFO, 4)                                                                          \
  X(GUEST_OP_HTOD, 5)                                                                              \
  X(GUEST_OP_DTOH, 6)                                                                              \
  X(GUEST_OP_DTOD, 7)                                                                              \
  X(GUEST_OP_MEMSET, 8)                                                                            \
  X(GUEST_OP_STREAM_NEW, 9)                                                                        \
  X(GUEST_OP_STREAM_DEL, 10)                                                                       \
  X(GUEST_OP_STREAM_SYNC, 11)                                                                      \
  X(GUEST_OP_STREAM_QUERY, 12)                                                                     \
  X(GUEST_OP_CTX_SYNC, 13)                                                                         \
  X(GUEST_OP_EVENT_NEW, 14)                                                                        \
  X(GUEST_OP_EVENT_DEL, 15)                                                                        \
  X(GUEST_OP_EVENT_RECORD, 16)                                                                     \
  X(GUEST_OP_EVENT_SYNC, 17)                                                                       \
  X(GUEST_OP_EVENT_QUERY, 18)                                                                      \
  X(GUEST_OP_EVENT_TIME, 19)                                                                       \
  X(GUEST_OP_STREAM_WAIT, 20)                                                                      \
  X(GUEST_OP_MODULE_LOAD, 21)                                                                      \
  X(GUEST_OP_MODULE_UNLOAD, 22)                                                                    \
  X(GUEST_OP_MODULE_GLOBAL, 23)                                                                    \
  X(GUEST_OP_LAUNCH, 24)                                                                           \
  X(GUEST_OP_FUNC_ATTR, 25)                                                                        \
  X(GUEST_OP_FUNC_SET_ATTR, 26)                                                                    \
  X(GUEST_OP_LIBRARY_MODULE, 27)                                                                   \
  X(GUEST_OP_OCCUPANCY, 28)                                                                        \
  X(GUEST_OP_HOSTFN, 29)                                                                           \
  X(GUEST_OP_HOSTFN_WAIT, 30)                                                                      \
  X(GUEST_OP_PINNED_COPY, 31)                                                                      \
  X(GUEST_OP_PINNED_FREE, 32)

enum guest_op {
#define GUEST__OP_ENUM(name, value) name = (value),
  GUEST_OP_MAP(GUEST__OP_ENUM)
#undef GUEST__OP_ENUM
      GUEST_OP_COUNT
};

/* Device snapshot, sent once at HELLO (fixed size, no pointers):
 *   OFFSET SIZE            MEANING
 *   0      256             name, NUL-terminated
 *   256    16              UUID
 *   272    8               total memory in bytes
 *   280    8               primary context handle (the one shared context)
 *   288    4               lowest stream priority (numerically greatest)
 *   292    4               greatest stream priority
 *   296    4*GUEST_ATTR_MAX cuDeviceGetAttribute values, by attribute number
 *   936    4               the driver's answer to private table 21318c60 slot 39
 *                          for the primary context (-1: the driver gave none);
 *                          cuBLAS asks for it at its first GEMM (export.c)
 *   940    4               reserved, 0 */
typedef struct guest_dev_snapshot {
  char name[GUEST_NAME_MAX];
  uint8_t uuid[16];
  uint64_t total_mem;
  uint64_t primary_ctx;
  int32_t prio_least;
  int32_t prio_greatest;
  int32_t attr[GUEST_ATTR_MAX];
  int32_t ident_s39;
  int32_t reserved;
} guest_dev_snapshot_t;
_Static_assert(offsetof(guest_dev_snapshot_t, ident_s39) == 936, "snapshot layout (table above)");

/* UUID of the driver's private context table, 21318c60-9714-3248-8ca6-41ff7324c8f2:
 * the guest emulates it (export.c), tallyd asks its own driver for ident_s39
 * (gpu-cuda.c). */
#define GUEST_UUID_CTX_IDENT                                                                       \
  { 0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2 }

/* Function record in a MODULE_LOAD reply (variable size):
 *   0  8  function handle (CUfunction, or CUkernel for libraries)
 *   8  4  nparams (<= GUEST_MAX_PARAMS)
 *   12 4  name_len (< GUEST_FUNC_NAME_MAX)
 *   16 4  valid: bit a set when attribute a below was answered by the driver
 *         (a lazily loaded function cannot answer some, e.g. max threads per
 *         block, before it is loaded: the guest asks for those with
 *         FUNC_ATTR, which loads the function, and keeps the answer)
 *   20 64 GUEST_FUNC_ATTRS x i32: cuFuncGetAttribute values by attribute
 *         number, every CU_FUNC_ATTRIBUTE_* of CUDA 13.0 (0..15)
 *   84 .. name bytes (no NUL), then nparams x (u32 offset, u32 size) from
 *         cuFuncGetParamInfo */
#define GUEST_FUNC_NAME_MAX 4096
#define GUEST_FUNC_ATTRS    16 /* CU_FUNC_ATTRIBUTE_MAX of CUDA 13.0 */

#endif /* TALLY_GUEST_CALL_H */
