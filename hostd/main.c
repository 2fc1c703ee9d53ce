/* main.c: tallyd's entry point: parse the configuration and run the daemon.
 *
 * Runs in the foreground, logs to stderr, and exits 0 after SIGTERM or
 * SIGINT once every tenant has been cleaned up; exit 2 for bad flags, 1 when
 * it cannot start (no GPU, address in use).
 *
 * After a tenant's GPU fault the driver keeps this process poisoned, so the
 * server hands back HOSTD_SERVER_RESTART and tallyd re-executes itself with
 * the same argv and pid, keeping its listening sockets (hostd/restart.c);
 * the new image finds them in TALLY_LISTEN_FDS and adopts them.  If the exec
 * fails, tallyd exits 1 so a supervisor can start it afresh.
 */
#include "config.h"

#include "hostd/hostd-int.h"

#include <errno.h>
#include <execinfo.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A fatal signal (a bug in tallyd or in the driver under it): the frames go
 * to the log (stderr) so that the crash can be placed, then the default
 * action ends the process (a core dump where the system keeps them).  Only
 * async-signal-safe calls; backtrace() is warmed up in main so that it
 * does not load libgcc inside the handler. */
static void on_fatal(int sig) {
  static const char head[] = "tallyd: fatal signal, frames (addr2line -e tallyd OFFSET):\n";
  void *frames[48];
  int n = backtrace(frames, 48);
  ssize_t w = write(STDERR_FILENO, head, sizeof(head) - 1);
  (void)w;
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  signal(sig, SIG_DFL);
  raise(sig);
}

static void crash_frames_on(void) {
  void *warm[1];
  static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  (void)backtrace(warm, 1);
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
    signal(sigs[i], on_fatal);
}

int main(int argc, char **argv) {
  hostd_config_t cfg;
  hostd_server_t *s = NULL;
  int rc, inherited;

  /* wire's contract: a vanished TCP guest must not kill the daemon. */
  signal(SIGPIPE, SIG_IGN);
  crash_frames_on();
  /* Blocks of 1 MiB and more (a tenant's large messages, module images)
   * come from mmap and go back to the system when freed.  glibc would
   * otherwise raise this threshold after the first such free and keep
   * later ones in per-thread arenas, so the daemon's memory would stay at
   * its high-water mark after a burst of tenants. */
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  hostd_config_init(&cfg);
  /* GNU: --help and --version win over anything else on the line. */
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      hostd_config_usage(stdout);
      return 0;
    }
    if (strcmp(argv[i], "--version") == 0) {
      printf("tallyd (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
      return 0;
    }
  }
  if (hostd_config_parse_args(&cfg, argc, argv, stderr) != 0 ||
      hostd_config_check(&cfg, stderr) != 0)
    return 2;
  hostd__log_level = cfg.log_level;
  inherited = hostd__restart_inherit(&cfg.unix_listen_fd, &cfg.tcp_listen_fd);
  if (inherited > 0)
    hostd__log(HOSTD_LOG_WARN,
               "tallyd pid %d restarted after a GPU fault: adopting listening socket(s) unix fd "
               "%d, tcp fd %d (0 = none)",
               (int)getpid(), cfg.unix_listen_fd, cfg.tcp_listen_fd);
  rc = hostd_server_new(&s, &cfg, true);
  if (rc != 0) {
    fprintf(stderr, "tallyd: cannot start (%s)\n",
            rc == -ENODEV ? "no usable GPU" : strerror(rc < 0 && rc > -4096 ? -rc : 0));
    return 1;
  }
  {
    /* A restart blocks these across the exec (restart.c): now that the
     * server watches them, one that arrived meanwhile is handled. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
  }
  rc = hostd_server_run(s);
  if (rc == HOSTD_SERVER_RESTART) {
    int ufd = -1, tfd = -1;
    rc = hostd_server_listen_fds(s, &ufd, &tfd);
    if (rc == 0)
      rc = hostd__restart_exec(argv, ufd, tfd); /* returns only on failure */
    hostd__log(HOSTD_LOG_ERROR, "cannot re-execute tallyd after a GPU fault (%s); exiting",
               strerror(rc < 0 && rc > -4096 ? -rc : EIO));
    hostd_server_free(s);
    return 1;
  }
  hostd_server_free(s);
  /* wire never unlinks the path of an adopted socket (it did not bind it);
   * the daemon that leaves is the one that knows the path is its own. */
  if (cfg.unix_listen_fd > 0 && cfg.unix_path[0])
    unlink(cfg.unix_path);
  return rc == 0 ? 0 : 1;
}
