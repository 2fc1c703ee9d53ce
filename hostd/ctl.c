/* ctl.c: tallyd's operator endpoints, on the daemon's libuv loop: the
 * control socket tallyctl talks to, and the HTTP responder for a
 * Prometheus scrape (--metrics-listen).
 *
 * Control socket: a UNIX socket (default: the tenants' socket path +
 * ".ctl"), created with --unix-mode/--unix-group like the tenants' one
 * before it listens; a peer whose SO_PEERCRED is neither root, tallyd's
 * own uid, nor in the socket's group is answered "permission denied".
 * Request: one line, "status" or "metrics"; answer: the text, then close.
 *
 * HTTP: HTTP/1.0 semantics whatever the request says (one request, then
 * close).  GET or HEAD of /metrics answers 200 with the exposition; another
 * path 404, another method 405, a request that is not HTTP 400.
 *
 * Hostile peers are bounded: a request is at most CTL_REQ_MAX bytes and
 * must arrive within CTL_DEADLINE_MS of connecting; at most CTL_CONNS
 * connections are served at once (more are closed at accept).  The answer
 * is built from a snapshot (server.c's view) on the loop thread, so a
 * scrape never waits on a tenant.
 */
#include "hostd/guard.h"
#include "hostd/hostd-int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#define CTL_REQ_MAX     4096
#define CTL_DEADLINE_MS 3000
#define CTL_CONNS       16

typedef struct conn conn_t;

struct hostd_ctl {
  uv_pipe_t pipe;
  uv_tcp_t tcp;
  bool has_pipe, has_tcp, closing, bound; /* bound: the socket file is ours */
  int handles; /* listeners and connections not yet closed */
  int conns;
  gid_t gid;   /* the control socket's group */
  char path[108];
  hostd_view_fn view;
  void *arg;
  conn_t *list;
};

struct conn {
  union {
    uv_stream_t s;
    uv_pipe_t p;
    uv_tcp_t t;
  } h;
  uv_timer_t timer;
  uv_write_t wr;
  hostd_ctl_t *c;
  bool http, answered;
  int open; /* handles of this connection not yet closed */
  size_t n;
  char *out;
  conn_t *prev, *next;
  char req[CTL_REQ_MAX + 1];
};

static void ctl_unref(hostd_ctl_t *c) {
  if (--c->handles == 0 && c->closing)
    free(c);
}

static void on_conn_closed(uv_handle_t *h) {
  conn_t *k = h->data;
  if (--k->open > 0)
    return;
  free(k->out);
  ctl_unref(k->c);
  free(k);
}

static void conn_close(conn_t *k) {
  hostd_ctl_t *c = k->c;
  if (uv_is_closing((uv_handle_t *)&k->h))
    return;
  if (k->prev)
    k->prev->next = k->next;
  else
    c->list = k->next;
  if (k->next)
    k->next->prev = k->prev;
  c->conns--;
  uv_close((uv_handle_t *)&k->h, on_conn_closed);
  uv_close((uv_handle_t *)&k->timer, on_conn_closed);
}

static void on_written(uv_write_t *w, int status) {
  (void)status;
  conn_close(w->data);
}

/* Sends out (owned) and closes after. */
static void answer(conn_t *k, char *out, size_t len) {
  uv_buf_t b = uv_buf_init(out, (unsigned)len);
  k->answered = true;
  k->out = out;
  k->wr.data = k;
  uv_read_stop(&k->h.s);
  if (!out || uv_write(&k->wr, &k->h.s, &b, 1, on_written) != 0)
    conn_close(k);
}

static char *view_text(hostd_ctl_t *c, bool metrics) {
  hostd_view_t v;
  char *t;
  if (c->view(c->arg, &v) != 0)
    return NULL;
  t = metrics ? hostd__view_metrics(&v) : hostd__view_status(&v);
  free(v.rows);
  return t;
}

/* One HTTP/1.0 answer; body NULL for none.  Returns malloc'd bytes. */
static char *http_reply(const char *status, const char *body, bool head, size_t *len) {
  char *out = NULL;
  size_t blen = body ? strlen(body) : 0;
  FILE *f = open_memstream(&out, len);
  if (!f)
    return NULL;
  fprintf(f, "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
          status, body && strncmp(status, "200", 3) == 0 ? "text/plain; version=0.0.4; charset=utf-8"
                                                          : "text/plain; charset=utf-8", blen);
  if (body && !head)
    fwrite(body, 1, blen, f);
  if (fclose(f) != 0) {
    free(out);
    return NULL;
  }
  return out;
}

