/* module.c: modules, libraries, functions, kernel launches, host functions.
 *
 * A module image (fatbin, cubin or PTX; cudart's fatbin wrapper is unwrapped)
 * is named by the XXH3-64 of its bytes (docs/decisions.md, D5): wire's blob
 * offer sends the bytes only when the daemon lacks that id (one round trip
 * otherwise), then MODULE_LOAD names the id.  The reply lists every function
 * with its parameter
 * layout and attributes (wire/call.def), so cuModuleGetFunction,
 * cuFuncGetParamInfo, cuFuncGetAttribute and argument packing for launches
 * are local.  Launches are fire-and-forget: the guest checks the function
 * handle and packs the parameters by the layout, the host launches and keeps
 * any error for the next synchronising call.
 *
 * Host functions (cuLaunchHostFunc, cuStreamAddCallback) are stream-ordered
 * and run on the library's host-function thread (hostfn.c).  cuLink* keeps
 * its inputs: a lone PTX, cubin or fatbin is handed back as the "linked"
 * image (numba's single-PTX links, no request); several inputs, or another
 * kind, are linked by tallyd at cuLinkComplete (LINK, wire/call.def).
 */
#include "guestlib/guest.h"
#include "wire/u64map.h"
#include "wire/wire-le.h"

#include <dlfcn.h>
#include <pthread.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(CUlaunchAttribute) == CALL_LAUNCH_ATTR_SIZE, "LAUNCH attrs (wire/call.def)");

#define FATBINC_MAGIC       0x466243b1u /* cudart's __fatBinC_Wrapper_t */
#define FATBIN_MAGIC        0xba55ed50u /* fatbin container header */
#define INLINE_IMAGE_MAX    (64u << 10)
#define MODULE_KIND_MODULE  0
#define MODULE_KIND_LIBRARY 1

/* Finds the bytes and size of an image as the driver would accept it.
 * Returns 0, or -EINVAL for an image we cannot size. */
static int image_extent(const void *image, const void **start, size_t *size) {
  const uint8_t *p = image;
  uint32_t magic;

  if (!image)
    return -EINVAL;
  memcpy(&magic, p, 4);
  if (magic == FATBINC_MAGIC) {
    const void *data;
    memcpy(&data, p + 8, sizeof(data)); /* {int magic; int version; data; ...} */
    return image_extent(data, start, size);
  }
  if (magic == FATBIN_MAGIC) {
    uint16_t hsize;
    uint64_t fsize;
    memcpy(&hsize, p + 6, 2);
    memcpy(&fsize, p + 8, 8);
    *start = p;
    *size = (size_t)hsize + fsize;
    return 0;
  }
  if (memcmp(p, "\177ELF", 4) == 0 && p[4] == 2) { /* ELF64 cubin */
    uint64_t shoff, phoff, end;
    uint16_t shentsize, shnum, phentsize, phnum;
    memcpy(&phoff, p + 0x20, 8);
    memcpy(&shoff, p + 0x28, 8);
    memcpy(&phentsize, p + 0x36, 2);
    memcpy(&phnum, p + 0x38, 2);
    memcpy(&shentsize, p + 0x3a, 2);
    memcpy(&shnum, p + 0x3c, 2);
    end = shoff + (uint64_t)shentsize * shnum;
    if (phoff + (uint64_t)phentsize * phnum > end)
      end = phoff + (uint64_t)phentsize * phnum;
    for (uint16_t i = 0; i < shnum; i++) { /* section data may follow the headers */
      const uint8_t *sh = p + shoff + (uint64_t)i * shentsize;
      uint32_t type;
      uint64_t off, sz;
      memcpy(&type, sh + 4, 4);
      memcpy(&off, sh + 0x18, 8);
      memcpy(&sz, sh + 0x20, 8);
      if (type != 8 /* SHT_NOBITS */ && off + sz > end)
        end = off + sz;
    }
    *start = p;
    *size = (size_t)end;
    return 0;
  }
  *start = p; /* PTX text */
  *size = strlen((const char *)p) + 1;
  return 0;
}

/* Under TALLY_LOG=debug, the first module loads and unloads are logged with
 * the library that asked (a library that loads and unloads per call pays two
 * round trips each time through Tally, and this is how it is found). */
static void trace_module(const char *what, const void *caller, uint64_t h, size_t size,
                         CUresult r) {
  static unsigned logged;
  Dl_info di;
  if (!guest__debug() || __atomic_fetch_add(&logged, 1, __ATOMIC_RELAXED) >= 256)
    return;
  guest__log("%s %#llx (%zu bytes) from %s: %d", what, (unsigned long long)h, size,
             dladdr(caller, &di) && di.dli_fname ? di.dli_fname : "?", (int)r);
}

