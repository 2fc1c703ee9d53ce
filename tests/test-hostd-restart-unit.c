/* test-hostd-restart-unit.c: the parts of tallyd's restart after a GPU
 * fault that can be checked in one process (hostd/restart.c, the flag).
 *
 * The whole path (fault, refusal, exec, adoption of the sockets) runs in
 * tests/test-hostd-restart.sh against tallyd-record.  Here: the
 * TALLY_LISTEN_FDS value is parsed strictly; an inherited listening socket
 * is adopted, checked and hidden from children; anything else named there
 * is refused; the fault is recorded once and its hook runs once;
 * --restart-grace-ms is parsed; and hostd__restart_exec really re-executes
 * this program (a forked child does it) with nothing open but stdin, stdout,
 * stderr and the listening socket, SIGTERM and SIGINT blocked, and the
 * socket's number in the environment.
 */
#include <cuda.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostd/hostd-int.h"

static void listen_fds_value_is_parsed_strictly(void **state) {
  static const char *const bad[] = {"",        "unix:",         "unix:2",       "unix:3,unix:4",
                                    "unix:3,", "udp:3",         "unix:3x",      "unix:99999999",
                                    "tcp:-4",  "unix:3,,tcp:4", "unix:3;tcp:4", "unix:3,tcp:"};
  int u = -1, t = -1;
  (void)state;
  assert_int_equal(hostd__restart_parse_fds("unix:3,tcp:4", &u, &t), 0);
  assert_int_equal(u, 3);
  assert_int_equal(t, 4);
  assert_int_equal(hostd__restart_parse_fds("tcp:9,unix:12", &u, &t), 0);
  assert_int_equal(u, 12);
  assert_int_equal(t, 9);
  assert_int_equal(hostd__restart_parse_fds("tcp:9", &u, &t), 0);
  assert_int_equal(u, 0);
  assert_int_equal(t, 9);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    u = t = -1;
    if (hostd__restart_parse_fds(bad[i], &u, &t) != -EINVAL)
      fail_msg("accepted '%s'", bad[i]);
    assert_int_equal(u, 0);
    assert_int_equal(t, 0);
  }
}

/* A listening UNIX socket at a fresh path, without FD_CLOEXEC (as after
 * an exec); its path goes to path (unlinked by the caller). */
static int unix_listener(char *path, size_t len) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  snprintf(path, len, "/tmp/tally-restart-unit-%d.sock", (int)getpid());
  unlink(path);
  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
  assert_true(fd > 2);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(fd, 4), 0);
  return fd;
}

static void inherited_listening_socket_is_adopted_and_hidden(void **state) {
  char path[108], val[32];
  int fd, u = -1, t = -1;
  (void)state;
  fd = unix_listener(path, sizeof(path));
  snprintf(val, sizeof(val), "unix:%d", fd);
  setenv(HOSTD_LISTEN_FDS_ENV, val, 1);
  assert_int_equal(hostd__restart_inherit(&u, &t), 1);
  assert_int_equal(u, fd);
  assert_int_equal(t, 0);
  assert_null(getenv(HOSTD_LISTEN_FDS_ENV)); /* nothing for a child to misread */
  assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
  close(fd);
  unlink(path);
}

static void inherited_value_naming_no_listener_is_refused(void **state) {
  char path[108], val[32];
  int p[2], sp[2], lfd, u = -1, t = -1;
  (void)state;
  assert_int_equal(pipe(p), 0);
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
  lfd = unix_listener(path, sizeof(path));
  snprintf(val, sizeof(val), "unix:%d", p[0]); /* not a socket */
  setenv(HOSTD_LISTEN_FDS_ENV, val, 1);
  assert_int_equal(hostd__restart_inherit(&u, &t), -ENOTSOCK);
  assert_int_equal(u, 0);
  assert_null(getenv(HOSTD_LISTEN_FDS_ENV));
  snprintf(val, sizeof(val), "unix:%d", sp[0]); /* a socket nobody listens on */
  setenv(HOSTD_LISTEN_FDS_ENV, val, 1);
  assert_int_equal(hostd__restart_inherit(&u, &t), -EINVAL);
  snprintf(val, sizeof(val), "tcp:%d", lfd); /* a UNIX listener in the TCP slot */
  setenv(HOSTD_LISTEN_FDS_ENV, val, 1);
  assert_int_equal(hostd__restart_inherit(&u, &t), -EAFNOSUPPORT);
  assert_int_equal(t, 0);
  setenv(HOSTD_LISTEN_FDS_ENV, "unix:", 1); /* malformed */
  assert_int_equal(hostd__restart_inherit(&u, &t), -EINVAL);
  unsetenv(HOSTD_LISTEN_FDS_ENV); /* a first start */
  assert_int_equal(hostd__restart_inherit(&u, &t), 0);
  assert_int_equal(u, 0);
  assert_int_equal(t, 0);
  close(p[0]);
  close(p[1]);
  close(sp[0]);
  close(sp[1]);
  close(lfd);
  unlink(path);
}

static int hook_calls;
static void *hook_arg;
static void hook(void *arg) {
  hook_calls++;
  hook_arg = arg;
}

