/* fuzz-hostd-sched.c: libFuzzer target for hostd's scheduler (hostd/sched.c).
 *
 * A tenant's launches reach the scheduler with whatever shape the tenant sent
 * (the guest's own checks are not a trust boundary), so this drives the
 * scheduler's API with arbitrary shapes and orders: one latency-critical and
 * two best-effort tenants, two streams each, the recording GPU backend, policy
 * tally, every best-effort launch through the policy and on a partition of
 * the GPU (--be-sms) that hosts clusters of at most 2 blocks, not held for
 * the latency-critical tenant except kernels whose measured blocks take over
 * 1 us (--be-sms-hold 0 --be-sms-block-us 1: both ways of the policy's
 * PARTITION rule, and the held rules through the long ones) and kernels the
 * partition refused.  The input is a script of 12-byte records:
 *
 *   OFF SIZE FIELD
 *   0   1    op % 6: 0 launch, 1 memset, 2 fence the stream, 3 flush the tenant,
 *                    4 the tenant's quiet point, 5 close the tenant and open it again
 *
 * After each record of the latency-critical tenant comes its quiet point, as
 * its worker in tallyd reaches one after every batch of requests: a script
 * that kept it active for ever would hold best-effort work for ever, by
 * design, and make a fence of theirs wait.
 *   1   1    tenant (% 3: 0 latency-critical, 1 and 2 best-effort), stream (bit 2)
 *   2   1    grid x (0 allowed)
 *   3   1    grid y - 1 and z - 1: bits 0 and 1; bit 7, for a best-effort tenant: a
 *            grid of 2^31-1 x 65535 x 65535 instead (more blocks than the policy counts:
 *            refused at the call)
 *   4   1    % 4: the blocks of a thread-block cluster (a launch attribute; 0: none);
 *            a best-effort launch of a cluster of 3 runs on the whole GPU instead
 *   5   3    unused
 *   8   3    block x, y, z: u8 each, 0 allowed (more than 1024 threads: refused)
 *   11  1    the fill value; the count of 32-bit words filled is value % 17
 *
 * Grids stay small otherwise: a kernel of 10^11 blocks runs for hours on a
 * GPU and, in the recording device's virtual time, past any timeout, and
 * tallyd waits for a leaving tenant's kernels to end.
 *
 * Invariants: nothing crashes or blocks forever (a request that never returns
 * is a libFuzzer timeout: make fuzz passes -timeout); a shape the policy
 * refuses is answered CUDA_ERROR_INVALID_VALUE at the call; after the script
 * every tenant's flush returns and its close completes.
 */
#include "hostd/gpu.h"
#include "hostd/hostd-int.h"
#include "hostd/sched.h"
#include "policy/pol.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { TENANTS = 3, STREAMS = 2, REC = 12, BUF_BYTES = 17 * 4 };

static const char img[] = "TALLYREC\nkernel fill_u32 8,4,8\n";
static uint64_t fill; /* fill_u32(ptr, value, count) */

typedef struct fz_tenant {
  hostd_sched_tenant_t *t;
  uint64_t stream[STREAMS], buf[STREAMS];
  hostd_sched_stream_t *ss[STREAMS];
} fz_tenant_t;

static int first_func(void *arg, const hostd_func_info_t *f) {
  *(uint64_t *)arg = f->handle;
  return 0;
}

static void open_tenant(fz_tenant_t *z, uint32_t id, int cls) {
  CUresult r;
  z->t = hostd__sched_tenant_new(id, cls == 0 ? "lc" : "be", cls, 1);
  for (int s = 0; s < STREAMS; s++)
    z->ss[s] = z->t ? hostd__sched_stream_new(z->t, z->stream[s], &r) : NULL;
}

static void close_tenant(fz_tenant_t *z) {
  (void)hostd__sched_tenant_flush(z->t);
  for (int s = 0; s < STREAMS; s++)
    if (z->ss[s])
      (void)hostd__sched_fence(z->ss[s]);
  hostd__sched_tenant_close(z->t);
  for (int s = 0; s < STREAMS; s++) {
    (void)hostd__gpu.stream_sync(z->stream[s]);
    hostd__sched_stream_free(z->ss[s]);
    z->ss[s] = NULL;
  }
  hostd__sched_tenant_free(z->t);
  z->t = NULL;
}