static CUresult load_image(uint64_t *handle, const void *image, uint32_t kind,
                           const void *caller) {
  const void *start;
  size_t size, rlen = 0;
  call_module_load_req_t q;
  uint8_t *rep = NULL;
  CUresult res = CUDA_SUCCESS, r = guest__ready();
  int rc;

  if (r != CUDA_SUCCESS)
    return r;
  if (image_extent(image, &start, &size) != 0 || size == 0)
    return CUDA_ERROR_INVALID_IMAGE;
  if (size > CALL_BLOB_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  /* The bytes cross the wire only if the daemon lacks this id. */
  memset(&q, 0, sizeof(q)); /* has_image 0: the bytes went as a blob */
  q.kind = kind;
  rc = guest__blob_offer(start, size, &q.id);
  if (rc)
    return guest__cu_error(rc);
  rc = guest__call(CALL_OP_MODULE_LOAD, 0, &q, &res, NULL, 0, &rlen, (void **)&rep);
  if (rc)
    return guest__cu_error(rc);
  if (res == CUDA_SUCCESS) {
    call_module_load_rep_t a;
    if (call_module_load_rep_decode(rep, rlen, &a, NULL) != 0 ||
        guest__module_add(a.module, a.module, a.funcs.p, a.funcs.len, a.nfunc) != 0)
      res = guest__cu_error(-EPROTO);
    else
      *handle = a.module;
  }
  free(rep);
  trace_module(kind == MODULE_KIND_LIBRARY ? "cuLibraryLoadData" : "cuModuleLoadData", caller,
               *handle, size, res);
  return res;
}

GUEST_EXPORT CUresult cuModuleLoadData(CUmodule *mod, const void *image) {
  uint64_t h = 0;
  CUresult r;
  if (!mod)
    return CUDA_ERROR_INVALID_VALUE;
  r = load_image(&h, image, MODULE_KIND_MODULE, __builtin_return_address(0));
  if (r == CUDA_SUCCESS)
    *mod = (CUmodule)(uintptr_t)h;
  return r;
}

GUEST_EXPORT CUresult cuModuleLoadDataEx(CUmodule *mod, const void *image, unsigned int n,
                                         CUjit_option *opts, void **vals) {
  /* JIT options are logs and tuning knobs; the host JITs with its defaults
   * and the logs stay empty. */
  for (unsigned i = 0; opts && vals && i < n; i++)
    if (opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
        opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
      vals[i] = (void *)(uintptr_t)0;
  return cuModuleLoadData(mod, image);
}

GUEST_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *mod, const void *fatbin) {
  return cuModuleLoadData(mod, fatbin);
}

/* The whole file at path in *buf (NUL-terminated, for PTX; the caller
 * frees it), as the driver reads a module or library file. */
static CUresult read_image(const char *path, char **buf) {
  FILE *f;
  long n;
  CUresult r;
  *buf = NULL;
  f = fopen(path, "rb");
  if (!f)
    return CUDA_ERROR_FILE_NOT_FOUND;
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return CUDA_ERROR_FILE_NOT_FOUND;
  }
  *buf = calloc(1, (size_t)n + 1); /* +1: PTX files get their NUL */
  if (!*buf) {
    fclose(f);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  r = fread(*buf, 1, (size_t)n, f) == (size_t)n ? CUDA_SUCCESS : CUDA_ERROR_FILE_NOT_FOUND;
  fclose(f);
  if (r != CUDA_SUCCESS) {
    free(*buf);
    *buf = NULL;
  }
  return r;
}

GUEST_EXPORT CUresult cuModuleLoad(CUmodule *mod, const char *path) {
  char *buf;
  CUresult r;
  if (!mod || !path)
    return CUDA_ERROR_INVALID_VALUE;
  r = read_image(path, &buf);
  if (r == CUDA_SUCCESS)
    r = cuModuleLoadData(mod, buf);
  free(buf);
  return r;
}

static CUresult unload(uint64_t h, uint32_t kind, const void *caller) {
  call_module_unload_req_t q = {.module = h, .kind = kind};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  r = guest__rpc(CALL_OP_MODULE_UNLOAD, 0, &q, NULL);
  if (r == CUDA_SUCCESS)
    guest__module_del(h);
  trace_module(kind == MODULE_KIND_LIBRARY ? "cuLibraryUnload" : "cuModuleUnload", caller, h, 0, r);
  return r;
}

GUEST_EXPORT CUresult cuModuleUnload(CUmodule mod) {
  return unload((uint64_t)(uintptr_t)mod, MODULE_KIND_MODULE, __builtin_return_address(0));
}

GUEST_EXPORT CUresult cuModuleGetFunction(CUfunction *pf, CUmodule mod, const char *name) {
  const guest_func_t *f;
  if (!pf || !name)
    return CUDA_ERROR_INVALID_VALUE;
  f = guest__func_by_name((uint64_t)(uintptr_t)mod, name);
  if (!f) {
    /* Libraries probe for optional kernels (cuBLASLt asks for
     * nopClusterDiscoveryTool at cublasCreate), so only under debug. */
    if (guest__debug())
      guest__log("cuModuleGetFunction/cuLibraryGetKernel(%#llx, %.200s): not found in its %u "
                 "function(s) (CUDA_ERROR_NOT_FOUND)",
                 (unsigned long long)(uintptr_t)mod, name,
                 guest__module_funcs((uint64_t)(uintptr_t)mod, NULL, 0));
    return CUDA_ERROR_NOT_FOUND;
  }
  *pf = (CUfunction)(uintptr_t)f->handle;
  return CUDA_SUCCESS;
}

static CUresult get_global(CUdeviceptr *dptr, size_t *bytes, uint64_t h, uint32_t kind,
                           const char *name) {
  call_module_global_req_t q = {.module = h, .kind = kind};
  call_module_global_rep_t out;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!name)
    return CUDA_ERROR_INVALID_VALUE;
  q.name = (call_view_t){(const uint8_t *)name, strlen(name)};
  if (q.name.len >= CALL_FUNC_NAME_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  r = guest__rpc(CALL_OP_MODULE_GLOBAL, 0, &q, &out);
  if (r != CUDA_SUCCESS)
    return r;
  if (dptr)
    *dptr = out.ptr;
  if (bytes)
    *bytes = out.size;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule mod,
                                           const char *name) {
  return get_global(dptr, bytes, (uint64_t)(uintptr_t)mod, MODULE_KIND_MODULE, name);
}

/* Lazy unless the application's environment says CUDA_MODULE_LOADING=EAGER,
 * as the driver answers.  cudart asks at start: told eager, it loads every
 * fatbin it registered (445 libraries at PyTorch's first CUDA call, each a
 * MODULE_LOAD round trip and a library load in tallyd: about 4.8 s of the
 * tenant's start on the H200); told lazy, it loads a fatbin when one of its
 * kernels or variables is first used (2 loads there).  docs/decisions.md,
 * D11. */
GUEST_EXPORT CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode) {
  const char *v = getenv("CUDA_MODULE_LOADING");
  if (!mode)
    return CUDA_ERROR_INVALID_VALUE;
  *mode = v && strcmp(v, "EAGER") == 0 ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
  return CUDA_SUCCESS;
}