/* The request line of k->req (complete up to its blank line). */
static void http_handle(conn_t *k) {
  char method[8] = "", path[256] = "", proto[16] = "", *body = NULL, *out;
  const char *status = "200 OK";
  size_t len = 0;
  bool head = false;
  if (sscanf(k->req, "%7s %255s %15s", method, path, proto) != 3 || strncmp(proto, "HTTP/", 5))
    status = "400 Bad Request";
  else if (strcmp(method, "GET") && !(head = strcmp(method, "HEAD") == 0))
    status = "405 Method Not Allowed";
  else if (strcmp(path, "/metrics") && strncmp(path, "/metrics?", 9))
    status = "404 Not Found";
  else if (!(body = view_text(k->c, true)))
    status = "503 Service Unavailable";
  out = http_reply(status, body ? body : status, head, &len);
  free(body);
  answer(k, out, len);
}

static void ctl_handle(conn_t *k) {
  char *t = NULL;
  k->req[strcspn(k->req, "\r\n")] = 0;
  if (strcmp(k->req, "status") == 0 || strcmp(k->req, "metrics") == 0)
    t = view_text(k->c, k->req[0] == 'm');
  else
    t = strdup("error: unknown request (expected status or metrics)\n");
  answer(k, t, t ? strlen(t) : 0);
}

static bool request_done(const conn_t *k) {
  if (!k->http)
    return memchr(k->req, '\n', k->n) != NULL;
  return strstr(k->req, "\r\n\r\n") || strstr(k->req, "\n\n");
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  conn_t *k = h->data;
  (void)hint;
  *b = uv_buf_init(k->req + k->n, (unsigned)(CTL_REQ_MAX - k->n));
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *b) {
  conn_t *k = st->data;
  (void)b;
  if (nread < 0) {
    conn_close(k);
    return;
  }
  k->n += (size_t)nread;
  k->req[k->n] = 0;
  if (memchr(k->req, 0, k->n)) {
    conn_close(k); /* NUL bytes: neither protocol has them */
  } else if (request_done(k)) {
    (k->http ? http_handle : ctl_handle)(k);
  } else if (k->n == CTL_REQ_MAX) {
    size_t len = 0;
    char *out = k->http ? http_reply("431 Request Header Fields Too Large", "request too large\n",
                                     false, &len)
                        : strdup("error: request too long\n");
    if (out && !k->http)
      len = strlen(out);
    answer(k, out, len);
  }
}

static void on_deadline(uv_timer_t *t) {
  conn_close(t->data);
}

/* Root, tallyd's own uid, or a member of the socket's group. */
static bool peer_allowed(hostd_ctl_t *c, int fd) {
  struct ucred cr;
  socklen_t crl = sizeof(cr);
  struct passwd pw, *res = NULL;
  char buf[4096];
  gid_t groups[256];
  int n = 256;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) != 0)
    return false;
  if (cr.uid == 0 || cr.uid == geteuid() || cr.gid == c->gid)
    return true;
  if (getpwuid_r(cr.uid, &pw, buf, sizeof(buf), &res) != 0 || !res ||
      getgrouplist(res->pw_name, res->pw_gid, groups, &n) < 0)
    return false;
  for (int i = 0; i < n; i++)
    if (groups[i] == c->gid)
      return true;
  return false;
}

static void on_accept(uv_stream_t *srv, int status) {
  hostd_ctl_t *c = srv->data;
  bool http = srv == (uv_stream_t *)&c->tcp;
  conn_t *k;
  int fd = -1;
  if (status < 0 || !(k = calloc(1, sizeof(*k))))
    return;
  k->c = c;
  k->http = http;
  if (http)
    uv_tcp_init(srv->loop, &k->h.t);
  else
    uv_pipe_init(srv->loop, &k->h.p, 0);
  uv_timer_init(srv->loop, &k->timer);
  k->h.s.data = k->timer.data = k;
  k->open = 2;
  c->handles++;
  c->conns++;
  k->next = c->list;
  if (c->list)
    c->list->prev = k;
  c->list = k;
  if (uv_accept(srv, &k->h.s) != 0 || c->conns > CTL_CONNS) {
    conn_close(k);
    return;
  }
  if (!http && (uv_fileno((uv_handle_t *)&k->h, &fd) != 0 || !peer_allowed(c, fd))) {
    char *t = strdup("error: permission denied (root or the control socket's group only)\n");
    answer(k, t, t ? strlen(t) : 0);
    return;
  }
  uv_timer_start(&k->timer, on_deadline, CTL_DEADLINE_MS, 0);
  if (uv_read_start(&k->h.s, on_alloc, on_read) != 0)
    conn_close(k);
}

/* A socket file nobody answers on is left by a daemon that died. */
static void remove_stale(const char *path) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  struct stat st;
  int fd;
  if (lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode) || strlen(path) >= sizeof(sa.sun_path))
    return;
  memcpy(sa.sun_path, path, strlen(path));
  if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
    return;
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno == ECONNREFUSED)
    unlink(path);
  close(fd);
}

