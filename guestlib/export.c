/* export.c: cuGetExportTable, the driver's private tables, emulated by UUID.
 *
 * cudart (static and shared), cuBLAS(Lt) and cuDNN ask the driver for
 * undocumented function tables by UUID (facts/export-tables.txt counts 11).
 * Each table below is one static array: slot 0 is usually the table's size
 * in bytes (the "first_word" the facts file measured on the real driver, so
 * our sizes match it), the known slots hold our functions and every other
 * slot a stub that logs "table T slot N" once and returns
 * CUDA_ERROR_NOT_SUPPORTED, so a newly used slot shows up in the log instead
 * of jumping through NULL.  Unknown UUIDs get CUDA_ERROR_INVALID_VALUE: a
 * success without a table would send the caller through garbage.
 *
 * Slot meanings are facts observed by earlier clean-room work (ZLUDA's
 * dark_api, the GX and vgpu emulators, lupine) and checked here by running
 * nvcc's static cudart against this library (tests/test-guest-cudart.sh).
 * To add a table for cuBLAS or cuDNN: add its UUID and array to `tables`.
 */
#include "guestlib/guest.h"
#include "guestlib/tally-ext.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

CUresult guest__primary_ctx(CUcontext *pctx, CUdevice dev);

/* ---- unknown-slot stubs: one function per (table, slot) so the log names it ---- */

static void slot_log(int table, int slot) {
  /* The tables by index, as the first 8 hex digits of their UUIDs (below). */
  static const char *const names[] = {"f8cff951", "6bd5fb6c", "a094798c", "42d85a81", "c693336e",
                                      "263e8860", "d4082055", "21318c60", "1734dc26", "6e163fbe",
                                      "da9151d3"};
  /* Slots whose refusal the caller survives with output identical to native
   * (measured on the H200): logged only with TALLY_LOG=debug.  Table 8 slot
   * 3: cuBLASLt at PyTorch's first bf16 GEMM under autocast (the framework
   * suite's torch amp-bf16, same loss and weights natively and through Tally
   * over shm and TCP); refused only when tallyd cannot serve it (below, table
   * 8), and then cuBLASLt's GEMMs keep launch order: the same results, about
   * 2% slower (tests/bench/RESULTS.md). */
  static const struct {
    int table, slot;
  } benign[] = {{8, 3}};
  static unsigned char seen[16][128]; /* set once per slot with __atomic_exchange_n */
  for (size_t i = 0; i < sizeof(benign) / sizeof(benign[0]); i++)
    if (benign[i].table == table && benign[i].slot == slot && !guest__debug())
      return;
  if (table < 16 && slot < 128 && !__atomic_exchange_n(&seen[table][slot], 1, __ATOMIC_RELAXED))
    guest__log("private driver table %d (%s...) slot %d is not emulated "
               "(CUDA_ERROR_NOT_SUPPORTED)",
               table, table < (int)(sizeof(names) / sizeof(names[0])) ? names[table] : "?", slot);
}

#define SLOT_STUB(t, s)                                                                            \
  __attribute__((unused)) static CUresult stub_##t##_##s(void) {                                   \
    slot_log(t, s);                                                                                \
    return CUDA_ERROR_NOT_SUPPORTED;                                                               \
  }
#define STUBS16(t)                                                                                 \
  SLOT_STUB(t, 0)                                                                                  \
  SLOT_STUB(t, 1)                                                                                  \
  SLOT_STUB(t, 2)                                                                                  \
  SLOT_STUB(t, 3)                                                                                  \
  SLOT_STUB(t, 4)                                                                                  \
  SLOT_STUB(t, 5)                                                                                  \
  SLOT_STUB(t, 6)                                                                                  \
  SLOT_STUB(t, 7)                                                                                  \
  SLOT_STUB(t, 8)                                                                                  \
  SLOT_STUB(t, 9)                                                                                  \
  SLOT_STUB(t, 10)                                                                                 \
  SLOT_STUB(t, 11)                                                                                 \
  SLOT_STUB(t, 12)                                                                                 \
  SLOT_STUB(t, 13)                                                                                 \
  SLOT_STUB(t, 14)                                                                                 \
  SLOT_STUB(t, 15)
#define S(t, s) (const void *)stub_##t##_##s
#define FILL16(t)                                                                                  \
  S(t, 0), S(t, 1), S(t, 2), S(t, 3), S(t, 4), S(t, 5), S(t, 6), S(t, 7), S(t, 8), S(t, 9),        \
      S(t, 10), S(t, 11), S(t, 12), S(t, 13), S(t, 14), S(t, 15)
#define SIZE(n) (const void *)(uintptr_t)((n) * sizeof(void *))

STUBS16(0)
STUBS16(1)
STUBS16(2)
STUBS16(3)
STUBS16(4)
STUBS16(5)
STUBS16(6)
STUBS16(7)
STUBS16(8)
STUBS16(9)
STUBS16(10)
/* Table 7 (21318c60, 93 slots as the driver sizes it): cuBLAS(Lt) reaches past
 * slot 15, so every slot logs its number instead of jumping through NULL;
 * slots 39 and 51 are emulated (below). */
/* clang-format off */
#define T7_SLOTS_16_38(X) \
  X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) \
  X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31) \
  X(32) X(33) X(34) X(35) X(36) X(37) X(38)