/* ---- libraries (cuLibrary*, how cudart 12+ registers its fatbins) ---- */

/* The loaded libraries' handles, so cuKernelGetLibrary tells a library's
 * kernel from a module's function (both are rows of the function table
 * whose module is their owner). */
static pthread_mutex_t libs_lock = PTHREAD_MUTEX_INITIALIZER;
static u64map_t libs;

static void libs_note(uint64_t h, bool loaded) {
  pthread_mutex_lock(&libs_lock);
  if (loaded) {
    if (u64map_put(&libs, h, 1) != 0) /* out of memory: only cuKernelGetLibrary misses it */
      guest__log("cuLibraryLoadData: library %#llx not remembered (out of memory); "
                 "cuKernelGetLibrary will not name it", (unsigned long long)h);
  } else {
    (void)u64map_del(&libs, h);
  }
  pthread_mutex_unlock(&libs_lock);
}

static bool is_library(uint64_t h) {
  bool yes;
  pthread_mutex_lock(&libs_lock);
  yes = u64map_get(&libs, h, NULL);
  pthread_mutex_unlock(&libs_lock);
  return yes;
}

GUEST_EXPORT CUresult cuLibraryLoadData(CUlibrary *lib, const void *code, CUjit_option *jo,
                                        void **jv, unsigned int njo, CUlibraryOption *lo, void **lv,
                                        unsigned int nlo) {
  uint64_t h = 0;
  CUresult r;
  (void)jo, (void)jv, (void)njo, (void)lo, (void)lv, (void)nlo;
  if (!lib)
    return CUDA_ERROR_INVALID_VALUE;
  r = load_image(&h, code, MODULE_KIND_LIBRARY, __builtin_return_address(0));
  if (r == CUDA_SUCCESS) {
    libs_note(h, true);
    *lib = (CUlibrary)(uintptr_t)h;
  }
  return r;
}

GUEST_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *lib, const char *path, CUjit_option *jo,
                                            void **jv, unsigned int njo, CUlibraryOption *lo,
                                            void **lv, unsigned int nlo) {
  char *buf;
  CUresult r;
  if (!lib || !path)
    return CUDA_ERROR_INVALID_VALUE;
  r = read_image(path, &buf);
  if (r == CUDA_SUCCESS)
    r = cuLibraryLoadData(lib, buf, jo, jv, njo, lo, lv, nlo);
  free(buf);
  return r;
}

GUEST_EXPORT CUresult cuLibraryUnload(CUlibrary lib) {
  CUresult r = unload((uint64_t)(uintptr_t)lib, MODULE_KIND_LIBRARY, __builtin_return_address(0));
  if (r == CUDA_SUCCESS)
    libs_note((uint64_t)(uintptr_t)lib, false);
  return r;
}

GUEST_EXPORT CUresult cuLibraryGetKernel(CUkernel *pk, CUlibrary lib, const char *name) {
  return cuModuleGetFunction((CUfunction *)pk, (CUmodule)lib, name);
}

GUEST_EXPORT CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary lib,
                                         const char *name) {
  return get_global(dptr, bytes, (uint64_t)(uintptr_t)lib, MODULE_KIND_LIBRARY, name);
}

GUEST_EXPORT CUresult cuLibraryGetModule(CUmodule *pmod, CUlibrary lib) {
  call_library_module_req_t q = {.library = (uint64_t)(uintptr_t)lib};
  uint8_t *rep = NULL;
  size_t rlen = 0;
  CUresult res = CUDA_SUCCESS, r = guest__ready();
  int rc;
  if (r != CUDA_SUCCESS)
    return r;
  if (!pmod)
    return CUDA_ERROR_INVALID_VALUE;
  rc = guest__call(CALL_OP_LIBRARY_MODULE, 0, &q, &res, NULL, 0, &rlen, (void **)&rep);
  if (rc)
    return guest__cu_error(rc);
  if (res == CUDA_SUCCESS) {
    call_library_module_rep_t a;
    if (call_library_module_rep_decode(rep, rlen, &a, NULL) != 0 ||
        guest__module_add(a.module, q.library, a.funcs.p, a.funcs.len, a.nfunc) != 0)
      res = guest__cu_error(-EPROTO);
    else
      *pmod = (CUmodule)(uintptr_t)a.module;
  }
  free(rep);
  return res;
}

static CUresult enumerate(uint64_t module, void **out, unsigned n, unsigned *count) {
  uint64_t *h = NULL;
  unsigned have;
  if (count) {
    *count = guest__module_funcs(module, NULL, 0);
    return CUDA_SUCCESS;
  }
  if (!out)
    return CUDA_ERROR_INVALID_VALUE;
  h = calloc(n ? n : 1, sizeof(*h));
  if (!h)
    return CUDA_ERROR_OUT_OF_MEMORY;
  have = guest__module_funcs(module, h, n);
  for (unsigned i = 0; i < n && i < have; i++)
    out[i] = (void *)(uintptr_t)h[i];
  free(h);
  return have <= n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

GUEST_EXPORT CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule mod) {
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  return enumerate((uint64_t)(uintptr_t)mod, NULL, 0, count);
}

GUEST_EXPORT CUresult cuModuleEnumerateFunctions(CUfunction *fns, unsigned int n, CUmodule mod) {
  return enumerate((uint64_t)(uintptr_t)mod, (void **)fns, n, NULL);
}