static int listen_pipe(hostd_ctl_t *c, uv_loop_t *loop, const hostd_config_t *cfg) {
  int rc;
  struct group gr, *res = NULL;
  char buf[4096];
  c->gid = getegid();
  if (cfg->unix_group[0] && getgrnam_r(cfg->unix_group, &gr, buf, sizeof(buf), &res) == 0 && res)
    c->gid = res->gr_gid;
  else if (cfg->unix_group[0])
    c->gid = (gid_t)strtoul(cfg->unix_group, NULL, 10);
  remove_stale(c->path);
  uv_pipe_init(loop, &c->pipe, 0);
  c->pipe.data = c;
  c->has_pipe = true;
  c->handles++;
  rc = uv_pipe_bind(&c->pipe, c->path);
  c->bound = rc == 0;
  if (rc == 0 && (chmod(c->path, cfg->unix_mode & 0777) != 0 ||
                  (cfg->unix_group[0] && chown(c->path, (uid_t)-1, c->gid) != 0)))
    rc = -errno;
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&c->pipe, 16, on_accept);
  if (rc)
    hostd__log(HOSTD_LOG_ERROR, "--control-socket %s: %s", c->path, uv_strerror(rc));
  return rc;
}

/* "host:port" or "[v6]:port". */
static int listen_tcp(hostd_ctl_t *c, uv_loop_t *loop, const char *addr) {
  char host[256];
  const char *colon = strrchr(addr, ':');
  struct sockaddr_storage ss;
  int port, rc;
  size_t n = colon ? (size_t)(colon - addr) : 0;
  if (!colon || n >= sizeof(host) || (port = atoi(colon + 1)) < 0 || port > 65535)
    rc = UV_EINVAL;
  else {
    memcpy(host, addr, n);
    host[n] = 0;
    if (host[0] == '[' && n >= 2 && host[n - 1] == ']') {
      memmove(host, host + 1, n - 2);
      host[n - 2] = 0;
      rc = uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss);
    } else {
      rc = uv_ip4_addr(host, port, (struct sockaddr_in *)&ss);
    }
  }
  uv_tcp_init(loop, &c->tcp);
  c->tcp.data = c;
  c->has_tcp = true;
  c->handles++;
  if (rc == 0)
    rc = uv_tcp_bind(&c->tcp, (struct sockaddr *)&ss, 0);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&c->tcp, 64, on_accept);
  if (rc)
    hostd__log(HOSTD_LOG_ERROR, "--metrics-listen %s: %s", addr, uv_strerror(rc));
  else
    hostd__log(HOSTD_LOG_INFO, "metrics at http://%s:%d/metrics", host, hostd__ctl_http_port(c));
  return rc;
}

int hostd__ctl_new(hostd_ctl_t **out, uv_loop_t *loop, const hostd_config_t *cfg,
                   hostd_view_fn view, void *arg) {
  hostd_ctl_t *c = calloc(1, sizeof(*c));
  int rc = 0;
  *out = NULL;
  if (!c)
    return -ENOMEM;
  c->view = view;
  c->arg = arg;
  if (cfg->control_path[0])
    snprintf(c->path, sizeof(c->path), "%s", cfg->control_path);
  else if (cfg->unix_path[0] &&
           snprintf(c->path, sizeof(c->path), "%s%s", cfg->unix_path, HOSTD_CONTROL_SUFFIX) >=
               (int)sizeof(c->path))
    strcpy(c->path, "none"); /* too long for a socket: no default one */
  if (c->path[0] && strcmp(c->path, "none") != 0)
    rc = listen_pipe(c, loop, cfg);
  else
    c->path[0] = 0;
  if (rc == 0 && cfg->metrics_addr[0])
    rc = listen_tcp(c, loop, cfg->metrics_addr);
  if (rc) {
    hostd__ctl_close(c);
    return rc;
  }
  *out = c;
  return 0;
}

int hostd__ctl_http_port(const hostd_ctl_t *c) {
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  if (!c || !c->has_tcp || uv_tcp_getsockname(&c->tcp, (struct sockaddr *)&ss, &len) != 0)
    return 0;
  return ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                  : ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void on_listener_closed(uv_handle_t *h) {
  ctl_unref(h->data);
}

void hostd__ctl_close(hostd_ctl_t *c) {
  if (!c)
    return;
  c->closing = true;
  c->handles++; /* held while closing */
  while (c->list)
    conn_close(c->list);
  if (c->has_pipe) {
    uv_close((uv_handle_t *)&c->pipe, on_listener_closed);
    if (c->bound)
      unlink(c->path);
  }
  if (c->has_tcp)
    uv_close((uv_handle_t *)&c->tcp, on_listener_closed);
  ctl_unref(c);
}