#define T7_SLOTS_40_50(X) \
  X(40) X(41) X(42) X(43) X(44) X(45) X(46) X(47) \
  X(48) X(49) X(50)
#define T7_SLOTS_52_92(X) \
  X(52) X(53) X(54) X(55) X(56) X(57) X(58) X(59) \
  X(60) X(61) X(62) X(63) X(64) X(65) X(66) X(67) \
  X(68) X(69) X(70) X(71) X(72) X(73) X(74) X(75) \
  X(76) X(77) X(78) X(79) X(80) X(81) X(82) X(83) \
  X(84) X(85) X(86) X(87) X(88) X(89) X(90) X(91) \
  X(92)
#define T9_SLOTS_16_98(X) \
  X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) \
  X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31) \
  X(32) X(33) X(34) X(35) X(36) X(37) X(38) X(39) \
  X(40) X(41) X(42) X(43) X(44) X(45) X(46) X(47) \
  X(48) X(49) X(50) X(51) X(52) X(53) X(54) X(55) \
  X(56) X(57) X(58) X(59) X(60) X(61) X(62) X(63) \
  X(64) X(65) X(66) X(67) X(68) X(69) X(70) X(71) \
  X(72) X(73) X(74) X(75) X(76) X(77) X(78) X(79) \
  X(80) X(81) X(82) X(83) X(84) X(85) X(86) X(87) \
  X(88) X(89) X(90) X(91) X(92) X(93) X(94) X(95) \
  X(96) X(97) X(98)
/* clang-format on */
#define T9_STUB(n)  SLOT_STUB(9, n)
#define T9_ENTRY(n) S(9, n),
T9_SLOTS_16_98(T9_STUB)
#define T7_STUB(n)  SLOT_STUB(7, n)
#define T7_ENTRY(n) S(7, n),
T7_SLOTS_16_38(T7_STUB)
T7_SLOTS_40_50(T7_STUB)
T7_SLOTS_52_92(T7_STUB)
/* ---- table 0: f8cff951-2146-8b4e-b9e2-fb469e7c0dd9, requested before cuInit.
 * Several sub-tables back to back, each led by its size; slot 1 is a logger
 * (cuDNN reports launch errors through it), slot 25 (third function of the
 * sub-table at 22) checks the runtime's requirements. ---- */

static void req_log(const char *domain, int severity, const char *fmt, va_list ap) {
  char msg[512];
  vsnprintf(msg, sizeof(msg), fmt ? fmt : "", ap);
  guest__log("%s (severity %d): %s", domain ? domain : "CUDA", severity, msg);
}

static CUresult req_check(unsigned int requirement, const void *state, const void *reqs) {
  (void)requirement, (void)state, (void)reqs;
  return CUDA_SUCCESS;
}

/* ---- table 1: 6bd5fb6c-5bf4-e74a-8987-d93912fd9df9, the cudart interface.
 * Slot 2 gives the primary context of a device; 1, 6 and 8 turn a registered
 * fatbin into a module (older cudarts). ---- */

static CUresult cudart_module(CUmodule *mod, const void *wrapper) {
  return cuModuleLoadData(mod, wrapper);
}
static CUresult cudart_module_ext1(CUmodule *mod, const void *wrapper, void *a, void *b,
                                   unsigned c) {
  (void)a, (void)b, (void)c;
  return cuModuleLoadData(mod, wrapper);
}
static CUresult cudart_module_ext2(const void *fatbin, CUmodule *mod, void *a, void *b,
                                   unsigned c) {
  (void)a, (void)b, (void)c;
  return cuModuleLoadData(mod, fatbin);
}

/* ---- table 2: a094798c-2e74-2e74-93f2-0800200c0a66, tools runtime callback
 * hooks: slots 2 and 6 hand cudart scratch buffers it fills for profilers. ---- */

static unsigned char hook_buf1[1024], hook_buf2[16];
static void hooks_buf1(void **p, size_t *n) {
  if (p)
    *p = hook_buf1;
  if (n)
    *n = sizeof(hook_buf1);
}
static void hooks_buf2(void **p, size_t *n) {
  if (p)
    *p = hook_buf2;
  if (n)
    *n = 14; /* the size the real driver reports for this buffer */
}

/* ---- table 3: 42d85a81-23f6-cb47-8298-f6e78a3aecdc, tools TLS: slot 2
 * gives the current context (cuBLASLt keys its kernel registry on it). ---- */

static CUresult tls_current(CUcontext *ctx) {
  return ctx ? cuCtxGetCurrent(ctx) : CUDA_ERROR_INVALID_VALUE;
}

/* ---- table 4: c693336e-1121-df11-a8c3-68f355d89593, context-local storage
 * (no size word: slot 0 is a function).  cudart keeps its per-context state
 * here: put(ctx, key, value, dtor), delete(ctx, key), get(&value, ctx, key). ---- */

typedef void (*cls_dtor_t)(CUcontext, void *, void *);
typedef struct cls_entry {
  CUcontext ctx;
  void *key, *value;
  cls_dtor_t dtor;
  struct cls_entry *next;
} cls_entry_t;
/* Lock story: cls_lock guards the list. */
static pthread_mutex_t cls_lock = PTHREAD_MUTEX_INITIALIZER;
static cls_entry_t *cls_list;