GUEST_EXPORT CUresult cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib) {
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  return enumerate((uint64_t)(uintptr_t)lib, NULL, 0, count);
}

GUEST_EXPORT CUresult cuLibraryEnumerateKernels(CUkernel *ks, unsigned int n, CUlibrary lib) {
  return enumerate((uint64_t)(uintptr_t)lib, (void **)ks, n, NULL);
}

/* The host launches a CUkernel directly (cuLaunchKernel accepts one since
 * CUDA 12.0), so the kernel handle serves as the function handle. */
GUEST_EXPORT CUresult cuKernelGetFunction(CUfunction *pf, CUkernel k) {
  if (!pf)
    return CUDA_ERROR_INVALID_VALUE;
  if (!guest__func_find((uint64_t)(uintptr_t)k))
    return CUDA_ERROR_INVALID_HANDLE;
  *pf = (CUfunction)k;
  return CUDA_SUCCESS;
}

/* A kernel's library: a row whose module is a library (a function of a
 * library's module view has the view as its module, one of a module the
 * module). */
GUEST_EXPORT CUresult cuKernelGetLibrary(CUlibrary *lib, CUkernel k) {
  const guest_func_t *f;
  if (!lib)
    return CUDA_ERROR_INVALID_VALUE;
  f = guest__func_find((uint64_t)(uintptr_t)k);
  if (!f || !is_library(f->module))
    return CUDA_ERROR_INVALID_HANDLE;
  *lib = (CUlibrary)(uintptr_t)f->module;
  return CUDA_SUCCESS;
}

/* A function's module: the module it was got from, or the library (whose
 * handle also serves as a module) for a library's kernel. */
GUEST_EXPORT CUresult cuFuncGetModule(CUmodule *mod, CUfunction fn) {
  const guest_func_t *f;
  if (!mod)
    return CUDA_ERROR_INVALID_VALUE;
  f = guest__func_find((uint64_t)(uintptr_t)fn);
  if (!f)
    return CUDA_ERROR_INVALID_HANDLE;
  *mod = (CUmodule)(uintptr_t)f->module;
  return CUDA_SUCCESS;
}

