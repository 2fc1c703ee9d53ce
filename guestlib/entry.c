/* entry.c: initialisation of libcuda.so.1 and its error vocabulary.
 *
 * cuInit connects to tallyd (TALLY_HOST, default the local UNIX socket),
 * says hello (protocol version, priority, name, token) and receives the
 * snapshot of every device it may use; from then on device queries are
 * answered from that snapshot (device.c) without a round trip.  If tallyd
 * cannot be reached, cuInit returns CUDA_ERROR_NO_DEVICE and logs one line
 * naming the address it tried and how to start tallyd.  cuInit's result is
 * remembered: later calls return it without reconnecting, as the driver does.
 *
 * This file also holds the one table that maps our own failures (negative
 * errno, wire codes) to CUresult, the logger, and the "not supported" log
 * that every generated stub uses.
 */
#include "guestlib/guest.h"
#include "wire/wire.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The one guest state; see guest.h for its lock story. */
guest_state_t guest__g = {.lock = PTHREAD_MUTEX_INITIALIZER};

void guest__log(const char *fmt, ...) {
  char line[1024];
  va_list ap;
  int n;

  va_start(ap, fmt);
  n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  fprintf(stderr, "tally[%d]: %s\n", (int)getpid(), line);
}

bool guest__debug(void) {
  const char *v = getenv(GUEST_ENV_LOG);
  return v && strcmp(v, "debug") == 0;
}