static CUcontext cls_ctx(CUcontext ctx) {
  if (!ctx && cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && !ctx)
    (void)guest__primary_ctx(&ctx, guest__cur_device());
  return ctx;
}

static CUresult cls_put(CUcontext ctx, void *key, void *value, cls_dtor_t dtor) {
  cls_entry_t *e;
  ctx = cls_ctx(ctx);
  if (!ctx || !key)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&cls_lock);
  for (e = cls_list; e; e = e->next)
    if (e->ctx == ctx && e->key == key)
      break;
  if (!e && (e = calloc(1, sizeof(*e))) != NULL) {
    e->ctx = ctx;
    e->key = key;
    e->next = cls_list;
    cls_list = e;
  }
  if (e) {
    e->value = value;
    e->dtor = dtor;
  }
  pthread_mutex_unlock(&cls_lock);
  return e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult cls_delete(CUcontext ctx, void *key) {
  ctx = cls_ctx(ctx);
  pthread_mutex_lock(&cls_lock);
  for (cls_entry_t **pe = &cls_list; *pe; pe = &(*pe)->next)
    if ((*pe)->ctx == ctx && (*pe)->key == key) {
      cls_entry_t *e = *pe;
      *pe = e->next;
      free(e);
      break;
    }
  pthread_mutex_unlock(&cls_lock);
  return CUDA_SUCCESS;
}

static CUresult cls_get(void **value, CUcontext ctx, void *key) {
  CUresult r = CUDA_ERROR_INVALID_HANDLE;
  if (!value)
    return CUDA_ERROR_INVALID_VALUE;
  *value = NULL;
  ctx = cls_ctx(ctx);
  pthread_mutex_lock(&cls_lock);
  for (cls_entry_t *e = cls_list; e; e = e->next)
    if (e->ctx == ctx && e->key == key) {
      *value = e->value;
      r = CUDA_SUCCESS;
      break;
    }
  pthread_mutex_unlock(&cls_lock);
  return r;
}

/* ---- table 5: 263e8860-7cd2-6143-92f6-bbd5006dfa7e, context checks. ---- */

static CUresult ctx_check(CUcontext ctx, unsigned int *flags, const void **detail) {
  (void)ctx;
  if (flags)
    *flags = 0;
  if (detail)
    *detail = NULL;
  return CUDA_SUCCESS;
}
static unsigned int ctx_check_global(void) {
  return 0;
}

/* ---- table 6: d4082055-bde6-704b-8d34-ba123c66e1f2, the runtime's integrity
 * check.  cudart hands a version and the time and expects a 128-bit digest of
 * (driver version, version, pid, thread, this table's and the cudart table's
 * addresses, the function's address, the time, then per device its UUID and
 * PCI domain/bus/device), computed with a byte-mixing function and an
 * inner/outer pad pass like HMAC.  The mixing permutation and pads are facts
 * published with ZLUDA's clean-room dark_api. ---- */

static const unsigned char mix_table[256] = {
    0x29, 0x2e, 0x43, 0xc9, 0xa2, 0xd8, 0x7c, 0x01, 0x3d, 0x36, 0x54, 0xa1, 0xec, 0xf0, 0x06, 0x13,
    0x62, 0xa7, 0x05, 0xf3, 0xc0, 0xc7, 0x73, 0x8c, 0x98, 0x93, 0x2b, 0xd9, 0xbc, 0x4c, 0x82, 0xca,
    0x1e, 0x9b, 0x57, 0x3c, 0xfd, 0xd4, 0xe0, 0x16, 0x67, 0x42, 0x6f, 0x18, 0x8a, 0x17, 0xe5, 0x12,
    0xbe, 0x4e, 0xc4, 0xd6, 0xda, 0x9e, 0xde, 0x49, 0xa0, 0xfb, 0xf5, 0x8e, 0xbb, 0x2f, 0xee, 0x7a,
    0xa9, 0x68, 0x79, 0x91, 0x15, 0xb2, 0x07, 0x3f, 0x94, 0xc2, 0x10, 0x89, 0x0b, 0x22, 0x5f, 0x21,
    0x80, 0x7f, 0x5d, 0x9a, 0x5a, 0x90, 0x32, 0x27, 0x35, 0x3e, 0xcc, 0xe7, 0xbf, 0xf7, 0x97, 0x03,
    0xff, 0x19, 0x30, 0xb3, 0x48, 0xa5, 0xb5, 0xd1, 0xd7, 0x5e, 0x92, 0x2a, 0xac, 0x56, 0xaa, 0xc6,
    0x4f, 0xb8, 0x38, 0xd2, 0x96, 0xa4, 0x7d, 0xb6, 0x76, 0xfc, 0x6b, 0xe2, 0x9c, 0x74, 0x04, 0xf1,
    0x45, 0x9d, 0x70, 0x59, 0x64, 0x71, 0x87, 0x20, 0x86, 0x5b, 0xcf, 0x65, 0xe6, 0x2d, 0xa8, 0x02,
    0x1b, 0x60, 0x25, 0xad, 0xae, 0xb0, 0xb9, 0xf6, 0x1c, 0x46, 0x61, 0x69, 0x34, 0x40, 0x7e, 0x0f,
    0x55, 0x47, 0xa3, 0x23, 0xdd, 0x51, 0xaf, 0x3a, 0xc3, 0x5c, 0xf9, 0xce, 0xba, 0xc5, 0xea, 0x26,
    0x2c, 0x53, 0x0d, 0x6e, 0x85, 0x28, 0x84, 0x09, 0xd3, 0xdf, 0xcd, 0xf4, 0x41, 0x81, 0x4d, 0x52,
    0x6a, 0xdc, 0x37, 0xc8, 0x6c, 0xc1, 0xab, 0xfa, 0x24, 0xe1, 0x7b, 0x08, 0x0c, 0xbd, 0xb1, 0x4a,
    0x78, 0x88, 0x95, 0x8b, 0xe3, 0x63, 0xe8, 0x6d, 0xe9, 0xcb, 0xd5, 0xfe, 0x3b, 0x00, 0x1d, 0x39,
    0xf2, 0xef, 0xb7, 0x0e, 0x66, 0x58, 0xd0, 0xe4, 0xa6, 0x77, 0x72, 0xf8, 0xeb, 0x75, 0x4b, 0x0a,
    0x31, 0x44, 0x50, 0xb4, 0x8f, 0xed, 0x1f, 0x1a, 0xdb, 0x99, 0x8d, 0x33, 0x9f, 0x11, 0x83, 0x14,
};