static CUresult name_of(const char **name, uint64_t h) {
  const guest_func_t *f = guest__func_find(h);
  if (!name)
    return CUDA_ERROR_INVALID_VALUE;
  if (!f)
    return CUDA_ERROR_INVALID_HANDLE;
  *name = f->name;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuFuncGetName(const char **name, CUfunction f) {
  return name_of(name, (uint64_t)(uintptr_t)f);
}
GUEST_EXPORT CUresult cuKernelGetName(const char **name, CUkernel k) {
  return name_of(name, (uint64_t)(uintptr_t)k);
}

static CUresult param_info(uint64_t h, size_t i, size_t *off, size_t *size) {
  const guest_func_t *f = guest__func_find(h);
  if (!f)
    return CUDA_ERROR_INVALID_HANDLE;
  if (i >= f->nparams)
    return CUDA_ERROR_INVALID_VALUE;
  if (off)
    *off = f->off[i];
  if (size)
    *size = f->size[i];
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuFuncGetParamInfo(CUfunction f, size_t i, size_t *off, size_t *size) {
  return param_info((uint64_t)(uintptr_t)f, i, off, size);
}
GUEST_EXPORT CUresult cuKernelGetParamInfo(CUkernel k, size_t i, size_t *off, size_t *size) {
  return param_info((uint64_t)(uintptr_t)k, i, off, size);
}

/* Every attribute of function h in one request (FUNC_ATTRS), kept by the
 * function's record, which is marked as asked either way. */
static CUresult func_ask_attrs(uint64_t h, call_func_attrs_rep_t *all) {
  call_func_attrs_req_t q = {.func = h};
  CUresult r;
  memset(all, 0, sizeof(*all));
  r = guest__rpc(CALL_OP_FUNC_ATTRS, 0, &q, all);
  guest__func_learn_attrs(h, r == CUDA_SUCCESS ? all->valid : 0, all->attr);
  return r;
}

GUEST_EXPORT CUresult cuFuncGetAttribute(int *v, CUfunction_attribute attr, CUfunction f) {
  const guest_func_t *fn = guest__func_find((uint64_t)(uintptr_t)f);
  uint64_t h = (uint64_t)(uintptr_t)f;
  call_func_attr_req_t q = {.func = h, .attr = attr};
  call_func_attr_rep_t out = {0};
  CUresult r;
  if (!v)
    return CUDA_ERROR_INVALID_VALUE;
  if (!fn)
    return CUDA_ERROR_INVALID_HANDLE;
  if (attr >= 0 && attr < CALL_FUNC_ATTRS && (fn->attr_valid & (1u << attr))) {
    *v = fn->attr[attr];
    return CUDA_SUCCESS;
  }
  /* Unknown until the host loads the function (a library's kernels come
   * with none): one round trip brings every attribute, all kept. */
  if (attr >= 0 && attr < CALL_FUNC_ATTRS) {
    call_func_attrs_rep_t all;
    if ((r = func_ask_attrs(h, &all)) != CUDA_SUCCESS)
      return r;
    if (all.valid & (1u << attr)) {
      *v = all.attr[attr];
      return CUDA_SUCCESS;
    }
  }
  /* The driver refused this one in the batch (its own error follows), or
   * an attribute newer than this protocol: asked alone, and kept. */
  r = guest__rpc(CALL_OP_FUNC_ATTR, 0, &q, &out);
  if (r == CUDA_SUCCESS) {
    *v = out.value;
    guest__func_set_attr(h, attr, out.value);
  }
  return r;
}

/* Cluster occupancy needs the driver's placement rules: one round trip
 * (OCCUPANCY, wire/call.def).  The function handle is not checked here:
 * tallyd checks it against the tenant's own table.  The two cluster launch
 * attributes are carried; those that say how a launch is ordered, prioritised
 * or cached, never where its blocks fit, are passed over (a library may hand
 * the query the attribute array of the launch it plans); the rest
 * (cooperative, preferred cluster dimension, shared memory carveout) are
 * refused with a log line, not guessed. */
static bool occupancy_neutral(CUlaunchAttributeID id) {
  switch (id) {
  case CU_LAUNCH_ATTRIBUTE_IGNORE:
  case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
  case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
  case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
  case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
  case CU_LAUNCH_ATTRIBUTE_PRIORITY:
  case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
  case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
  case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
  case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE:
  case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
    return true;
  default:
    return false;
  }
}

static CUresult occupancy(int which, int *out, CUfunction f, const CUlaunchConfig *cfg) {
  call_occupancy_req_t q = {.func = (uint64_t)(uintptr_t)f, .which = (uint32_t)which, .policy = -1};
  call_occupancy_rep_t v = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!out || !cfg || (cfg->numAttrs && !cfg->attrs))
    return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < cfg->numAttrs; i++) {
    const CUlaunchAttribute *at = &cfg->attrs[i];
    if (at->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      q.cluster[0] = at->value.clusterDim.x;
      q.cluster[1] = at->value.clusterDim.y;
      q.cluster[2] = at->value.clusterDim.z;
    } else if (at->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE &&
               (int32_t)at->value.clusterSchedulingPolicyPreference >= 0) {
      q.policy = (int32_t)at->value.clusterSchedulingPolicyPreference;
    } else if (!occupancy_neutral(at->id)) {
      static int logged;
      if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
        guest__log("cuOccupancyMaxActiveClusters/MaxPotentialClusterSize: launch attribute %d "
                   "is not carried to tallyd; the query is refused (CUDA_ERROR_INVALID_VALUE)",
                   (int)at->id);
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  q.grid[0] = cfg->gridDimX, q.grid[1] = cfg->gridDimY, q.grid[2] = cfg->gridDimZ;
  q.block[0] = cfg->blockDimX, q.block[1] = cfg->blockDimY, q.block[2] = cfg->blockDimZ;
  q.shmem = cfg->sharedMemBytes;
  r = guest__rpc(CALL_OP_OCCUPANCY, 0, &q, &v);
  if (r == CUDA_SUCCESS)
    *out = v.value;
  return r;
}

GUEST_EXPORT CUresult cuOccupancyMaxActiveClusters(int *num, CUfunction f,
                                                   const CUlaunchConfig *cfg) {
  return occupancy(0, num, f, cfg);
}

GUEST_EXPORT CUresult cuOccupancyMaxPotentialClusterSize(int *size, CUfunction f,
                                                         const CUlaunchConfig *cfg) {
  return occupancy(1, size, f, cfg);
}

GUEST_EXPORT CUresult cuKernelGetAttribute(int *v, CUfunction_attribute attr, CUkernel k,
                                           CUdevice dev) {
  (void)dev;
  return cuFuncGetAttribute(v, attr, (CUfunction)k);
}

GUEST_EXPORT CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute attr, int value) {
  uint64_t h = (uint64_t)(uintptr_t)f;
  call_func_set_attr_req_t q = {.func = h, .attr = attr, .value = value};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!guest__func_find(h))
    return CUDA_ERROR_INVALID_HANDLE;
  /* Libraries set the same attribute before every launch (a kernel's
   * dynamic shared memory): a value the function already has is a no-op. */
  if (guest__func_is(h, (int)attr, value))
    return CUDA_SUCCESS;
  r = guest__rpc(CALL_OP_FUNC_SET_ATTR, 0, &q, NULL);
  if (r == CUDA_SUCCESS)
    guest__func_set_attr(h, attr, value);
  return r;
}

GUEST_EXPORT CUresult cuKernelSetAttribute(CUfunction_attribute attr, int value, CUkernel k,
                                           CUdevice dev) {
  (void)dev;
  return cuFuncSetAttribute((CUfunction)k, attr, value);
}

/* A function's own preference goes to tallyd (its modules are the
 * tenant's own there), posted, unless the function has it already; the
 * context-wide one stays here (ctx.c). */
GUEST_EXPORT CUresult cuFuncSetCacheConfig(CUfunction f, CUfunc_cache cfg) {
  call_func_cache_req_t q = {.func = (uint64_t)(uintptr_t)f, .config = (uint32_t)cfg};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!guest__func_find(q.func))
    return CUDA_ERROR_INVALID_HANDLE;
  if ((unsigned)cfg > CU_FUNC_CACHE_PREFER_EQUAL)
    return CUDA_ERROR_INVALID_VALUE;
  if (guest__func_is(q.func, GUEST_FUNC_CACHE, (int32_t)cfg))
    return CUDA_SUCCESS; /* what it has: no request */
  r = guest__post_cu(CALL_OP_FUNC_CACHE, &q);
  if (r == CUDA_SUCCESS)
    guest__func_set_cache(q.func, (uint32_t)cfg);
  return r;
}

GUEST_EXPORT CUresult cuKernelSetCacheConfig(CUkernel k, CUfunc_cache cfg, CUdevice dev) {
  (void)dev;
  return cuFuncSetCacheConfig((CUfunction)k, cfg);
}