static void setup(fz_tenant_t *z) {
  hostd_sched_config_t cfg;
  uint64_t mod;
  if (hostd__gpu.init(0, &hostd__snapshot) != CUDA_SUCCESS ||
      hostd__gpu.thread_enter() != CUDA_SUCCESS)
    abort();
  hostd__log_level = HOSTD_LOG_ERROR;
  hostd__sched_config_init(&cfg);
  cfg.be_alone = false;
  cfg.be_sms = 16;
  cfg.be_sms_hold = false;
  cfg.pol.part_block_ns = 1000;
  hostd__record_part_cluster_max = 2;
  if (hostd__sched_parse_policy(&cfg, "tally") != 0 || hostd__sched_init(&cfg) != 0)
    abort();
  if (hostd__gpu.module_load(&mod, 0, img, sizeof(img) - 1) != CUDA_SUCCESS ||
      hostd__gpu.module_functions(mod, 0, false, first_func, &fill) != CUDA_SUCCESS)
    abort();
  for (int i = 0; i < TENANTS; i++)
    for (int s = 0; s < STREAMS; s++)
      if (hostd__gpu.stream_new(&z[i].stream[s], CU_STREAM_NON_BLOCKING, i == 0 ? -5 : 0) !=
              CUDA_SUCCESS ||
          hostd__gpu.mem_alloc(&z[i].buf[s], BUF_BYTES) != CUDA_SUCCESS)
        abort();
}

static void one(fz_tenant_t *z, const uint8_t *p) {
  fz_tenant_t *w = &z[p[1] % TENANTS];
  int s = (p[1] >> 2) & 1;
  hostd_sched_stream_t *ss = w->ss[s];
  uint8_t args[24] = {0};
  uint32_t value = p[11];
  uint64_t count = value % 17;
  CUlaunchAttribute cl = {.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION};
  hostd_sched_launch_t l = {.f = fill, .kernel_id = 0x51, .args = args, .argbytes = sizeof(args)};
  pol_kernel_t k = {0};
  CUresult r;

  if (!w->t && p[0] % 6 != 5)
    return;
  switch (p[0] % 6) {
  case 0:
    l.grid[0] = p[2];
    l.grid[1] = 1 + (p[3] & 1u);
    l.grid[2] = 1 + (p[3] >> 1 & 1u);
    if (p[3] & 0x80 && w != z) /* best-effort only: the LC's launch would run it */
      l.grid[0] = 0x7fffffffu, l.grid[1] = l.grid[2] = 65535;
    for (int i = 0; i < 3; i++) {
      l.block[i] = p[8 + i];
      k.grid[i] = l.grid[i], k.block[i] = l.block[i];
    }
    if (p[4] % 4) {
      cl.value.clusterDim.x = p[4] % 4;
      cl.value.clusterDim.y = cl.value.clusterDim.z = 1;
      l.attrs = &cl;
      l.nattr = 1;
    }
    memcpy(args, &w->buf[s], 8);
    memcpy(args + 8, &value, 4);
    memcpy(args + 16, &count, 8);
    r = hostd__sched_launch(ss, &l);
    /* A best-effort launch of a shape the policy refuses is answered at the
     * call (queued, it would never be issued). */
    if (w != z && ss && pol_kernel_check(&k) != 0 && r != CUDA_ERROR_INVALID_VALUE)
      abort();
    break;
  case 1:
    l.grid[0] = l.grid[1] = l.grid[2] = 1;
    l.block[0] = l.block[1] = l.block[2] = 1;
    l.memset.dst = w->buf[s];
    l.memset.count = count ? count : 1;
    l.memset.value = value;
    l.memset.elem = 4;
    (void)hostd__sched_launch(ss, &l);
    break;
  case 2:
    (void)hostd__sched_fence(ss);
    break;
  case 3:
    (void)hostd__sched_tenant_flush(w->t);
    break;
  case 4:
    hostd__sched_tenant_quiet(w->t);
    break;
  default:
    if (w->t)
      close_tenant(w);
    open_tenant(w, (uint32_t)(w - z) + 1, w == z ? 0 : 1);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static fz_tenant_t z[TENANTS];
  static int inited;
  if (!inited) {
    setup(z);
    inited = 1;
  }
  for (int i = 0; i < TENANTS; i++)
    open_tenant(&z[i], (uint32_t)i + 1, i == 0 ? 0 : 1);
  for (; size >= REC; data += REC, size -= REC) {
    one(z, data);
    if (data[1] % TENANTS == 0)
      hostd__sched_tenant_quiet(z[0].t);
  }
  for (int i = 0; i < TENANTS; i++)
    if (z[i].t)
      close_tenant(&z[i]);
  return 0;
}
