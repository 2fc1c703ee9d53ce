/* hostd-bench.c: what tallyd adds per launch and per synchronisation, on
 * the recording device (no GPU), over shared memory.
 *
 * Starts a real hostd/tallyd-record process on a temporary UNIX socket and
 * is its tenant through guestlib/libcuda.so.1, as an application is.  The
 * recording device's launch and sync do almost nothing, so what is measured
 * is the guest library, wire's shared-memory transport and the daemon's
 * request path (loop thread, worker queue, tenant tables, replies):
 *   launch   N fire-and-forget cuLaunchKernel of an empty kernel, then one
 *            cuStreamSynchronize; ns per launch from first call to the sync's
 *            return, so the daemon's execution of all N is inside it
 *            ("guest" is the calls alone, before the sync)
 *   sync     M x (cuLaunchKernel + cuStreamSynchronize): the round trip,
 *            p50 and p99 in us
 *   query    M x cuStreamQuery on an idle stream: one bare round trip
 *   hostfn   M x (cuLaunchKernel + cuLaunchHostFunc, then the application
 *            waits for its function to run, with no driver call): the step
 *            of a framework that learns of completion through a host
 *            function (XLA), p50 and p99 in us
 *   exec     in this process, no wire: N LAUNCH requests through
 *            hostd__tenant_exec (the worker's whole path: tables, stream
 *            ordering, the backend call) against N calls of the recording
 *            backend's launch alone; the difference is what tenant.c adds
 * usage: hostd-bench [N [M]]   (defaults 200000, 20000).  HOSTD_BENCH_TCP=1
 * runs the tenant over TCP loopback instead of shared memory (the daemon
 * also listens on 127.0.0.1, on a port derived from this process's id).
 * Extra tallyd flags come from TALLYD_ARGS (e.g. "--worker-spin-us 0" or
 * "--spin-us 50"), the build tree from TALLY_BUILDDIR (default "."), so one
 * command reproduces a line: cd BUILDDIR && TALLYD_ARGS=... tests/bench/hostd-bench.
 * Numbers depend on the host's idle cores: the guest, the loop thread and
 * the worker are three runnable threads.
 */
#include <cuda.h>
#include <errno.h>
#include <stdint.h>
#include <signal.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hostd/gpu.h"
#include "hostd/hostd-int.h"
#include "wire/wire.h"