GUEST_EXPORT CUresult cuFuncSetSharedMemConfig(CUfunction f, CUsharedconfig cfg) {
  (void)cfg;
  return guest__func_find((uint64_t)(uintptr_t)f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

GUEST_EXPORT CUresult cuFuncIsLoaded(CUfunctionLoadingState *st, CUfunction f) {
  if (!st)
    return CUDA_ERROR_INVALID_VALUE;
  *st = CU_FUNCTION_LOADING_STATE_LOADED;
  return guest__func_find((uint64_t)(uintptr_t)f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

GUEST_EXPORT CUresult cuFuncLoad(CUfunction f) {
  return guest__func_find((uint64_t)(uintptr_t)f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* ---- launches ---- */

/* The checks the driver makes before it queues a launch, so a bad shape
 * fails at the call (cudart turns it into cudaErrorInvalidConfiguration)
 * instead of at the next synchronisation: dimensions against the device
 * snapshot, threads and dynamic shared memory against the function. */
static bool launch_shape_ok(const guest_func_t *f, const unsigned grid[3], const unsigned block[3],
                            unsigned shmem) {
  const int32_t *a = guest__g.dev[guest__cur_device()].attr;
  uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
  if (!grid[0] || !grid[1] || !grid[2] || !threads)
    return false;
  if (block[0] > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X] ||
      block[1] > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y] ||
      block[2] > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z] ||
      grid[0] > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X] ||
      grid[1] > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y] ||
      grid[2] > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z])
    return false;
  if (f->attr[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] > 0 &&
      threads > (uint64_t)f->attr[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK])
    return false;
  if (f->attr[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] > 0 &&
      shmem > (unsigned)f->attr[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES])
    return false;
  return true;
}

/* launch_shape_ok needs the function's thread limit and, for a launch with
 * dynamic shared memory, its limit of that.  A library's kernels come
 * without attributes (docs/decisions.md D12): the first launch that lacks
 * one asks for all of them, once per function, so a launch the driver would
 * refuse fails at the call, as natively, not at the next synchronisation.
 * A failed request leaves the checks to the driver.  Not while a capture is
 * open: the answer may need tallyd to load the function, which a capture in
 * the global mode may not allow (the driver's own lazy load at the launch
 * it may); tallyd's driver then checks the launch, and its error comes back
 * at the next synchronising call. */
static void launch_limits_known(const guest_func_t *f, unsigned shmem) {
  uint32_t need = 1u << CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK;
  call_func_attrs_rep_t all;
  if (shmem)
    need |= 1u << CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
  if ((f->attr_valid & need) != need && !f->attrs_asked && !guest__capture_open())
    (void)func_ask_attrs(f->handle, &all);
}

/* A kernel's parameter buffer as LAUNCH and graph kernel nodes carry it
 * (wire/call.def): an extra buffer as it is; kernelParams packed into
 * small (cap bytes) or, when larger, a malloc'd *body the caller frees.
 * *src and *argbytes describe the buffer. */
CUresult guest__kernel_args(const guest_func_t *f, void **params, void **extra, uint8_t *small,
                            size_t cap, uint8_t **body, const void **src, uint32_t *argbytes,
                            const uint64_t *stream) {
  size_t n = f->argbytes;
  *body = NULL;
  *src = NULL;
  if ((params && extra) || n > CALL_LAUNCH_ARGS_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  if (extra) {
    size_t *psize = NULL;
    for (int i = 0; i < 8 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
        *src = extra[i + 1];
      else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
        psize = extra[i + 1];
      else
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!*src || !psize || *psize < n)
      return CUDA_ERROR_INVALID_VALUE;
  } else if (n && !params) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!*src) {
    uint8_t *b = n <= cap ? small : (*body = malloc(n));
    if (!b)
      return CUDA_ERROR_OUT_OF_MEMORY;
    memset(b, 0, n);
    for (uint32_t i = 0; i < f->nparams; i++)
      memcpy(b + f->off[i], params[i], f->size[i]);
    *src = b;
  }
  /* A pointer into host memory tallyd's GPU cannot reach would fault on the
   * device, poisoning the context every tenant shares: pointed at a device
   * mirror of that memory (mirror.c), or, where there can be none, refused. */
  size_t off;
  uint64_t val;
  if (guest__mem_args_unreachable(*src, n, &off, &val)) {
    static int logged;
    CUresult r = CUDA_ERROR_NOT_SUPPORTED;
    if (stream) {
      uint8_t *b = *src == small || *src == *body ? (uint8_t *)*src
                   : n <= cap                     ? small
                                                  : (*body = malloc(n));
      if (!b)
        return CUDA_ERROR_OUT_OF_MEMORY;
      if (b != *src) /* the caller's extra buffer: rewritten in our copy */
        memcpy(b, *src, n);
      *src = b;
      r = guest__mirror_args(b, n, *stream);
    }
    if (r == CUDA_SUCCESS) {
      *argbytes = (uint32_t)n;
      return CUDA_SUCCESS;
    }
    if (r == CUDA_ERROR_NOT_SUPPORTED && !__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
      guest__log("kernel %s: argument bytes at offset %zu hold 0x%llx, inside pinned or "
                 "registered host memory that tallyd's GPU cannot reach (the tenant is not on "
                 "tallyd's host, or the memory is registered, not allocated), %s; the launch "
                 "is refused (CUDA_ERROR_NOT_SUPPORTED): run the tenant over shared memory and "
                 "allocate it with cuMemHostAlloc",
                 f->name, off, (unsigned long long)val,
                 stream ? "larger than the 64 KiB Tally mirrors in device memory"
                        : "in a graph's kernel node or while a stream capture is open, where "
                          "Tally does not mirror it");
    free(*body);
    *body = NULL;
    return r;
  }
  *argbytes = (uint32_t)n;
  return CUDA_SUCCESS;
}

/* LAUNCH (wire/call.def): the attributes go as the caller's array, an
 * extra buffer as it is; only kernelParams are packed, into a stack buffer
 * for the usual launch (no malloc). */
static CUresult launch(uint64_t h, const unsigned grid[3], const unsigned block[3], unsigned shmem,
                       uint64_t s, const CUlaunchAttribute *attrs, unsigned nattr, void **params,
                       void **extra) {
  const guest_func_t *f = guest__func_find(h);
  /* Most launches carry well under 1 KiB of arguments: no malloc for them. */
  uint8_t small[1024], *body = NULL;
  uint32_t argbytes = 0;
  call_launch_req_t q;
  const void *argsrc = NULL;
  int rc;
  CUresult r = guest__ready();

  if (r != CUDA_SUCCESS)
    return r;
  if (!f)
    return CUDA_ERROR_INVALID_HANDLE;
  launch_limits_known(f, shmem);
  if (nattr > CALL_LAUNCH_ATTRS_MAX || (params && extra) || !launch_shape_ok(f, grid, block, shmem))
    return CUDA_ERROR_INVALID_VALUE;
  /* No mirror while a capture is open: the launch might be captured, and the
   * copy before it and the read-back would not be replayed with it. */
  r = guest__kernel_args(f, params, extra, small, sizeof(small), &body, &argsrc, &argbytes,
                         guest__capture_open() ? NULL : &s);
  if (r != CUDA_SUCCESS)
    return r;
  memset(&q, 0, sizeof(q));
  q.func = h;
  memcpy(q.grid, grid, sizeof(q.grid));
  memcpy(q.block, block, sizeof(q.block));
  q.shmem = shmem;
  q.nattr = nattr;
  q.stream = s;
  q.argbytes = argbytes;
  q.attrs = (call_view_t){(const uint8_t *)attrs, (size_t)nattr * sizeof(CUlaunchAttribute)};
  q.args = (call_view_t){argsrc, argbytes};
  rc = guest__post(CALL_OP_LAUNCH, &q);
  free(body);
  if (rc)
    return guest__cu_error(rc);
  guest__ctx_adopt_primary();
  return CUDA_SUCCESS;
}

static CUresult launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                              unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
                              void **extra, int ptds) {
  unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  return launch((uint64_t)(uintptr_t)f, grid, block, shmem, guest__stream(s, ptds), NULL, 0, params,
                extra);
}