static void fault_is_recorded_once_and_its_hook_runs_once(void **state) {
  uint32_t who = 0;
  int tag;
  (void)state;
  hostd__fault_on_raise(hook, &tag);
  assert_int_equal(hostd__fault_pending(&who), 0);
  assert_int_equal(hostd__fault_raise(3, CUDA_ERROR_ILLEGAL_ADDRESS), 1);
  assert_int_equal(hostd__fault_raise(4, CUDA_ERROR_LAUNCH_FAILED), 0); /* already poisoned */
  assert_int_equal(hostd__fault_pending(&who), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(who, 3);
  assert_int_equal(hook_calls, 1);
  assert_ptr_equal(hook_arg, &tag);
  hostd__fault_forget();
  hostd__fault_on_raise(NULL, NULL);
  assert_int_equal(hostd__fault_pending(NULL), 0);
  assert_int_equal(hostd__fault_raise(5, CUDA_ERROR_ASSERT), 1); /* no hook: fine */
  assert_int_equal(hook_calls, 1);
  hostd__fault_forget();
}

static void grace_flag_is_parsed_and_documented(void **state) {
  static const char *const bad[] = {"-1", "60001", "x", "10ms", ""};
  hostd_config_t cfg;
  char *argv[3] = {"tallyd", "--restart-grace-ms", NULL};
  char help[4096] = {0};
  FILE *devnull = fopen("/dev/null", "w"), *h = fmemopen(help, sizeof(help) - 1, "w");
  (void)state;
  assert_non_null(devnull);
  assert_non_null(h);
  hostd_config_init(&cfg);
  assert_int_equal(cfg.restart_grace_ms, HOSTD_DEFAULT_RESTART_GRACE_MS);
  assert_int_equal(cfg.unix_listen_fd, 0); /* bind as usual */
  argv[2] = "0";
  assert_int_equal(hostd_config_parse_args(&cfg, 3, argv, devnull), 0);
  assert_int_equal(cfg.restart_grace_ms, 0);
  argv[2] = "60000";
  assert_int_equal(hostd_config_parse_args(&cfg, 3, argv, devnull), 0);
  assert_int_equal(cfg.restart_grace_ms, 60000);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    argv[2] = (char *)bad[i];
    if (hostd_config_parse_args(&cfg, 3, argv, devnull) != -EINVAL)
      fail_msg("accepted --restart-grace-ms '%s'", bad[i]);
  }
  hostd_config_usage(h);
  fclose(h);
  assert_non_null(strstr(help, "--restart-grace-ms"));
  fclose(devnull);
}

/* ---- a real exec ---- */

/* After hostd__restart_exec this program starts again with argv[1] ==
 * "after-exec": it reports, on stdout, the descriptors it found open, the
 * variable, and whether SIGTERM is blocked, then exits. */
static int after_exec(void) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  sigset_t cur;
  const char *v = getenv(HOSTD_LISTEN_FDS_ENV);

  if (!d)
    return 1;
  printf("fds");
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d))
      printf(" %s", e->d_name);
  closedir(d);
  pthread_sigmask(SIG_SETMASK, NULL, &cur);
  printf("\nenv %s\nsigterm %s\n", v ? v : "-", sigismember(&cur, SIGTERM) ? "blocked" : "open");
  return 0;
}

static const char *self_path;

static void exec_keeps_only_the_listening_socket(void **state) {
  char path[108], out[512] = {0}, want[128];
  int lfd, leak, o[2], st = 0;
  size_t got = 0;
  ssize_t r;
  pid_t pid;
  (void)state;
  lfd = unix_listener(path, sizeof(path));
  leak = dup(lfd); /* no FD_CLOEXEC: the exec must still not pass it on */
  assert_true(leak > 2);
  assert_int_equal(pipe(o), 0);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    char *argv[] = {(char *)self_path, "after-exec", NULL};
    dup2(o[1], 1);
    close(o[0]);
    close(o[1]);
    hostd__log_level = HOSTD_LOG_ERROR; /* its log line is not the child's output */
    _exit(hostd__restart_exec(argv, lfd, 0) == 0 ? 0 : 99); /* returns only on failure */
  }
  close(o[1]);
  while ((r = read(o[0], out + got, sizeof(out) - 1 - got)) > 0)
    got += (size_t)r;
  close(o[0]);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  snprintf(want, sizeof(want), "env unix:%d\n", lfd);
  assert_non_null(strstr(out, want));
  assert_non_null(strstr(out, "sigterm blocked\n"));
  /* 0, 1, 2 and the listener, in /proc order (ascending). */
  snprintf(want, sizeof(want), "fds 0 1 2 %d\n", lfd);
  if (!strstr(out, want))
    fail_msg("after exec: %s(want %s)", out, want);
  close(leak);
  close(lfd);
  unlink(path);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(listen_fds_value_is_parsed_strictly),
      cmocka_unit_test(inherited_listening_socket_is_adopted_and_hidden),
      cmocka_unit_test(inherited_value_naming_no_listener_is_refused),
      cmocka_unit_test(fault_is_recorded_once_and_its_hook_runs_once),
      cmocka_unit_test(grace_flag_is_parsed_and_documented),
      cmocka_unit_test(exec_keeps_only_the_listening_socket),
  };
  if (argc == 2 && strcmp(argv[1], "after-exec") == 0)
    return after_exec();
  self_path = argv[0];
  hostd__log_level = HOSTD_LOG_ERROR;
  return cmocka_run_group_tests_name("hostd-restart-unit", tests, NULL, NULL);
}