/* Digest state, one 66-byte array: [0,16) result, [16,32) block, [32,48)
 * block xor result, [48,64) checksum, [64] block position, [65] last
 * checksum byte.  Each full block stirs the first 48 bytes 18 times. */
typedef struct digest {
  unsigned char s[66];
} digest_t;

static void digest_byte(digest_t *d, unsigned char b) {
  unsigned char *s = d->s, pos = s[64], v = 0x29;
  s[16 + pos] = b;
  s[32 + pos] = s[pos] ^ b;
  s[48 + pos] ^= mix_table[b ^ s[65]];
  s[65] = s[48 + pos];
  s[64] = (pos + 1) & 15;
  if (s[64])
    return;
  for (unsigned round = 0; round < 18; round++) {
    v ^= s[0];
    s[0] = v;
    for (int i = 1; i < 48; i++) {
      v = s[i] ^ mix_table[v];
      s[i] = v;
    }
    v = (unsigned char)(v + round);
    if (round != 17)
      v = mix_table[v];
  }
}

static void digest_bytes(digest_t *d, const void *p, size_t n, unsigned char xor_mask) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    digest_byte(d, b[i] ^ xor_mask);
}

static void digest_final(digest_t *d, uint64_t out[2]) {
  unsigned char pad = (unsigned char)(16 - d->s[64]), sum[16];
  for (unsigned i = 0; i < pad; i++)
    digest_byte(d, pad);
  memcpy(sum, d->s + 48, 16);
  for (int i = 0; i < 16; i++)
    digest_byte(d, sum[i]);
  memcpy(out, d->s, 16);
}

static const void *table_cudart[13];
static const void *table_integrity[3];

static CUresult integrity_check(unsigned int version, uint64_t unix_seconds, uint64_t out[2]) {
  static const unsigned char key[16] = {0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
                                        0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f};
  struct {
    uint32_t driver_version, version, pid, thread;
    const void *cudart_table, *integrity_table, *fn;
    uint64_t unix_seconds;
  } in;
  struct {
    CUuuid uuid;
    int32_t domain, bus, device;
  } dev;
  uint64_t inner[2];
  digest_t d;

  if (!out)
    return CUDA_ERROR_INVALID_VALUE;
  /* Versions ending in 0 and 1 expect fixed digests. */
  if (version % 10 == 0 || version % 10 == 1) {
    out[0] = version % 10 == 0 ? 0x3341181c03cb675cull : 0x1841181c03cb675cull;
    out[1] = 0x8ed383aa1f4cd1e8ull;
    return CUDA_SUCCESS;
  }
  memset(&d, 0, sizeof(d));
  digest_bytes(&d, key, sizeof(key), 0x36);
  memset(&in, 0, sizeof(in));
  in.driver_version = GUEST_DRIVER_VERSION;
  in.version = version;
  in.pid = (uint32_t)getpid();
  in.thread = (uint32_t)(uintptr_t)pthread_self();
  in.cudart_table = table_cudart;
  in.integrity_table = table_integrity;
  in.fn = (const void *)integrity_check;
  in.unix_seconds = unix_seconds;
  digest_bytes(&d, &in, sizeof(in), 0);
  for (int i = 0; i < guest__g.ndev; i++) {
    memset(&dev, 0, sizeof(dev));
    memcpy(dev.uuid.bytes, guest__g.dev[i].uuid, 16);
    dev.domain = guest__g.dev[i].attr[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID];
    dev.bus = guest__g.dev[i].attr[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID];
    dev.device = guest__g.dev[i].attr[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID];
    digest_bytes(&d, &dev, sizeof(dev), 0);
  }
  digest_final(&d, inner);
  memset(&d, 0, sizeof(d));
  digest_bytes(&d, key, sizeof(key), 0x5c);
  digest_bytes(&d, inner, sizeof(inner), 0);
  digest_final(&d, out);
  return CUDA_SUCCESS;
}

/* ---- table 7: 21318c60-9714-3248-8ca6-41ff7324c8f2, context identity
 * (cuBLAS/cuDNN): slot 4 is cuCtxGetId; 93 slots on the real driver. ---- */