GUEST_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                     unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                     CUstream s, void **params, void **extra) {
  return launch_kernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra, 0);
}

GUEST_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                          unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                          CUstream s, void **params, void **extra) {
  return launch_kernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra, 1);
}

static CUresult launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra,
                          int ptds) {
  unsigned grid[3], block[3];
  if (!c)
    return CUDA_ERROR_INVALID_VALUE;
  grid[0] = c->gridDimX, grid[1] = c->gridDimY, grid[2] = c->gridDimZ;
  block[0] = c->blockDimX, block[1] = c->blockDimY, block[2] = c->blockDimZ;
  return launch((uint64_t)(uintptr_t)f, grid, block, c->sharedMemBytes,
                guest__stream(c->hStream, ptds), c->attrs, c->numAttrs, params, extra);
}

GUEST_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params,
                                       void **extra) {
  return launch_ex(c, f, params, extra, 0);
}

GUEST_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params,
                                            void **extra) {
  return launch_ex(c, f, params, extra, 1);
}

/* Cooperative launches: the same launch with the cooperative attribute. */
static CUresult launch_coop(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
                            int ptds) {
  unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  CUlaunchAttribute a;
  memset(&a, 0, sizeof(a));
  a.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  a.value.cooperative = 1;
  return launch((uint64_t)(uintptr_t)f, grid, block, shmem, guest__stream(s, ptds), &a, 1, params,
                NULL);
}

GUEST_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                                unsigned bx, unsigned by, unsigned bz,
                                                unsigned shmem, CUstream s, void **params) {
  return launch_coop(f, gx, gy, gz, bx, by, bz, shmem, s, params, 0);
}

GUEST_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy,
                                                     unsigned gz, unsigned bx, unsigned by,
                                                     unsigned bz, unsigned shmem, CUstream s,
                                                     void **params) {
  return launch_coop(f, gx, gy, gz, bx, by, bz, shmem, s, params, 1);
}

/* ---- host functions ---- */

static CUresult host_fn(CUstream s, CUhostFn fn, void *data, int ptds) {
  return guest__hostfn(guest__stream(s, ptds), s, 0, (void *)fn, data);
}

GUEST_EXPORT CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data) {
  return host_fn(s, fn, data, 0);
}
GUEST_EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *data) {
  return host_fn(s, fn, data, 1);
}

