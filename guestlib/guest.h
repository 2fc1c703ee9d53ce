/* guest.h: the internal-public header of guestlib/, the guest library.
 *
 * guestlib/ is installed as libcuda.so.1: its public API is the CUDA driver
 * API itself (cuda.h).  This header only carries what the rest of the
 * library and its tests share: the export macro and the environment names.
 */
#ifndef TALLY_GUEST_H
#define TALLY_GUEST_H

/* Only cu* entry points are visible outside libcuda.so.1 (-fvisibility=hidden
 * elsewhere), so tenant programs' own zstd/xxHash never collide with ours. */
#define GUEST_EXPORT __attribute__((visibility("default")))

/* Driver version we report: CUDA 13.0. */
#define GUEST_DRIVER_VERSION 13000

#define GUEST_ENV_HOST "TALLY_HOST"         /* unset: local UNIX socket; tcp://h:p */
#define GUEST_ENV_PRIORITY "TALLY_PRIORITY" /* latency-critical | best-effort */
#define GUEST_ENV_NAME "TALLY_NAME"
#define GUEST_ENV_TOKEN "TALLY_TOKEN"

#endif /* TALLY_GUEST_H */
