/* tallyctl.c: the operator's view of a running tallyd.
 *
 *   tallyctl [--socket PATH] status    tenants, one a line
 *   tallyctl [--socket PATH] metrics   Prometheus text exposition
 *
 * It connects to tallyd's control socket (hostd/ctl.c; by default the
 * tenants' socket path + ".ctl"), sends the command as one line and copies
 * the answer to stdout.  The socket admits root and its group only; an
 * answer starting "error:" goes to stderr and exits 1.  Exit 2 for bad
 * usage, 1 when tallyd cannot be reached.  No daemon code is linked: this
 * is a plain client.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "hostd/hostd.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: tallyctl [--socket PATH] COMMAND\n"
          "Shows what a running tallyd serves.\n\n"
          "Commands:\n"
          "  status      tenants: name, pid/peer, class, weight, transport, connected since,\n"
          "              device memory, kernels, GPU time, queue depth, LC p50/p99,\n"
          "              sliced and PTB variant launches (\"-\" where tallyd does not\n"
          "              measure it); the scheduler's preemptions and turnaround p50/p99\n"
          "  metrics     the same as Prometheus text exposition\n\n"
          "Options:\n"
          "  --socket PATH   tallyd's control socket (default %s%s)\n"
          "  -h, --help      this text\n"
          "  --version       tallyctl's version\n",
          HOSTD_DEFAULT_SOCKET, HOSTD_CONTROL_SUFFIX);
}

static int ask(const char *path, const char *cmd) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  char buf[65536];
  ssize_t n;
  int fd, first = 1, err = 0;
  if (strlen(path) >= sizeof(sa.sun_path)) {
    fprintf(stderr, "tallyctl: --socket %s: path too long\n", path);
    return 2;
  }
  memcpy(sa.sun_path, path, strlen(path));
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    fprintf(stderr, "tallyctl: cannot reach tallyd at %s: %s\n", path, strerror(errno));
    if (fd >= 0)
      close(fd);
    return 1;
  }
  if (dprintf(fd, "%s\n", cmd) < 0) {
    fprintf(stderr, "tallyctl: %s: %s\n", path, strerror(errno));
    close(fd);
    return 1;
  }
  while ((n = read(fd, buf, sizeof(buf))) > 0) {
    if (first && n >= 6 && memcmp(buf, "error:", 6) == 0)
      err = 1;
    first = 0;
    fwrite(buf, 1, (size_t)n, err ? stderr : stdout);
  }
  close(fd);
  if (first && !err) {
    fprintf(stderr, "tallyctl: tallyd closed %s without an answer\n", path);
    return 1;
  }
  return err;
}

int main(int argc, char **argv) {
  const char *path = HOSTD_DEFAULT_SOCKET HOSTD_CONTROL_SUFFIX, *cmd = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(argv[i], "--version")) {
      printf("tallyctl (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
      return 0;
    }
  }
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--socket") && i + 1 < argc)
      path = argv[++i];
    else if (!strncmp(argv[i], "--socket=", 9))
      path = argv[i] + 9;
    else if (argv[i][0] == '-' || cmd) {
      fprintf(stderr, "tallyctl: unexpected argument '%s' (see tallyctl --help)\n", argv[i]);
      return 2;
    } else
      cmd = argv[i];
  }
  if (!cmd || (strcmp(cmd, "status") && strcmp(cmd, "metrics"))) {
    fprintf(stderr, "tallyctl: expected a command, status or metrics (see tallyctl --help)\n");
    return 2;
  }
  return ask(path, cmd);
}