static CUresult ident_ctx_id(CUcontext ctx, unsigned long long *id) {
  return cuCtxGetId(ctx, id);
}

/* Slots 51 and 39, measured with a logging pass-through driver under cuBLAS
 * 13's first cublasSgemm (H200, driver 580): slot 51 (ctx, 0, &obj) hands
 * out an object of the context (its first words were 1, 0, ctx), then slot
 * 39 (ctx, obj, &value) writes a value (7 there; 13 under a later driver
 * state; meaning undocumented).  Under cublasGemmEx (bf16) the second
 * argument of slot 51 is no flags word but a pointer to cuBLAS's own record
 * (whose first word held the object the driver then returned); the driver
 * answers both alike, so it is not checked here: refusing it made every
 * such GEMM fail with CUBLAS_STATUS_INTERNAL_ERROR.
 * The object here is ours, one per device, shaped like those first words;
 * the value is the daemon's driver's own answer for the shared primary
 * context, from the snapshot (wire/call.def), so nothing is invented. */
static struct ident_obj {
  uint64_t one, zero;
  CUcontext ctx;
} ident_objs[CALL_MAX_DEVICES];

/* The device whose primary context is ctx (NULL: the current one), or -1. */
static int ident_device(CUcontext ctx) {
  for (int d = 0; d < guest__g.ndev; d++) {
    CUcontext p = NULL;
    if (guest__primary_ctx(&p, d) == CUDA_SUCCESS &&
        (ctx == NULL ? d == guest__cur_device() : p == ctx))
      return d;
  }
  return -1;
}

