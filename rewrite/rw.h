/* rw.h: the public API of rewrite/: fatbins, PTX parsing and printing, and
 * the kernel transformations that make best-effort kernels sliceable and
 * preemptible.  Parsers and transforms refuse with a reason in an rw_diag,
 * never abort: their input comes from tenants.
 */
#ifndef TALLY_RW_H
#define TALLY_RW_H

#include <stddef.h>

/* Why a parse or transform refused: position and text. */
typedef struct rw_diag {
  int line;       /* 1-based line of the input, 0 if not positional */
  int column;     /* 1-based column, 0 if unknown */
  int code;       /* negative errno value (-EPROTO for bad input) */
  char text[256]; /* human-readable reason */
} rw_diag_t;

/* Records a refusal in *d (may be NULL) and returns code. printf-style. */
int rw_diag_set(rw_diag_t *d, int code, int line, int column, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Formats *d as "line:col: text" into buf (always NUL-terminated). */
void rw_diag_format(const rw_diag_t *d, char *buf, size_t len);

/* ---- fatbin reader (rewrite/fatbin*.c) ---- */
/* Reads the device-code images a tenant registers or loads: raw fatbins,
 * cubins, PTX text, and host ELF files (executables, .so, .o) whose
 * .nv_fatbin section holds one or more fatbins.  Byte formats are tables in
 * rewrite/fatbin-int.h.  The reader never copies or trusts the image: every
 * size is checked against the bytes present, and decompression (LZ4 and
 * ZSTD, every mode nvcc 13 emits) is bounded by a caller-given maximum. */
#include <stdint.h>

/* What rw_fatbin_open() found at the start of an image. */
typedef enum rw_image_kind {
  RW_IMAGE_UNKNOWN = 0,
  RW_IMAGE_FATBIN,   /* fatbin header, magic 0xBA55ED50 */
  RW_IMAGE_CUBIN,    /* ELF with e_machine EM_CUDA: SASS only, one entry */
  RW_IMAGE_PTX,      /* PTX text: one entry */
  RW_IMAGE_HOST_ELF, /* host ELF with a .nv_fatbin section */
} rw_image_kind_t;

/* Entry kinds as stored in the fatbin (other values are passed through). */
#define RW_FATBIN_KIND_PTX 1u
#define RW_FATBIN_KIND_ELF 2u

/* Entry flags as stored in the fatbin (fatbin-int.h says how we know). */
#define RW_FATBIN_FLAG_64BIT 0x1ull
#define RW_FATBIN_FLAG_DEBUG 0x2ull
#define RW_FATBIN_FLAG_LINUX 0x10ull
#define RW_FATBIN_FLAG_LZ4   0x2000ull /* payload is one raw LZ4 block */
#define RW_FATBIN_FLAG_ZSTD  0x8000ull /* payload is one zstd frame */

typedef enum rw_fatbin_comp {
  RW_FATBIN_COMP_NONE = 0,
  RW_FATBIN_COMP_LZ4,
  RW_FATBIN_COMP_ZSTD,
} rw_fatbin_comp_t;

/* Default bound on one decompressed entry (rw_fatbin_extract max_size 0):
 * the largest PTX we know of (a full PyTorch build) is tens of MiB. */
#define RW_FATBIN_DEFAULT_MAX_ENTRY (256u << 20)

/* One entry of an image, as rw_fatbin_next() reports it. */
typedef struct rw_fatbin_entry {
  unsigned index;         /* 0-based position over the whole image */
  unsigned container;     /* 0-based fatbin within the image (host ELFs hold several) */
  unsigned kind;          /* RW_FATBIN_KIND_PTX, RW_FATBIN_KIND_ELF, or a raw other value */
  unsigned arch;          /* SM number: 90 for sm_90 / compute_90; 0 if unknown */
  unsigned version_major; /* PTX ISA version for PTX, ELF version for cubins */
  unsigned version_minor; /* ditto */
  uint64_t flags;         /* RW_FATBIN_FLAG_* bits as stored */
  rw_fatbin_comp_t comp;  /* how the payload is stored */
  size_t payload_offset;  /* payload start, in bytes from the image start */
  size_t stored_size;     /* payload bytes as stored (compressed size if compressed) */
  size_t size;            /* bytes after decompression (== stored_size if not) */
} rw_fatbin_entry_t;

/* An open image: a cursor over its entries.  Not thread-safe; one owner. */
typedef struct rw_fatbin rw_fatbin_t;

/* Opens image[0, len) and detects its kind.  The image is not copied and
 * must outlive *out.  Returns 0, -EINVAL for NULL arguments, -ENOMEM, or
 * -EPROTO (with a reason in diag) when the image is none of the kinds above
 * or its outer headers are malformed.  Entries are checked as they are
 * reached by rw_fatbin_next(). */
int rw_fatbin_open(const void *image, size_t len, rw_fatbin_t **out, rw_diag_t *diag);

/* Frees an image cursor; accepts NULL. */
void rw_fatbin_free(rw_fatbin_t *fb);

rw_image_kind_t rw_fatbin_image_kind(const rw_fatbin_t *fb);

/* Advances to the next entry.  Returns 1 with *e filled, 0 after the last
 * entry, or -EPROTO (diag says where) when the next header is malformed;
 * after an error every further call returns the same error.  O(1) work per
 * call except skipping zero padding between fatbins. */
int rw_fatbin_next(rw_fatbin_t *fb, rw_fatbin_entry_t *e, rw_diag_t *diag);

/* Restarts the cursor at the first entry. */
void rw_fatbin_rewind(rw_fatbin_t *fb);

/* Copies entry e's payload, decompressed, into a new malloc'd buffer that
 * the caller frees.  The buffer holds *out_len bytes plus a NUL after them;
 * for PTX, *out_len is the text length (trailing NUL padding dropped).
 * max_size bounds the decompressed size (0: RW_FATBIN_DEFAULT_MAX_ENTRY),
 * checked before allocating.  Returns 0, -EINVAL, -ENOMEM, -EFBIG (over
 * max_size) or -EPROTO (corrupt compressed data). */
int rw_fatbin_extract(const rw_fatbin_t *fb, const rw_fatbin_entry_t *e, size_t max_size,
                      void **out, size_t *out_len, rw_diag_t *diag);

/* Convenience for the daemon: the PTX of image best suited to an sm_`arch`
 * device (the highest PTX arch <= arch; arch 0 takes the highest of all).
 * Returns 0 with *ptx (malloc'd, NUL-terminated, caller frees) and
 * *ptx_arch set; returns 0 with *ptx NULL when the image holds no usable
 * PTX ("no PTX: not transformable" -- a result, not an error), or a negative
 * errno as rw_fatbin_open/next/extract do. */
int rw_fatbin_ptx(const void *image, size_t len, unsigned arch, char **ptx, size_t *ptx_len,
                  unsigned *ptx_arch, rw_diag_t *diag);

/* For the guest, in its own process: the byte length of an image passed to
 * cuModuleLoadData / cuLibraryLoadData (which take no length), or of the
 * fatbin a __fatBinC_Wrapper_t (magic 0x466243B1) points to.  Sets *data to
 * the first byte to send (the fatbin for a wrapper, image otherwise) and
 * *len to its size.  Reads headers through the pointer: only for memory the
 * caller owns, never for bytes from the wire.  Returns 0 or -EPROTO. */
int rw_fatbin_image_size(const void *image, const void **data, size_t *len);

/* Static names for printing: "PTX"/"ELF"/"other", "none"/"lz4"/"zstd",
 * "fatbin"/"cubin"/"ptx"/"host-elf"/"unknown". */
const char *rw_fatbin_kind_name(unsigned kind);
const char *rw_fatbin_comp_name(rw_fatbin_comp_t comp);
const char *rw_image_kind_name(rw_image_kind_t kind);

/* ---- PTX IR, parser, printer (rewrite/ptx-*.c) ---- */

/* A parsed PTX module (opaque; its IR lives in rewrite/rw-int.h).  The
 * parser is a tokenizer plus recursive descent; it accepts the PTX that
 * nvcc, NVRTC, numba and Triton emit (directives, globals, .func/.entry with
 * params, register ranges, labels, predicated instructions, vector operands,
 * scopes, pragmas, .loc/.file, .section .debug_* and @@DWARF lines). */
typedef struct rw_ptx_module rw_ptx_module_t;

/* Largest PTX text rw_ptx_parse() accepts (bytes): far above any real
 * module (the biggest CUB instantiation we saw is a few MiB), small enough
 * that a hostile tenant cannot make the daemon allocate without bound. */
#define RW_PTX_MAX_LEN (256u << 20)

/* Parses len bytes of PTX text (need not be NUL-terminated).  On success
 * returns 0 and stores a module the caller frees with rw_ptx_free().  On bad
 * input returns -EPROTO and fills *d (line, column, reason); -ENOMEM,
 * -EMSGSIZE (len > RW_PTX_MAX_LEN) otherwise.  Never aborts. */
int rw_ptx_parse(const char *text, size_t len, rw_ptx_module_t **out, rw_diag_t *d);

/* Prints m as PTX text into a malloc'd, NUL-terminated buffer *out (caller
 * frees; *out_len excludes the NUL).  Comments are dropped; everything else
 * keeps its meaning (ptxas gives the same SASS).  0 or -ENOMEM. */
int rw_ptx_print(const rw_ptx_module_t *m, char **out, size_t *out_len);

/* Frees m and everything it owns.  Accepts NULL. */
void rw_ptx_free(rw_ptx_module_t *m);

/* Number of .entry functions with a body, and the i-th one's name (owned
 * by m; NULL if i is out of range). */
size_t rw_ptx_entry_count(const rw_ptx_module_t *m);
const char *rw_ptx_entry_name(const rw_ptx_module_t *m, size_t i);

/* The kernel parameters of the i-th entry (as rw_ptx_entry_name counts):
 * for each of the first cap parameters, its size in bytes (a vector or
 * array counts whole) and alignment (.align N, else its element size).
 * Returns the entry's parameter count (may exceed cap), or -ENOENT (no such
 * entry) / -EPROTO (a parameter whose type we do not know). */
int rw_ptx_entry_params(const rw_ptx_module_t *m, size_t i, uint32_t *size, uint32_t *align,
                        size_t cap);

/* ---- transformations (rewrite/xform-*.c) ---- */

/* Each transformation adds a NEW .entry to the module; the original stays.
 *
 * Slicing: NAME__tally_slice.  Parameters: the original ones, then
 *
 *   param            type  meaning
 *   tally_gx         .u32  original grid dim x
 *   tally_gy         .u32  original grid dim y
 *   tally_gz         .u32  original grid dim z
 *   tally_block_offset .u64 first original linear block index of this slice
 *
 * Launch with a 1-D grid of S blocks and the original block shape and
 * dynamic shared memory.  Block b runs original linear block L = offset + b;
 * blocks with L >= gx*gy*gz exit at once.  %ctaid = (L % gx, (L / gx) % gy,
 * L / (gx*gy)); %nctaid = (gx, gy, gz).
 *
 * Both kinds need gx*gy*gz < 2^32 (or gy = gz = 1); a launch of a bigger grid
 * traps (launch the original for it): the 64-bit division it would need costs
 * every transformed kernel registers.
 *
 * Preemptible persistent thread blocks: NAME__tally_ptb.  Parameters: the
 * original ones, then tally_gx, tally_gy, tally_gz (.u32, as above) and
 *
 *   tally_ctl        .u64  device pointer to the 16-byte control block
 *   tally_first      .u64  first index of this launch's static range
 *   tally_nstatic    .u32  S: size of the static range, S <= W (else trap)
 *   tally_batch      .u32  B: most indices one take may claim (0 means 1)
 *
 * Control block (device memory, 16-byte aligned: thread 0 reads bytes
 * 0..15 with one vector load):
 *
 *   offset size  meaning
 *   0      8     u64 next original linear block index to take; workers
 *                take indices with atom.global.add.u64 (it may run past the
 *                total: a worker that takes an index >= total stops)
 *   8      4     u32 preempt flag: nonzero = workers stop before taking
 *                another index (read with ld.volatile before each take)
 *   12     4     u32 reserved, keep 0
 *
 * Launch with W worker blocks (1-D grid) of the original block shape and
 * dynamic shared memory; W = min(total, one wave of resident workers) is
 * what the benchmarks measure.  Worker w < S first runs index
 * tally_first + w without touching the control block (a static index: no
 * atomic, no flag check, no barrier before it); then every worker takes
 * indices dynamically, b = min(B, max((total - next) / W / 2, 1)) per
 * atomic: the worker runs all b (the flag is read once per batch), and
 * batches shrink to single indices as the grid runs out, so no worker is
 * left with a long tail.  Pick B so that B blocks take a few microseconds
 * at most (preemption waits for a batch to finish; B = 1 is the plain
 * loop); B > 1 pays off for long grids of short blocks, whose same-address
 * atomics otherwise serialize in L2.  So the host, which has the control block written
 * before each launch anyway, passes the static range to the launch and
 * moves word 0 past it:
 *
 *   fresh launch:  word 0 = S, flag = 0, tally_first = 0,
 *                  tally_nstatic = S = min(W, total)
 *   after a drain: word 0 = next + S', flag = 0, tally_first = next (word 0
 *                  as the drained launch left it), tally_nstatic = S' =
 *                  min(W, total - next), or S' = 0 (word 0 unchanged)
 *
 * S = 0 gives the plain dynamic loop (a zeroed control block).  When
 * tally_first + S >= total no index is left to take and workers exit after
 * their static index without reading the control block at all: a grid that
 * fits in W workers costs no atomic.  Static indices ignore the flag: each
 * is one block run by a resident worker (hence S <= W, and W <= one wave
 * keeps the latency to one block), like an index taken just before the flag
 * was set.  A taken index always runs to its end, so after a preemption
 * (flag set, kernel drained) a relaunch as above resumes exactly where it
 * stopped: indices < word 0 have all run, none >= word 0 has; the kernel is
 * complete when word 0 >= gx*gy*gz after a launch drains.
 *
 * Unified synchronization (PTB): ret/exit in the body become branches to a
 * per-index epilogue where thread 0 takes the next index and every thread
 * meets at the loop's one barrier per index (the lowest id the body does
 * not use), which also publishes that index; the body's own barriers stay
 * as they are.  PTB is refused (RW_REFUSE_BARRIER,
 * RW_REFUSE_WARPSYNC) when a control-flow and uniformity analysis finds that
 * some threads can finish the body while others of the block can still
 * reach a CTA-wide barrier or a warp-synchronous instruction with a fixed
 * member mask: the original relies on finished threads having exited (PTX
 * ISA: a barrier waits for all non-exited threads of the warp), which a
 * worker that must run the next index cannot do.  Such kernels are sliced.
 * (An emulation of the barriers for finished threads failed on an H200;
 * xform-apply.c records why.)
 */
/*
 * Blocks that give up: NAME__tally_flush.  A block preempted between its
 * thread blocks still runs each block to its end, so a kernel of long
 * blocks keeps the GPU for a whole block.  This form lets a running block
 * give up and be run again from its start later, which is correct only
 * while the block has had no effect outside itself: so every thread
 * COMMITS its block (one shared word, compare-and-swap) before its first
 * global store, global or generic atomic, surface write, bulk copy to
 * global memory or call; once one thread committed, the block runs to its
 * end as before.  Parameters: the original ones, then tally_gx, tally_gy,
 * tally_gz, tally_block_offset (as for slicing), and
 *
 *   tally_ctl        .u64  device pointer to this launch's control block
 *   tally_redo       .u64  0, or the control block of an earlier launch
 *                          whose given-up blocks this launch runs again
 *
 * Control block (device memory, 4-byte aligned; 16 + 4 * gridDim.x bytes):
 *
 *   offset size  meaning
 *   0      4     u32 give-up flag: nonzero = blocks give up at their next
 *                poll (read with ld.volatile)
 *   4      4     u32 n, blocks that gave up (atom.global.add)
 *   8      8     reserved, keep 0
 *   16     4*n   u32 original linear block index of each of them, any order
 *
 * Launch with a 1-D grid of S blocks of the original block shape.  With
 * tally_redo = 0, block b runs original block L = offset + b (as slicing);
 * otherwise block b < redo.n runs redo's b-th index and the others exit at
 * once (launch the redo with S >= redo.n).  A block polls the flag once
 * every 64 backward branches of each thread; when it is set and nothing
 * committed, the first thread to see it marks the block given up, records
 * L in the control block and exits, and the others exit at their next
 * poll, commit or barrier.  The flag is cleared by the host before the
 * launch (write the whole control block's first 16 bytes).  So after a
 * launch with the flag raised, relaunch with tally_redo pointing at its
 * control block until a launch ends with n = 0, then go on with the next
 * offsets.  Costs: one barrier at the start of each block, a counter per
 * backward branch, a shared compare-and-swap at each thread's first
 * effect.  Refused (RW_REFUSE_BARRIER, RW_REFUSE_FLUSH) for barriers with
 * a thread count (a thread that gave up never arrives) and for mbarrier,
 * wgmma, setmaxnreg, griddepcontrol and tcgen05 code (their pipelines
 * cannot be left halfway).
 */
typedef enum rw_xform_kind {
  RW_XFORM_SLICE = 0, /* NAME__tally_slice */
  RW_XFORM_PTB = 1,   /* NAME__tally_ptb */
  RW_XFORM_FLUSH = 2, /* NAME__tally_flush */
  RW_XFORM_KIND_COUNT
} rw_xform_kind_t;

/* Bits for rw_transform_ptx()'s kinds_mask. */
#define RW_XFORM_MASK(kind) (1u << (kind))
#define RW_XFORM_MASK_ALL   ((1u << RW_XFORM_KIND_COUNT) - 1)

/* Suffix of the added entry for each kind ("__tally_slice", "__tally_ptb"). */
const char *rw_xform_suffix(rw_xform_kind_t kind);

/* The host's side of a PTB launch of `workers` workers (table above): the
 * value to write into control word 0 (with the flag and reserved word 0)
 * and the launch's tally_first and tally_nstatic.  next is 0 for a fresh
 * launch, else word 0 as the drained launch left it; statics = 0 gives
 * S = 0 (word 0 stays next).  Returns 0 (launch), 1 when next >= total (the
 * kernel is complete: launch nothing), or -EINVAL (out NULL, workers or
 * total 0).  (rewrite/ptb-host.c) */
typedef struct rw_ptb_launch {
  uint64_t word0;   /* control block word 0 */
  uint64_t first;   /* tally_first */
  uint32_t nstatic; /* tally_nstatic: min(workers, total - next), or 0 */
} rw_ptb_launch_t;

int rw_ptb_plan(uint64_t total, uint64_t next, uint32_t workers, int statics, rw_ptb_launch_t *out);

/* Why a transformation refused an entry: one X-macro list gives the enum and
 * rw_refusal_name().  RW_REFUSE_NONE means it was transformed. */
#define RW_REFUSAL_MAP(XX)                                                                         \
  XX(NONE, "none")                                                                                 \
  XX(COOPERATIVE, "cooperative launch / grid sync")                                                \
  XX(CLUSTER, "thread block clusters")                                                             \
  XX(SMID, "%smid/%nsmid/%gridid dependence")                                                      \
  XX(DYNPAR, "dynamic parallelism")                                                                \
  XX(UNPARSED, "not fully understood")                                                             \
  XX(CALLEE, "callee reads %ctaid/%nctaid or exits")                                               \
  XX(BARRIER, "unsupported barrier pattern")                                                       \
  XX(WARPSYNC, "fixed-mask warp sync after a divergent finish")                                    \
  XX(NAME_CLASH, "name clash with tally_ names")                                                   \
  XX(FLUSH, "pipeline a block cannot give up halfway")                                             \
  XX(NO_ENTRY, "no such entry")

typedef enum rw_refusal {
#define RW__REFUSAL_ENUM(name, text) RW_REFUSE_##name,
  RW_REFUSAL_MAP(RW__REFUSAL_ENUM)
#undef RW__REFUSAL_ENUM
      RW_REFUSE_COUNT
} rw_refusal_t;

const char *rw_refusal_name(rw_refusal_t r);

/* Decides whether entry can be transformed with kind, without changing m.
 * 0 if it can; -ENOTSUP with *why and *d (position + reason) if it cannot;
 * -ENOENT (why = RW_REFUSE_NO_ENTRY) if there is no such entry with a body.
 * why and d may be NULL. */
int rw_xform_check(const rw_ptx_module_t *m, const char *entry, rw_xform_kind_t kind,
                   rw_refusal_t *why, rw_diag_t *d);

/* Adds the transformed copy of entry to m (see the conventions above).
 * 0, or what rw_xform_check() returns, or -ENOMEM / -EEXIST (the added name
 * already exists).  On failure m is unchanged. */
int rw_xform_apply(rw_ptx_module_t *m, const char *entry, rw_xform_kind_t kind, rw_diag_t *d);

/* Per-entry outcome of rw_transform_ptx(). */
typedef struct rw_xform_entry_report {
  char *name;                            /* original entry name (malloc'd) */
  int status[RW_XFORM_KIND_COUNT];       /* 0 added, <0 refused/failed, 1 not asked */
  rw_refusal_t why[RW_XFORM_KIND_COUNT]; /* RW_REFUSE_NONE when added */
  char reason[RW_XFORM_KIND_COUNT][160]; /* "line:col: text" of the refusal */
} rw_xform_entry_report_t;

typedef struct rw_xform_report {
  int parse_status;                 /* 0, or rw_ptx_parse()'s error */
  rw_diag_t parse_diag;             /* why parsing failed */
  size_t n_entries;                 /* entries[] length */
  rw_xform_entry_report_t *entries; /* malloc'd; rw_xform_report_free() */
} rw_xform_report_t;

/* One-shot: parses ptx, applies every kind in kinds_mask to every entry it
 * can, prints the result into *out_ptx (malloc'd, NUL-terminated; the
 * original entries stay).  report (may be NULL) says per entry what was added
 * or refused and why; free it with rw_xform_report_free().  Returns 0 when
 * the module parsed and printed (even if every entry was refused), the parse
 * error (-EPROTO...) otherwise, -ENOMEM on allocation failure. */
int rw_transform_ptx(const char *ptx, size_t len, unsigned kinds_mask, char **out_ptx,
                     size_t *out_len, rw_xform_report_t *report);
void rw_xform_report_free(rw_xform_report_t *r);

/* ---- compile cache (rewrite/cache.c) ---- */

/* Compiles src (PTX text, len bytes) into a malloc'd image for the cache.
 * The daemon passes cuModuleLoadDataEx/cuLinkComplete or nvPTXCompiler; CPU
 * tests pass a callback that runs ptxas.  0 or a negative errno. */
typedef int (*rw_cache_compile_fn)(void *ctx, const void *src, size_t len, void **image,
                                   size_t *image_len);

typedef struct rw_cache rw_cache_t;

/* Opens (creating if needed, mode 0700) the cache directory dir. */
int rw_cache_open(const char *dir, rw_cache_t **out);
void rw_cache_close(rw_cache_t *c); /* accepts NULL */

/* Returns in *image (malloc'd, caller frees) the compiled image of src under
 * the compile configuration named by tag (e.g. "sm_90 -O3"): from the cache if
 * a verified entry exists (*hit = true), else by calling compile and storing
 * the result atomically (temp file + rename).  Corrupt entries are ignored
 * and replaced.  Key = XXH3-64 of src seeded with XXH3-64 of tag.  0 or negative errno (the
 * compile callback's error is returned as is). */
int rw_cache_get(rw_cache_t *c, const void *src, size_t len, const char *tag,
                 rw_cache_compile_fn compile, void *ctx, void **image, size_t *image_len, int *hit);

#endif /* TALLY_RW_H */