CUresult guest__unsupported(const char *name, int *logged) {
  if (!atomic_exchange((_Atomic int *)logged, 1))
    guest__log("%s is not supported by Tally yet (returning CUDA_ERROR_NOT_SUPPORTED)", name);
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult guest__refused(const char *name, const char *why, int *logged) {
  if (!atomic_exchange((_Atomic int *)logged, 1))
    guest__log("%s: %s (returning CUDA_ERROR_NOT_SUPPORTED)", name, why);
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult guest__forked_error(void) {
  static int logged;
  if (!atomic_exchange((_Atomic int *)&logged, 1))
    guest__log("this process was forked from a tenant after cuInit: CUDA is not available in "
               "it, as with the driver (returning CUDA_ERROR_NOT_INITIALIZED); exec a new "
               "program, or start worker processes with 'spawn', to use the GPU from a child");
  return CUDA_ERROR_NOT_INITIALIZED;
}

/* Our own failures, in one table.  Everything a tenant can do about a lost
 * channel is to stop, which CUDA spells CUDA_ERROR_DEVICE_UNAVAILABLE. */
CUresult guest__cu_error(int status) {
  switch (status) {
  case 0:
    return CUDA_SUCCESS;
  case -ENOMEM:
    return CUDA_ERROR_OUT_OF_MEMORY;
  case -EINVAL:
  case -EMSGSIZE:
    return CUDA_ERROR_INVALID_VALUE;
  case -ENOTCONN:
    if (guest__g.forked)
      return guest__forked_error();
    return guest__g.inited || guest__g.lost ? CUDA_ERROR_DEVICE_UNAVAILABLE
                                            : CUDA_ERROR_NOT_INITIALIZED;
  case -ECONNRESET:
  case -EPIPE:
  case -EPROTO:
  default:
    return CUDA_ERROR_DEVICE_UNAVAILABLE;
  }
}

CUresult guest__ready(void) {
  if (guest__g.forked)
    return guest__forked_error();
  if (!guest__g.inited)
    return guest__g.init_rc != CUDA_SUCCESS && guest__g.init_rc != 0 ? guest__g.init_rc
                                                                     : CUDA_ERROR_NOT_INITIALIZED;
  return guest__g.lost ? CUDA_ERROR_DEVICE_UNAVAILABLE : CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuDriverGetVersion(int *version) {
  if (version == NULL)
    return CUDA_ERROR_INVALID_VALUE;
  *version = GUEST_DRIVER_VERSION;
  return CUDA_SUCCESS;
}

static void env_or(char *dst, size_t cap, const char *name, const char *dflt) {
  const char *v = getenv(name);
  snprintf(dst, cap, "%s", v && *v ? v : dflt);
}

/* Connects, then asks for the device snapshot.  Lock held. */
static CUresult connect_locked(void) {
  call_hello_req_t hello;
  call_hello_rep_t a;
  uint32_t prio = 1;
  const char *p = getenv(GUEST_ENV_PRIORITY);
  char name[65], token[257], why[512] = "", prog[64];
  uint8_t *rep = NULL;
  size_t rlen = 0;
  CUresult res = CUDA_SUCCESS;
  int rc;

  env_or(guest__g.addr, sizeof(guest__g.addr), GUEST_ENV_HOST, "unix:" GUEST_DEFAULT_SOCKET);
  snprintf(prog, sizeof(prog), "pid-%d", (int)getpid());
  env_or(name, sizeof(name), GUEST_ENV_NAME, prog);
  env_or(token, sizeof(token), GUEST_ENV_TOKEN, "");
  if (p && strcmp(p, "latency-critical") == 0)
    prio = 0;
  rc = guest__chan_open(guest__g.addr, name, prio == 0, token, why, sizeof(why));
  if (rc == -ECONNREFUSED || rc == -ENOENT || rc == -EHOSTUNREACH || rc == -ETIMEDOUT ||
      rc == -ENETUNREACH) {
    guest__log("cannot reach tallyd at %s (%s%s%s); start it with 'tallyd --listen-unix PATH' "
               "and run the program under 'tally-run --host unix:PATH -- CMD'",
               guest__g.addr, wire_strerror(rc), why[0] ? ": " : "", why);
    return CUDA_ERROR_NO_DEVICE;
  }
  if (rc) {
    guest__log("tallyd at %s refused this tenant (%s%s%s)", guest__g.addr, wire_strerror(rc),
               why[0] ? ": " : "", why);
    return CUDA_ERROR_NO_DEVICE;
  }
  memset(&hello, 0, sizeof(hello));
  hello.version = CALL_PROTO_VERSION;
  hello.priority = prio;
  guest__g.priority = prio;
  memcpy(hello.name, name, strnlen(name, 63));
  rc = guest__call(CALL_OP_HELLO, 0, &hello, &res, NULL, 0, &rlen, (void **)&rep);
  if (rc == -ETIMEDOUT) {
    guest__log("tallyd at %s took the connection but did not answer its hello within "
               "TALLY_CONNECT_WAIT_MS; giving up", guest__g.addr);
    goto fail;
  }
  if (rc || res != CUDA_SUCCESS) {
    guest__log("tallyd at %s refused this tenant (%s)", guest__g.addr,
               rc ? wire_strerror(rc) : "call protocol versions differ");
    goto fail;
  }
  if (call_hello_rep_decode(rep, rlen, &a, NULL) != 0)
    goto bad; /* ndev <= CALL_MAX_DEVICES, devs exactly ndev snapshots */
  guest__g.tenant_id = a.tenant;
  guest__g.ndev = (int)a.ndev;
  for (int i = 0; i < guest__g.ndev; i++)
    if (call_snapshot_decode(a.devs.p + (size_t)i * CALL_SNAPSHOT_SIZE, CALL_SNAPSHOT_SIZE,
                             &guest__g.dev[i], NULL, NULL) != 0)
      goto bad;
  for (int i = 0; i < guest__g.ndev; i++)
    guest__g.dev[i].name[CALL_NAME_MAX - 1] = 0;
  free(rep);
  if (guest__debug())
    guest__log("tenant %u on %s: %d device(s)", guest__g.tenant_id, guest__g.addr, guest__g.ndev);
  return guest__g.ndev > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
bad:
  guest__log("tallyd at %s sent a malformed hello reply", guest__g.addr);
fail:
  free(rep);
  guest__chan_close();
  return CUDA_ERROR_NO_DEVICE;
}

GUEST_EXPORT CUresult cuInit(unsigned int flags) {
  CUresult res;

  if (flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (guest__g.forked) /* before the lock: a thread of the parent may have held it */
    return guest__forked_error();
  pthread_mutex_lock(&guest__g.lock);
  if (guest__g.inited || guest__g.init_rc != CUDA_SUCCESS) {
    res = guest__g.inited ? CUDA_SUCCESS : guest__g.init_rc;
    goto out;
  }
  res = connect_locked();
  if (res == CUDA_SUCCESS)
    guest__g.inited = true;
  else
    guest__g.init_rc = res;
out:
  pthread_mutex_unlock(&guest__g.lock);
  return res;
}

GUEST_EXPORT CUresult cuGetErrorName(CUresult error, const char **str) {
  if (!str)
    return CUDA_ERROR_INVALID_VALUE;
  switch ((int)error) {
#define GUEST_RESULT(name, value, text)                                                            \
  case value:                                                                                      \
    *str = #name;                                                                                  \
    return CUDA_SUCCESS;
#include "guestlib/cuda-result.def"
#undef GUEST_RESULT
  default:
    *str = NULL;
    return CUDA_ERROR_INVALID_VALUE;
  }
}

GUEST_EXPORT CUresult cuGetErrorString(CUresult error, const char **str) {
  if (!str)
    return CUDA_ERROR_INVALID_VALUE;
  switch ((int)error) {
#define GUEST_RESULT(name, value, text)                                                            \
  case value:                                                                                      \
    *str = text;                                                                                   \
    return CUDA_SUCCESS;
#include "guestlib/cuda-result.def"
#undef GUEST_RESULT
  default:
    *str = NULL;
    return CUDA_ERROR_INVALID_VALUE;
  }
}
