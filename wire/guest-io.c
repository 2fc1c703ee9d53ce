/* guest-io.c: blocking socket helpers the guest transports share.
 *
 * The guest side has no event loop: it writes with sendmsg until every byte
 * is out (MSG_NOSIGNAL, so a dead daemon is an error code, not a SIGPIPE that
 * kills the tenant), waits with poll and a timeout, and reads the daemon's
 * handshake answer (WELCOME or REFUSE, plus SCM_RIGHTS descriptors over UNIX
 * sockets) as one bounded frame: its length is checked against
 * WIRE__HELLO_MAX before anything is read into memory.
 */
#include "wire/wire-int.h"

#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int wire__wait_fd(int fd, short events, int timeout_ms) {
  struct pollfd pfd = {.fd = fd, .events = events};
  int r;

  do
    r = poll(&pfd, 1, timeout_ms);
  while (r < 0 && errno == EINTR);
  if (r < 0)
    return -errno;
  if (r == 0)
    return -ETIMEDOUT;
  if ((pfd.revents & (POLLERR | POLLNVAL)) && !(pfd.revents & events))
    return -ECONNRESET;
  return 0;
}

int wire__write_all(int fd, const struct iovec *iov, int cnt, wire__gtp *t) {
  struct iovec v[64]; /* callers pass header + at most 63 slices */
  int n = cnt < (int)(sizeof(v) / sizeof(v[0])) ? cnt : (int)(sizeof(v) / sizeof(v[0]));
  int i = 0;

  if (cnt > n)
    return -E2BIG; /* callers pass at most 64 entries */
  memcpy(v, iov, sizeof(v[0]) * (size_t)n);
  while (i < n) {
    struct msghdr mh = {.msg_iov = v + i, .msg_iovlen = (size_t)(n - i)};
    ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        /* Socket full: wait in slices so a dead connection is noticed. */
        int rc = wire__wait_fd(fd, POLLOUT, 100);
        if (rc && rc != -ETIMEDOUT)
          return rc;
        if (rc == -ETIMEDOUT && t && t->check && (rc = t->check(t->check_ctx)) != 0)
          return rc;
        continue;
      }
      return errno == EPIPE ? WIRE_ECLOSED : -errno;
    }
    /* Skip what went out; at this point w bytes of v[i..] are sent. */
    while (i < n && (size_t)w >= v[i].iov_len) {
      w -= (ssize_t)v[i].iov_len;
      i++;
    }
    if (i < n) {
      v[i].iov_base = (uint8_t *)v[i].iov_base + w;
      v[i].iov_len -= (size_t)w;
    }
  }
  return 0;
}

/* Reads exactly n bytes (collecting SCM_RIGHTS fds on the way). */
static int read_exact(int fd, uint8_t *p, size_t n, uint64_t deadline_ns, int *fds, int nfds,
                      int *got_fds) {
  while (n > 0) {
    union {
      struct cmsghdr h;
      char b[CMSG_SPACE(sizeof(int) * 4)];
    } cb;
    struct iovec v = {p, n};
    struct msghdr mh = {.msg_iov = &v, .msg_iovlen = 1};
    uint64_t now = wire__now_ns();
    ssize_t r;
    int rc;

    if (now >= deadline_ns)
      return -ETIMEDOUT;
    rc = wire__wait_fd(fd, POLLIN, (int)((deadline_ns - now) / 1000000u) + 1);
    if (rc)
      return rc;
    if (fds) {
      mh.msg_control = cb.b;
      mh.msg_controllen = sizeof(cb.b);
    }
    r = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN)
        continue;
      return -errno;
    }
    if (r == 0)
      return WIRE_ECLOSED;
    if (fds) {
      struct cmsghdr *cm;
      for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
          int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int)), j;
          for (j = 0; j < k; j++) {
            int f;
            memcpy(&f, CMSG_DATA(cm) + j * sizeof(int), sizeof(int));
            if (*got_fds < nfds)
              fds[(*got_fds)++] = f;
            else
              close(f);
          }
        }
      }
    }
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

int wire__handshake_read(int fd, uint32_t timeout_ms, wire__welcome *w, int *fds, int nfds,
                         int *got_fds, char *why, size_t why_len) {
  uint8_t hb[WIRE__HDR_LEN], body[WIRE__HELLO_MAX];
  uint64_t deadline = wire__now_ns() + (uint64_t)timeout_ms * 1000000u;
  wire__hdr h;
  int32_t st;
  int rc;

  *got_fds = 0;
  rc = read_exact(fd, hb, sizeof(hb), deadline, fds, nfds, got_fds);
  if (rc == 0)
    rc = wire__hdr_decode(hb, 0, &h, why, why_len);
  if (rc)
    goto fail;
  if (h.len > WIRE__HELLO_MAX || (h.kind != WIRE__K_WELCOME && h.kind != WIRE__K_REFUSE)) {
    snprintf(why, why_len, "daemon answered the HELLO with kind %u, %u bytes", h.kind, h.len);
    rc = -EPROTO;
    goto fail;
  }
  rc = read_exact(fd, body, h.len, deadline, fds, nfds, got_fds);
  if (rc)
    goto fail;
  if (h.kind == WIRE__K_REFUSE) {
    if (wire__status_decode(body, h.len, &st, why, why_len) == 0)
      rc = st < 0 ? st : WIRE_EREFUSED;
    else
      rc = -EPROTO;
    goto fail;
  }
  rc = wire__welcome_decode(body, h.len, w, why, why_len);
  if (rc == 0)
    return 0;
fail:
  if (rc == -ETIMEDOUT && why[0] == 0)
    snprintf(why, why_len, "no answer to HELLO within %u ms", timeout_ms);
  if (rc == WIRE_ECLOSED && why[0] == 0)
    snprintf(why, why_len, "daemon closed the connection during the handshake");
  while (*got_fds > 0)
    close(fds[--*got_fds]);
  return rc;
}

typedef struct copy_job {
  uint8_t *dst;       /* iov -> dst, or */
  const uint8_t *src; /* src -> iov */
  const struct iovec *iov;
  int cnt;
  size_t off, n;
} copy_job;

static void copy_slice(void *arg, size_t i) {
  copy_job *j = arg;
  size_t o = i * WIRE__PAR_COPY_SLICE;
  size_t k = j->n - o < WIRE__PAR_COPY_SLICE ? j->n - o : WIRE__PAR_COPY_SLICE;

  if (j->dst != NULL)
    wire__iov_copy_out(j->dst + o, j->iov, j->cnt, j->off + o, k);
  else
    wire__iov_copy_in(j->iov, j->cnt, j->off + o, j->src + o, k);
}

void wire__par_iov_copy(const wire__gtp *t, uint8_t *dst, const uint8_t *src,
                        const struct iovec *iov, int cnt, size_t off, size_t n) {
  copy_job j = {dst, src, iov, cnt, off, n};
  wire__par job = {
      .fn = copy_slice, .arg = &j, .n = (n + WIRE__PAR_COPY_SLICE - 1) / WIRE__PAR_COPY_SLICE};

  if (n < WIRE__PAR_COPY_MIN || t->par == NULL) {
    if (dst != NULL)
      wire__iov_copy_out(dst, iov, cnt, off, n);
    else
      wire__iov_copy_in(iov, cnt, off, src, n);
    return;
  }
  atomic_init(&job.next, 0);
  t->par(t->par_ctx, &job);
}
