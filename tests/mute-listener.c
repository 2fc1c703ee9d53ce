/* mute-listener.c: a UNIX socket that never answers, for the connect tests.
 *
 * usage: mute-listener PATH full|silent
 *   full    listen with a backlog of 0 and fill it with one connection of
 *           our own, so a further connect finds the backlog full (a daemon
 *           that stopped accepting)
 *   silent  accept connections and never write a byte (a daemon that takes
 *           the HELLO and never answers)
 * Prints "ready" once listening; exits when stdin closes.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <poll.h>

int main(int argc, char **argv) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int l, c = -1, full;
  char b[256];
  if (argc != 3 || strlen(argv[1]) >= sizeof(sa.sun_path)) {
    fprintf(stderr, "usage: mute-listener PATH full|silent\n");
    return 2;
  }
  full = strcmp(argv[2], "full") == 0;
  strcpy(sa.sun_path, argv[1]);
  unlink(argv[1]);
  l = socket(AF_UNIX, SOCK_STREAM, 0);
  if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, full ? 0 : 16)) {
    perror("mute-listener");
    return 1;
  }
  if (full) {
    c = socket(AF_UNIX, SOCK_STREAM, 0);
    if (c < 0 || connect(c, (struct sockaddr *)&sa, sizeof(sa))) {
      perror("mute-listener: filling the backlog");
      return 1;
    }
  }
  printf("ready\n");
  fflush(stdout);
  for (;;) {
    struct pollfd p[2] = {{.fd = 0, .events = POLLIN}, {.fd = l, .events = full ? 0 : POLLIN}};
    if (poll(p, 2, -1) < 0)
      break;
    if (p[0].revents && read(0, b, sizeof(b)) <= 0)
      break;
    if (p[1].revents & POLLIN) {
      int a = accept(l, NULL, NULL);
      (void)a; /* kept open, never read nor written */
    }
  }
  unlink(argv[1]);
  return 0;
}
