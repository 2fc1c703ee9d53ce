/* guest-daemon-harness.h: one process that is both tallyd and its tenant.
 *
 * For tests that drive the guest library (this program links
 * guestlib/libcuda.so.1) against tallyd's server running in a thread of the
 * same process on the recording GPU backend (hostd/gpu-record.c), with
 * other tenants as child processes (tests/guest-tenant-helper).  Include it
 * once per test program; gd_start in the cmocka group setup, gd_stop in its
 * teardown.  tallyd listens on a UNIX socket (this process's tenant: shared
 * memory) and on TCP loopback with a token (gd_tcp_env: a helper over TCP).
 * Never GPU coverage: the GPU tests are in tests/gpu/.
 */
#ifndef TALLY_TESTS_GUEST_DAEMON_HARNESS_H
#define TALLY_TESTS_GUEST_DAEMON_HARNESS_H

#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hostd/hostd-int.h"
#include "tests/spawn-env.h"

static hostd_server_t *srv;
static pthread_t srv_thread;
static char dir[64], sock[96];
static CUcontext ctx; /* the primary context, current on the test thread */
/* "TALLY_HOST=tcp://127.0.0.1:PORT": helper()'s extra_env for a tenant
 * over TCP (TALLY_TOKEN is in the environment from gd_start on). */
__attribute__((unused)) static char gd_tcp_env[64];
#define GD_TOKEN "tally-test-token"
/* How long a test waits for tallyd to see a tenant come or go: an upper
 * bound for a loaded CI machine under the sanitizers, not a speed target. */
#define GD_SETTLE_MS 60000

static void *gd_run_server(void *arg) {
  (void)arg;
  hostd_server_run(srv);
  return NULL;
}

/* Starts tallyd (socket and state in a fresh /tmp directory) and makes this
 * process its best-effort tenant `name` with the primary context current.
 * restart_grace_ms < 0 keeps the default.  0 or -1. */
static int gd_start(const char *name, int restart_grace_ms) {
  hostd_config_t cfg;
  char host[320];
  hostd__op_count_on = true; /* ops() below reads the counts */
  snprintf(dir, sizeof(dir), "/tmp/tally-test-XXXXXX");
  if (!mkdtemp(dir))
    return -1;
  snprintf(sock, sizeof(sock), "%s/sock", dir);
  hostd_config_init(&cfg);
  snprintf(cfg.unix_path, sizeof(cfg.unix_path), "%s", sock);
  snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s/state", dir);
  snprintf(cfg.tcp_addr, sizeof(cfg.tcp_addr), "127.0.0.1:0");
  snprintf(cfg.token_file, sizeof(cfg.token_file), "%s/token", dir);
  {
    int fd = open(cfg.token_file, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || write(fd, GD_TOKEN "\n", sizeof(GD_TOKEN)) != (ssize_t)sizeof(GD_TOKEN) ||
        close(fd) != 0)
      return -1;
  }
  cfg.log_level = HOSTD_LOG_WARN;
  cfg.hostfn_wake_us = 200; /* on (off by default) */
  if (restart_grace_ms >= 0)
    cfg.restart_grace_ms = restart_grace_ms;
  if (hostd_server_new(&srv, &cfg, false) != 0)
    return -1;
  snprintf(gd_tcp_env, sizeof(gd_tcp_env), "TALLY_HOST=tcp://127.0.0.1:%d",
           hostd_server_tcp_port(srv));
  if (pthread_create(&srv_thread, NULL, gd_run_server, NULL) != 0)
    return -1;
  snprintf(host, sizeof(host), "unix:%s", sock);
  setenv("TALLY_HOST", host, 1);
  setenv("TALLY_PRIORITY", "best-effort", 1);
  setenv("TALLY_NAME", name, 1);
  if (cuInit(0) != CUDA_SUCCESS)
    return -1;
  if (cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
    return -1;
  setenv("TALLY_TOKEN", GD_TOKEN, 1); /* for helpers over TCP (gd_tcp_env) */
  return 0;
}

/* Stops tallyd and removes its directory.  0 or -1. */
static int gd_stop(void) {
  char cmd[400];
  hostd_server_stop(srv);
  pthread_join(srv_thread, NULL);
  hostd_server_free(srv);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Requests of kind op tallyd has executed so far (all tenants). */
__attribute__((unused)) static unsigned long ops(int op) {
  return __atomic_load_n(&hostd__op_count[op], __ATOMIC_RELAXED);
}

/* Runs tests/guest-tenant-helper ACTION as another tenant; returns a FILE*
 * on its stdout and its pid.  to_child (may be NULL) gets a pipe to its
 * stdin; extra_env (may be NULL) is one NAME=VALUE added to its
 * environment. */
__attribute__((unused)) static FILE *helper(const char *action, pid_t *pid, int *to_child,
                                            const char *extra_env) {
  int out[2], in[2];
  char path[4096];
  const char *b = getenv("TALLY_BUILDDIR");
  char *argv[] = {path, (char *)action, NULL};
  char **env;
  snprintf(path, sizeof(path), "%s/tests/guest-tenant-helper", b ? b : ".");
  if ((env = spawn_env(&extra_env, 1)) == NULL)
    return NULL;
  if (pipe(out) != 0 || pipe(in) != 0) {
    free(env);
    return NULL;
  }
  *pid = fork();
  if (*pid == 0) { /* async-signal-safe calls only: tallyd's threads run on */
    dup2(out[1], 1);
    dup2(in[0], 0);
    close(out[0]);
    close(in[1]);
    execve(path, argv, env);
    _exit(127);
  }
  free(env);
  close(out[1]);
  close(in[0]);
  if (to_child)
    *to_child = in[1];
  else
    close(in[1]);
  return fdopen(out[0], "r");
}

/* Waits for pid (retrying EINTR); returns its wait status. */
__attribute__((unused)) static int wait_exit(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
    ;
  return st;
}

#endif /* TALLY_TESTS_GUEST_DAEMON_HARNESS_H */