#define CK(x)                                                                                      \
  do {                                                                                             \
    CUresult r_ = (x);                                                                             \
    if (r_ != CUDA_SUCCESS) {                                                                      \
      fprintf(stderr, "hostd-bench: %s -> %d (line %d)\n", #x, (int)r_, __LINE__);                 \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* HOSTD_BENCH_TCP=1: the TCP port the daemon also listens on (0: shm only). */
static int tcp_port;

/* True when a stream socket of family connects to addr. */
static int connects(int family, const void *addr, socklen_t len) {
  int fd = socket(family, SOCK_STREAM, 0), ok;
  ok = fd >= 0 && connect(fd, (const struct sockaddr *)addr, len) == 0;
  if (fd >= 0)
    close(fd);
  return ok;
}

/* True once something accepts connections on path (and on tcp_port). */
static int can_connect(const char *path) {
  struct sockaddr_un a;
  struct sockaddr_in in;
  memset(&a, 0, sizeof(a));
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
  if (!connects(AF_UNIX, &a, sizeof(a)))
    return 0;
  if (!tcp_port)
    return 1;
  memset(&in, 0, sizeof(in));
  in.sin_family = AF_INET;
  in.sin_port = htons((uint16_t)tcp_port);
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return connects(AF_INET, &in, sizeof(in));
}

static pid_t start_daemon(const char *build, const char *dir, const char *sock) {
  char exe[4096], state[200], extra[1024] = "", tcp[64];
  char *argv[32];
  int argc = 0;
  const char *env = getenv("TALLYD_ARGS");
  pid_t pid;

  snprintf(exe, sizeof(exe), "%s/hostd/tallyd-record", build);
  snprintf(state, sizeof(state), "%s/state", dir);
  argv[argc++] = exe;
  argv[argc++] = "--listen-unix";
  argv[argc++] = (char *)sock;
  argv[argc++] = "--state-dir";
  argv[argc++] = state;
  argv[argc++] = "--log-level";
  argv[argc++] = "warn";
  if (tcp_port) {
    snprintf(tcp, sizeof(tcp), "127.0.0.1:%d", tcp_port);
    argv[argc++] = "--listen-tcp";
    argv[argc++] = tcp;
  }
  if (env) {
    snprintf(extra, sizeof(extra), "%s", env);
    for (char *t = strtok(extra, " "); t && argc < 30; t = strtok(NULL, " "))
      argv[argc++] = t;
  }
  argv[argc] = NULL;
  pid = fork();
  if (pid == 0) {
    execv(exe, argv);
    perror(exe);
    _exit(127);
  }
  /* Up to 5 s for the daemon to listen (a bench may wait; tests may not). */
  for (int i = 0; pid > 0 && i < 500 && !can_connect(sock); i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return pid;
}

/* hostfn: the function posts the semaphore the application waits on. */
static void hostfn_post(void *arg) {
  sem_post((sem_t *)arg);
}

static int bench(long n, long m) {
  static const char img[] = "TALLYREC\nkernel empty\n";
  CUcontext ctx;
  CUmodule mod;
  CUfunction f;
  CUstream s;
  double t0, t1, t2, *lat;

  CK(cuInit(0));
  CK(cuDevicePrimaryCtxRetain(&ctx, 0));
  CK(cuCtxSetCurrent(ctx));
  CK(cuModuleLoadData(&mod, img));
  CK(cuModuleGetFunction(&f, mod, "empty"));
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < 1000; i++) /* warm up: tables, rings, page faults */
    CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  CK(cuStreamSynchronize(s));

  t0 = now_ns();
  for (long i = 0; i < n; i++)
    CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  t1 = now_ns();
  CK(cuStreamSynchronize(s));
  t2 = now_ns();
  printf("launch   %ld launches: %.0f ns each through the daemon (guest calls alone %.0f ns)\n", n,
         (t2 - t0) / n, (t1 - t0) / n);

  lat = malloc(sizeof(*lat) * (size_t)m);
  if (!lat)
    return 1;
  for (long i = 0; i < m; i++) {
    double a = now_ns();
    CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
    CK(cuStreamSynchronize(s));
    lat[i] = now_ns() - a;
  }
  qsort(lat, (size_t)m, sizeof(*lat), cmp_double);
  printf("sync     launch + cuStreamSynchronize: p50 %.2f us, p99 %.2f us (%ld rounds)\n",
         lat[m / 2] / 1e3, lat[m * 99 / 100] / 1e3, m);
  for (long i = 0; i < m; i++) {
    double a = now_ns();
    CK(cuStreamQuery(s));
    lat[i] = now_ns() - a;
  }
  qsort(lat, (size_t)m, sizeof(*lat), cmp_double);
  printf("query    cuStreamQuery round trip: p50 %.2f us, p99 %.2f us\n", lat[m / 2] / 1e3,
         lat[m * 99 / 100] / 1e3);
  {
    sem_t done;
    if (sem_init(&done, 0, 0) != 0)
      return 1;
    for (long i = 0; i < m; i++) {
      double a = now_ns();
      CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
      CK(cuLaunchHostFunc(s, hostfn_post, &done));
      while (sem_wait(&done) != 0)
        ;
      lat[i] = now_ns() - a;
    }
    sem_destroy(&done);
  }
  qsort(lat, (size_t)m, sizeof(*lat), cmp_double);
  printf("hostfn   launch + cuLaunchHostFunc, waited for in the application: p50 %.2f us, "
         "p99 %.2f us\n",
         lat[m / 2] / 1e3, lat[m * 99 / 100] / 1e3);
  free(lat);
  CK(cuStreamDestroy(s));
  CK(cuModuleUnload(mod));
  return 0;
}

/* Executes request q of op (encoded by the call table) on t; 0 or -1. */
static int exec_req(hostd_tenant_t *t, uint32_t op, uint32_t flags, const void *q,
                    wire_buf_t *reply) {
  wire_buf_t b;
  const char *why = NULL;
  int rc;
  wire_buf_init(&b);
  rc = call_put(call_req_msg(op), q, &b) ||
       hostd__tenant_exec(t, op, flags, b.data, b.len, reply, &why);
  wire_buf_close(&b);
  return rc ? -1 : 0;
}

/* The worker's per-launch path without the wire (see the header). */
static int bench_exec(long n) {
  static const char img[] = "TALLYREC\nkernel empty\n";
  call_hello_req_t hello = {.version = CALL_PROTO_VERSION};
  call_module_load_req_t load = {0};
  call_stream_new_req_t sn = {.flags = CU_STREAM_NON_BLOCKING};
  call_launch_req_t lq = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
  call_module_load_rep_t lr;
  call_stream_new_rep_t sr;
  call_func_t fr;
  uint8_t launch[CALL_LAUNCH_REQ_FIXED];
  call_view_t tails[CALL_TAILS_MAX];
  uint32_t one[3] = {1, 1, 1};
  uint64_t f, st;
  wire_buf_t reply;
  const char *why = NULL;
  hostd_tenant_t *t;
  double t0, t1, t2;
  call_snapshot_t snap;

  wire_buf_init(&reply);
  hostd__log_level = HOSTD_LOG_WARN;
  if (hostd__gpu.init(0, &snap) != CUDA_SUCCESS || !(t = hostd__tenant_new(1, false)))
    return 1;
  load.id = wire_content_id(img, sizeof(img));
  if (hostd__modcache_put(load.id, img, sizeof(img)) != 0)
    return 1;
  if (exec_req(t, CALL_OP_HELLO, 0, &hello, &reply) ||
      exec_req(t, CALL_OP_MODULE_LOAD, 0, &load, &reply) ||
      call_module_load_rep_decode(reply.data + CALL_REPLY_HDR_LEN, reply.len - CALL_REPLY_HDR_LEN,
                                  &lr, NULL) ||
      call_func_decode(lr.funcs.p, lr.funcs.len, &fr, NULL, NULL) != 0)
    return 1;
  f = fr.handle;
  if (exec_req(t, CALL_OP_STREAM_NEW, 0, &sn, &reply) ||
      call_stream_new_rep_decode(reply.data + CALL_REPLY_HDR_LEN, reply.len - CALL_REPLY_HDR_LEN,
                                 &sr, NULL))
    return 1;
  st = sr.stream;
  lq.func = f;
  lq.stream = st;
  if (call_launch_req_encode(&lq, launch, tails) < 0) /* no attributes, no arguments */
    return 1;
  t0 = now_ns();
  for (long i = 0; i < n; i++)
    if (hostd__tenant_exec(t, CALL_OP_LAUNCH, CALL_ASYNC, launch, sizeof(launch), &reply, &why) !=
        0)
      return 1;
  t1 = now_ns();
  for (long i = 0; i < n; i++)
    (void)hostd__gpu.launch(f, one, one, 0, st, NULL, 0, NULL, 0);
  t2 = now_ns();
  printf("exec     worker path %.0f ns per launch, recording backend's launch alone %.0f ns: "
         "tenant.c and exec.c add %.0f ns\n",
         (t1 - t0) / n, (t2 - t1) / n, ((t1 - t0) - (t2 - t1)) / n);
  hostd__tenant_free(t);
  wire_buf_close(&reply);
  hostd__gpu.shutdown();
  return 0;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 200000, m = argc > 2 ? atol(argv[2]) : 20000;
  const char *build = getenv("TALLY_BUILDDIR") ? getenv("TALLY_BUILDDIR") : ".";
  char dir[] = "/tmp/hostd-bench-XXXXXX", sock[128], host[160], cmd[200];
  pid_t pid;
  int rc, st;

  if (n <= 0 || m <= 0)
    return fprintf(stderr, "usage: hostd-bench [N [M]]\n"), 2;
  if (!mkdtemp(dir))
    return perror("mkdtemp"), 1;
  if (getenv("HOSTD_BENCH_TCP") && strcmp(getenv("HOSTD_BENCH_TCP"), "1") == 0)
    tcp_port = 20000 + getpid() % 20000;
  snprintf(sock, sizeof(sock), "%s/sock", dir);
  pid = start_daemon(build, dir, sock);
  if (pid <= 0 || !can_connect(sock)) {
    fprintf(stderr, "hostd-bench: %s/hostd/tallyd-record did not start\n", build);
    return 1;
  }
  if (tcp_port)
    snprintf(host, sizeof(host), "tcp://127.0.0.1:%d", tcp_port);
  else
    snprintf(host, sizeof(host), "unix:%s", sock);
  setenv("TALLY_HOST", host, 1);
  setenv("TALLY_NAME", "hostd-bench", 1);
  printf("hostd-bench: tallyd-record over %s, %ld CPUs online, TALLYD_ARGS='%s'\n",
         tcp_port ? "TCP loopback" : "shm", sysconf(_SC_NPROCESSORS_ONLN),
         getenv("TALLYD_ARGS") ? getenv("TALLYD_ARGS") : "");
  rc = bench(n, m);
  kill(pid, SIGTERM);
  if (rc == 0)
    rc = bench_exec(n);
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
    ;
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    rc = 1;
  return rc;
}