static CUresult add_callback(CUstream s, CUstreamCallback cb, void *data, unsigned flags,
                             int ptds) {
  if (!cb || flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  return guest__hostfn(guest__stream(s, ptds), s, 1, (void *)cb, data);
}

GUEST_EXPORT CUresult cuStreamAddCallback(CUstream s, CUstreamCallback cb, void *data,
                                          unsigned int flags) {
  return add_callback(s, cb, data, flags, 0);
}
GUEST_EXPORT CUresult cuStreamAddCallback_ptsz(CUstream s, CUstreamCallback cb, void *data,
                                               unsigned int flags) {
  return add_callback(s, cb, data, flags, 1);
}

/* ---- cuLink* ----
 * One PTX, cubin or fatbin input is its own linked image (numba's
 * single-PTX links): it passes through, and cuModuleLoadData of it JITs in
 * tallyd as usual.  Several inputs, or inputs that only a linker takes
 * (objects, libraries, LTO-IR), are linked by tallyd's driver (LINK): at
 * cuLinkComplete each input's bytes go as a blob (sent only if tallyd lacks
 * them) and the cubin comes back.  The caller's JIT options are not forwarded (log buffers
 * are its memory); tallyd logs the driver's error log when a link fails. */

#define LINK_INPUTS_MAX CALL_LINK_INPUTS_MAX

typedef struct guest_link {
  void *data; /* the linked image (tallyd's output, malloc'd), or NULL */
  size_t size;
  int inputs;
  void *in[LINK_INPUTS_MAX];    /* each input's bytes, NUL appended */
  size_t len[LINK_INPUTS_MAX];  /* without that NUL */
  uint32_t type[LINK_INPUTS_MAX];
} guest_link_t;

GUEST_EXPORT CUresult cuLinkCreate_v2(unsigned int n, CUjit_option *opts, void **vals,
                                      CUlinkState *st) {
  guest_link_t *l;
  (void)n, (void)opts, (void)vals;
  if (!st)
    return CUDA_ERROR_INVALID_VALUE;
  l = calloc(1, sizeof(*l));
  if (!l)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *st = (CUlinkState)l;
  return CUDA_SUCCESS;
}

/* Whether a lone input of this type is already an image cuModuleLoadData takes. */
static bool loads_alone(uint32_t type) {
  return type == CU_JIT_INPUT_PTX || type == CU_JIT_INPUT_CUBIN || type == CU_JIT_INPUT_FATBINARY;
}

GUEST_EXPORT CUresult cuLinkAddData_v2(CUlinkState st, CUjitInputType type, void *data, size_t size,
                                       const char *name, unsigned int n, CUjit_option *opts,
                                       void **vals) {
  guest_link_t *l = (guest_link_t *)st;
  char *copy;
  (void)name, (void)n, (void)opts, (void)vals;
  if (!l || !data || size == 0 || (unsigned)type >= CU_JIT_NUM_INPUT_TYPES || size > CALL_BLOB_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  if (l->data)
    return CUDA_ERROR_ILLEGAL_STATE; /* cuLinkComplete ran */
  if (l->inputs >= LINK_INPUTS_MAX) {
    guest__log("cuLinkAddData: more than %d inputs in one link", LINK_INPUTS_MAX);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  copy = malloc(size + 1);
  if (!copy)
    return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(copy, data, size);
  copy[size] = 0; /* PTX given without its NUL still loads and links */
  l->in[l->inputs] = copy;
  l->len[l->inputs] = size;
  l->type[l->inputs++] = (uint32_t)type;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuLinkAddFile_v2(CUlinkState st, CUjitInputType type, const char *path,
                                       unsigned int n, CUjit_option *opts, void **vals) {
  FILE *f;
  long len;
  char *buf;
  CUresult r;
  if (!path)
    return CUDA_ERROR_INVALID_VALUE;
  f = fopen(path, "rb");
  if (!f)
    return CUDA_ERROR_FILE_NOT_FOUND;
  if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return CUDA_ERROR_FILE_NOT_FOUND;
  }
  buf = malloc((size_t)len);
  if (!buf) {
    fclose(f);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  r = fread(buf, 1, (size_t)len, f) == (size_t)len
          ? cuLinkAddData_v2(st, type, buf, (size_t)len, path, n, opts, vals)
          : CUDA_ERROR_FILE_NOT_FOUND;
  fclose(f);
  free(buf);
  return r;
}

/* LINK: every input offered as a blob, then linked by tallyd; its cubin
 * becomes l->data. */
static CUresult link_in_tallyd(guest_link_t *l) {
  uint8_t recs[LINK_INPUTS_MAX * CALL_LINK_INPUT_SIZE] = {0};
  call_link_req_t q = {.ninput = (uint32_t)l->inputs};
  call_link_rep_t a;
  uint8_t *rep = NULL;
  size_t rlen = 0;
  CUresult res = guest__ready();
  int rc;
  if (res != CUDA_SUCCESS)
    return res;
  for (int i = 0; i < l->inputs; i++) {
    uint8_t *rec = recs + (size_t)i * CALL_LINK_INPUT_SIZE;
    uint64_t id;
    /* A PTX text goes with its NUL, as the driver's linker reads it. */
    size_t n = l->len[i] + (l->type[i] == CU_JIT_INPUT_PTX && ((char *)l->in[i])[l->len[i] - 1]);
    if ((rc = guest__blob_offer(l->in[i], n, &id)) != 0)
      return guest__cu_error(rc);
    wire_le_wr64(rec, id);
    wire_le_wr32(rec + 8, l->type[i]);
  }
  q.inputs = (call_view_t){recs, (size_t)l->inputs * CALL_LINK_INPUT_SIZE};
  rc = guest__call(CALL_OP_LINK, 0, &q, &res, NULL, 0, &rlen, (void **)&rep);
  if (rc)
    return guest__cu_error(rc);
  if (res == CUDA_SUCCESS) {
    if (call_link_rep_decode(rep, rlen, &a, NULL) != 0 || a.image.len == 0)
      res = guest__cu_error(-EPROTO);
    else if (!(l->data = malloc(a.image.len)))
      res = CUDA_ERROR_OUT_OF_MEMORY;
    else {
      memcpy(l->data, a.image.p, a.image.len);
      l->size = a.image.len;
    }
  }
  free(rep);
  return res;
}

GUEST_EXPORT CUresult cuLinkComplete(CUlinkState st, void **out, size_t *size) {
  guest_link_t *l = (guest_link_t *)st;
  CUresult r;
  if (!l || !out || l->inputs == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (l->inputs == 1 && loads_alone(l->type[0])) {
    /* Its own image: the bytes, and the NUL a PTX text needs. */
    *out = l->in[0];
    if (size)
      *size = l->len[0] + 1;
    return CUDA_SUCCESS;
  }
  if (!l->data && (r = link_in_tallyd(l)) != CUDA_SUCCESS)
    return r;
  *out = l->data;
  if (size)
    *size = l->size;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuLinkDestroy(CUlinkState st) {
  guest_link_t *l = (guest_link_t *)st;
  if (!l)
    return CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < l->inputs; i++)
    free(l->in[i]);
  free(l->data);
  free(l);
  return CUDA_SUCCESS;
}