static CUresult ident_ctx_object(CUcontext ctx, const void *key, void **obj) {
  CUresult r = guest__ready();
  int d;
  (void)key;
  if (r != CUDA_SUCCESS)
    return r;
  if (obj == NULL)
    return CUDA_ERROR_INVALID_VALUE;
  if ((d = ident_device(ctx)) < 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  ident_objs[d].one = 1;
  ident_objs[d].zero = 0;
  guest__primary_ctx(&ident_objs[d].ctx, d);
  *obj = &ident_objs[d];
  return CUDA_SUCCESS;
}

static CUresult ident_ctx_query(CUcontext ctx, const void *obj, uint32_t *value) {
  CUresult r = guest__ready();
  int d;
  if (r != CUDA_SUCCESS)
    return r;
  if (value == NULL || obj == NULL)
    return CUDA_ERROR_INVALID_VALUE;
  if ((d = ident_device(ctx)) < 0 || obj != &ident_objs[d])
    return CUDA_ERROR_INVALID_HANDLE;
  if (guest__g.dev[d].ident_s39 < 0) {
    slot_log(7, 39);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  *value = (uint32_t)guest__g.dev[d].ident_s39;
  return CUDA_SUCCESS;
}

/* ---- table 9: 6e163fbe-b958-444d-835c-e182aff1991e (99 slots as the driver
 * sizes it), asked by cuFFT when it makes a plan.  Slot 7 is the only one
 * cuFFT calls (measured natively on the H200: refusing it, with 1 or 800,
 * fails the plan with CUFFT_INTERNAL_ERROR).  Its call shape, as measured:
 * (object, module, callback, callback's argument, ...); the driver calls
 * the callback with that argument and a function handle, and answers 1;
 * cuFFT's callback stores the handle through its argument.  Emulated as
 * "the functions of the module, one callback each; the answer is how many"
 * (for a module of one function, what was measured).  An unknown module is
 * refused with CUDA_ERROR_INVALID_HANDLE and a log line. ---- */
typedef void (*module_fn_cb)(void *arg, void *func, uint64_t module);

static uint64_t tools_module_functions(uint64_t obj, uint64_t module, uint64_t cb, uint64_t arg) {
  uint64_t fns[64];
  unsigned n;
  static int logged;
  (void)obj;
  /* Natively 1 is this slot's success: errors here are never 1
   * (CUDA_ERROR_INVALID_VALUE), or a caller would take them for one. */
  if (!__atomic_load_n(&guest__g.inited, __ATOMIC_ACQUIRE))
    return CUDA_ERROR_NOT_INITIALIZED;
  n = cb ? guest__module_funcs(module, fns, 64) : 0;
  if (n == 0 || n > 64) {
    if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
      guest__log("private driver table 9 (6e163fbe...) slot 7: module %#llx with %u functions "
                 "here%s (1..64 are served); refused (CUDA_ERROR_INVALID_HANDLE)",
                 (unsigned long long)module, n, cb ? "" : " and no callback");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  for (unsigned i = 0; i < n; i++)
    ((module_fn_cb)(uintptr_t)cb)((void *)(uintptr_t)arg, (void *)(uintptr_t)fns[i], module);
  return n;
}

/* ---- table 10: da9151d3-3ae6-cc41-a5c0-4f26d533e328 (7 slots as the driver
 * sizes it), asked by NVRTC (libnvrtc.so.13) around each compilation: the
 * driver's cache of NVRTC's output.  Measured natively (H100, CuPy's cuFFT
 * on a cold cache), one round per compilation:
 *   slot 1 (&entry, 2, LLVM bitcode, its size, the options, a build stamp,
 *          ...)  opens an entry for that key: 0 and *entry written;
 *   slot 3 (entry, NULL, &out, &out_size, ...)  looks it up:
 *          CUDA_ERROR_NOT_FOUND on a miss;
 *   slot 4 (entry, NULL, PTX, its size, ...)  stores what NVRTC then made: 0;
 *   slot 2 (entry, ...)  closes the entry: 0.
 * Natively a second process's lookups missed as well (its ComputeCache
 * filled by the first), and with CUDA_CACHE_DISABLE=1 slot 1 answers 3 and
 * NVRTC asks nothing more.  Emulated as a cache that keeps nothing: every
 * lookup misses, so NVRTC compiles each time, as it did natively, and a
 * store is accepted and dropped.  A hit's answer was never observed, so
 * none is invented.
 * Slots 5 and 6 were never called: stubs. ---- */
#define NVRTC_ENTRY_MAGIC 0x74616c6c796e7663ull /* "tallynvc" */

/* An open entry.  The driver's entries are objects of its own that NVRTC
 * only passes back (never seen read); the zeroed room after the magic keeps
 * a caller that did read a few words from reading past the allocation. */
struct nvrtc_entry {
  uint64_t magic; /* NVRTC_ENTRY_MAGIC while open */
  unsigned char zero[56];
};

static CUresult nvrtc_cache_open(void **entry) {
  struct nvrtc_entry *e;
  if (!entry)
    return CUDA_ERROR_INVALID_VALUE;
  e = calloc(1, sizeof(*e));
  if (!e)
    return CUDA_ERROR_OUT_OF_MEMORY;
  e->magic = NVRTC_ENTRY_MAGIC;
  *entry = e;
  return CUDA_SUCCESS;
}

static bool nvrtc_entry_ok(const struct nvrtc_entry *e) {
  return e && e->magic == NVRTC_ENTRY_MAGIC;
}

static CUresult nvrtc_cache_close(struct nvrtc_entry *e) {
  if (!nvrtc_entry_ok(e))
    return CUDA_ERROR_INVALID_HANDLE;
  e->magic = 0;
  free(e);
  return CUDA_SUCCESS;
}

static CUresult nvrtc_cache_lookup(struct nvrtc_entry *e) {
  return nvrtc_entry_ok(e) ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult nvrtc_cache_store(struct nvrtc_entry *e) {
  return nvrtc_entry_ok(e) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* ---- Tally's own table (guestlib/tally-ext.h): what tallyd advertised. ---- */

static unsigned ext_be_budget_us(void) {
  int d = guest__cur_device();
  if (!__atomic_load_n(&guest__g.inited, __ATOMIC_ACQUIRE) || d < 0 || d >= guest__g.ndev)
    return 0;
  return guest__g.dev[d].be_budget_us;
}

/* Conservative: only tallyd's explicit word says "no latency-critical
 * tenant"; no connection or no notes count as one being there. */
static int ext_lc_present(void) {
  uint32_t word;
  if (!__atomic_load_n(&guest__g.inited, __ATOMIC_ACQUIRE) || guest__chan_note(&word) != 0)
    return 1;
  return (word & CALL_NOTE_NO_LC) == 0;
}

/* Before cuInit the class is what cuInit will send (TALLY_PRIORITY). */
static int ext_priority(void) {
  const char *p;
  if (__atomic_load_n(&guest__g.inited, __ATOMIC_ACQUIRE))
    return (int)guest__g.priority;
  p = getenv(GUEST_ENV_PRIORITY);
  return p && strcmp(p, "latency-critical") == 0 ? 0 : 1;
}

/* ---- the tables ---- */

static const void *table_req[37] = {
    SIZE(3),  (const void *)req_log,
    S(0, 2),  S(0, 3),
    SIZE(2),  S(0, 5),
    SIZE(4),  S(0, 7),
    S(0, 8),  S(0, 9),
    SIZE(2),  S(0, 11),
    S(0, 12), S(0, 13),
    SIZE(7),  S(0, 15),
    NULL,     NULL,
    NULL,     NULL,
    NULL,     NULL,
    SIZE(15), NULL,
    NULL,     (const void *)req_check,
};
static const void *table_cudart[13] = {
    SIZE(13),
    (const void *)cudart_module,
    (const void *)guest__primary_ctx,
    S(1, 3),
    S(1, 4),
    S(1, 5),
    (const void *)cudart_module_ext1,
    S(1, 7),
    (const void *)cudart_module_ext2,
    S(1, 9),
    S(1, 10),
    S(1, 11),
    S(1, 12),
};
static const void *table_hooks[7] = {
    SIZE(7), S(2, 1), (const void *)hooks_buf1, S(2, 3), S(2, 4), S(2, 5), (const void *)hooks_buf2,
};
static const void *table_tls[3] = {SIZE(3), S(3, 1), (const void *)tls_current};
static const void *table_cls[4] = {(const void *)cls_put, (const void *)cls_delete,
                                   (const void *)cls_get, S(4, 3)};
static const void *table_checks[15] = {
    SIZE(15),
    S(5, 1),
    (const void *)ctx_check,
    (const void *)ctx_check_global,
    S(5, 4),
    S(5, 5),
    S(5, 6),
    S(5, 7),
    S(5, 8),
    S(5, 9),
    S(5, 10),
    S(5, 11),
    S(5, 12),
    S(5, 13),
    S(5, 14),
};
static const void *table_integrity[3] = {SIZE(3), (const void *)integrity_check, S(6, 2)};
/* ---- table 8: 1734dc26, cuBLASLt's handshake ----
 * Slot 3 (&a, &b, table, ...) hands back two objects that describe the
 * GPU's TPCs in its GPCs, by which cuBLASLt orders a GEMM's clusters
 * (hostd/gpu-cuda.c says what is known of them).  tallyd reads its driver's
 * once (BLASLT_LAYOUT) and every call gets two fresh copies, as large as the
 * driver's (its first CALL_BLASLT_LAYOUT_BYTES, the rest 0), never freed
 * here: the caller keeps them, as it keeps the driver's.  Slot 12 (a, b, n,
 * m, state, 0) then overwrites the objects' first 16 bytes with state of the
 * driver's own; the cluster order does not need it (natively, with slot 12
 * answered without the driver, cuBLASLt launched the same kernel arguments:
 * tests/bench/RESULTS.md), so it succeeds and changes nothing.  When tallyd
 * cannot serve the layout (a driver without the slot, or a tallyd that
 * predates the request), slot 3 stays refused: cuBLASLt keeps launch order.
 * tallyd's answer is asked once per process and kept; a lost channel is not
 * an answer and is asked again. */
#define LAYOUT_OBJ_BYTES 72 /* the driver's objects: malloc chunks of 72 usable bytes */
_Static_assert(LAYOUT_OBJ_BYTES >= CALL_BLASLT_LAYOUT_BYTES, "layout objects");

static pthread_mutex_t layout_lock = PTHREAD_MUTEX_INITIALIZER;
static int layout_state; /* 0 not asked, 1 served, 2 refused by tallyd; under layout_lock */
static call_blaslt_layout_rep_t layout;

static bool layout_served(void) {
  call_blaslt_layout_req_t q = {0};
  CUresult r;
  pthread_mutex_lock(&layout_lock);
  if (layout_state == 0) {
    r = guest__rpc(CALL_OP_BLASLT_LAYOUT, 0, &q, &layout);
    if (r == CUDA_SUCCESS)
      layout_state = 1;
    else if (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_VALUE)
      layout_state = 2; /* the driver has none, or tallyd does not know the request */
  }
  bool ok = layout_state == 1;
  pthread_mutex_unlock(&layout_lock);
  return ok;
}

/* slot3(&a, &b, x, y, obj): x the table at a process's first call, (x, y)
 * small numbers and obj an object of the caller's at its later ones; every
 * call returned the same bytes natively, so none of them is looked at. */
static CUresult blaslt_layout_objects(void **a, void **b, const void *x, void *y, void *obj) {
  uint8_t *oa, *ob;
  (void)x, (void)y, (void)obj;
  if (!a || !b)
    return CUDA_ERROR_INVALID_VALUE;
  if (!layout_served()) {
    slot_log(8, 3);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  oa = calloc(1, LAYOUT_OBJ_BYTES);
  ob = calloc(1, LAYOUT_OBJ_BYTES);
  if (!oa || !ob) {
    free(oa);
    free(ob);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  memcpy(oa, layout.a, CALL_BLASLT_LAYOUT_BYTES);
  memcpy(ob, layout.b, CALL_BLASLT_LAYOUT_BYTES);
  *a = oa;
  *b = ob;
  return CUDA_SUCCESS;
}

/* slot12(a, b, n, m, state, 0): n the launch's cluster count. */
static CUresult blaslt_layout_state(void *a, void *b, uint64_t n, uint64_t m, void *state,
                                    void *z) {
  (void)a, (void)b, (void)n, (void)m, (void)state, (void)z;
  return CUDA_SUCCESS;
}

/* Table 8 (1734dc26, 17 slots as the driver sizes it): asked at PyTorch's
 * first bf16 GEMM (cuBLASLt), and the process died right after the table
 * was refused.  Slots 3 and 12 are served (above); every other slot logs
 * its number and returns NOT_SUPPORTED, so a slot a library starts to use
 * is named in the log. */
static const void *table_blaslt[17] = {
    SIZE(17), S(8, 0), S(8, 1), S(8, 2), (const void *)blaslt_layout_objects, S(8, 4), S(8, 5),
    S(8, 6), S(8, 7), S(8, 8), S(8, 9), S(8, 10), S(8, 11), (const void *)blaslt_layout_state,
    S(8, 13), S(8, 14), S(8, 15)};
static const void *table_ident[93] = {SIZE(93),
                                      S(7, 1),
                                      S(7, 2),
                                      S(7, 3),
                                      (const void *)ident_ctx_id,
                                      S(7, 5),
                                      S(7, 6),
                                      S(7, 7),
                                      S(7, 8),
                                      S(7, 9),
                                      S(7, 10),
                                      S(7, 11),
                                      S(7, 12),
                                      S(7, 13),
                                      S(7, 14),
                                      S(7, 15),
                                      T7_SLOTS_16_38(T7_ENTRY)(const void *) ident_ctx_query,
                                      T7_SLOTS_40_50(T7_ENTRY)(const void *) ident_ctx_object,
                                      T7_SLOTS_52_92(T7_ENTRY)};

static const void *table_tools_module[99] = {SIZE(99),
                                             S(9, 1),
                                             S(9, 2),
                                             S(9, 3),
                                             S(9, 4),
                                             S(9, 5),
                                             S(9, 6),
                                             (const void *)tools_module_functions,
                                             S(9, 8),
                                             S(9, 9),
                                             S(9, 10),
                                             S(9, 11),
                                             S(9, 12),
                                             S(9, 13),
                                             S(9, 14),
                                             S(9, 15),
                                             T9_SLOTS_16_98(T9_ENTRY)};

static const void *table_nvrtc_cache[7] = {SIZE(7),
                                           (const void *)nvrtc_cache_open,
                                           (const void *)nvrtc_cache_close,
                                           (const void *)nvrtc_cache_lookup,
                                           (const void *)nvrtc_cache_store,
                                           S(10, 5),
                                           S(10, 6)};

static const void *table_tally[TALLY_EXT_SLOTS] = {
    SIZE(TALLY_EXT_SLOTS),
    [TALLY_EXT_SLOT_BUDGET] = (const void *)ext_be_budget_us,
    [TALLY_EXT_SLOT_PRIORITY] = (const void *)ext_priority,
    [TALLY_EXT_SLOT_LC] = (const void *)ext_lc_present,
};

static const struct {
  unsigned char uuid[16];
  const void *table;
} tables[] = {
    {{0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d,
      0xd9},
     table_req},
    {{0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d,
      0xf9},
     table_cudart},
    {{0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a,
      0x66},
     table_hooks},
    {{0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec,
      0xdc},
     table_tls},
    {{0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95,
      0x93},
     table_cls},
    {{0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa,
      0x7e},
     table_checks},
    {{0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1,
      0xf2},
     table_integrity},
    {CALL_UUID_CTX_IDENT, table_ident},
    {CALL_UUID_BLASLT, table_blaslt},
    {{0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d, 0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99,
      0x1e},
     table_tools_module},
    {{0xda, 0x91, 0x51, 0xd3, 0x3a, 0xe6, 0xcc, 0x41, 0xa5, 0xc0, 0x4f, 0x26, 0xd5, 0x33, 0xe3,
      0x28},
     table_nvrtc_cache},
    {TALLY_EXT_UUID, table_tally},
};

/* Tables refused quietly: asked for by a driver component that shares the
 * tenant's process and does without them (found with a logging pass-through
 * driver that named each caller).  69a28e9f is asked by NVML
 * (libnvidia-ml.so.1, in nvmlInitWithFlags, loaded by PyTorch 2.11 and JAX
 * 0.11): slot 19 makes an object of the driver's and slot 21 answers a
 * pointer to a structure of function pointers inside the real libcuda.so.1,
 * the driver's internals lent to the NVML of its own release, which there is
 * nothing here to stand in for.  Refused, NVML works on without them and
 * the frameworks' results are identical to native (docs/decisions.md,
 * D23). */
static const char *const optional[] = {"69a28e9f24498b47b030c5da330ea4e9"};

/* Whether the refusal of table id to the library at base was logged before;
 * records it if not.  Once per (table, library): cuBLAS asks for its tables
 * once per handle, and a line per ask would only repeat itself.  Past 64
 * pairs every refusal is logged again. */
static bool refusal_logged(const CUuuid *id, const void *base) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static struct {
    unsigned char uuid[16];
    const void *base;
  } seen[64];
  static size_t nseen; /* under mu */
  bool found = false;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nseen && !found; i++)
    found = seen[i].base == base && memcmp(seen[i].uuid, id->bytes, 16) == 0;
  if (!found && nseen < sizeof(seen) / sizeof(seen[0])) {
    memcpy(seen[nseen].uuid, id->bytes, 16);
    seen[nseen++].base = base;
  }
  pthread_mutex_unlock(&mu);
  return found;
}

GUEST_EXPORT CUresult cuGetExportTable(const void **table, const CUuuid *id) {
  const void *caller = __builtin_return_address(0);
  if (!table || !id)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
    if (memcmp(tables[i].uuid, id->bytes, 16) == 0) {
      if (guest__debug())
        guest__log("cuGetExportTable: table %zu (%02x%02x%02x%02x...)", i, tables[i].uuid[0],
                   tables[i].uuid[1], tables[i].uuid[2], tables[i].uuid[3]);
      *table = tables[i].table;
      return CUDA_SUCCESS;
    }
  {
    /* Logged: a refused table is the first thing to look for when a library
     * (cuBLAS, cuDNN) fails to initialise through Tally.  Except for the
     * tables in `optional`, refused on the H200 with the callers' output
     * identical to native: their line would only alarm, so it needs
     * TALLY_LOG=debug.  The line names the library that asked: a table is
     * the driver's contract with one of its own libraries or a CUDA one. */
    char hex[33];
    bool quiet = false;
    Dl_info di;
    for (int i = 0; i < 16; i++)
      snprintf(hex + 2 * i, 3, "%02x", (unsigned char)id->bytes[i]);
    for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++)
      quiet = quiet || strcmp(optional[i], hex) == 0;
    if (!quiet || guest__debug()) {
      bool named = dladdr(caller, &di) && di.dli_fname && *di.dli_fname;
      if (!refusal_logged(id, named ? di.dli_fbase : NULL))
        guest__log("cuGetExportTable: private driver table %s (asked by %s) is not emulated "
                   "(CUDA_ERROR_INVALID_VALUE)",
                   hex, named ? di.dli_fname : "?");
    }
  }
  *table = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}
