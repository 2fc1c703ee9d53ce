/* chan.c: the guest's one ordered channel to tallyd, over wire/.
 *
 * wire_conn carries everything: shared memory set up over the UNIX socket
 * for local tenants (the bulk of a copy goes through the shared data
 * region), TCP for remote ones, heartbeats, the handshake (name, priority
 * class, token) and content-id blob transfer.  This file only frames our
 * call protocol (guestlib/call.h) inside wire's opaque payloads:
 * fire-and-forget requests are wire posts (batched by wire and sent before
 * the next call), synchronous ones wire calls.  wire_conn is thread-safe, so
 * no lock is held here across a round trip.  A broken channel is final:
 * guest__g.lost is set, one line is logged, and every later call fails with
 * a CUresult from guest__cu_error (the daemon has freed what we owned).
 */
#include "guestlib/guest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "wire/wire.h"

/* The connection; written once by guest__chan_open before guest__g.inited,
 * read by every call after (wire_conn is thread-safe). */
static wire_conn_t *conn;

int guest__chan_open(const char *url, const char *name, int latency_critical, const char *token,
                     char *err, size_t errlen) {
  wire_hello_t hello;
  memset(&hello, 0, sizeof(hello));
  hello.tenant = name;
  hello.prio = latency_critical ? WIRE_PRIO_LATENCY_CRITICAL : WIRE_PRIO_BEST_EFFORT;
  hello.token = token;
  hello.caps = WIRE_CAP_ZSTD;
  return wire_conn_open(&conn, url, &hello, NULL, err, errlen);
}

void guest__chan_close(void) {
  wire_conn_close(conn);
  conn = NULL;
}

static int channel_lost(int status) {
  if (!__atomic_exchange_n(&guest__g.lost, true, __ATOMIC_ACQ_REL))
    guest__log("lost the channel to tallyd at %s (%s); CUDA calls fail from now on", guest__g.addr,
               wire_strerror(status));
  return status;
}

static void put_hdr(uint8_t *h, uint32_t op, uint32_t flags, uint32_t len) {
  uint32_t zero = 0;
  memcpy(h, &op, 4);
  memcpy(h + 4, &flags, 4);
  memcpy(h + 8, &len, 4);
  memcpy(h + 12, &zero, 4);
}

static int fill_iov(struct iovec *iov, uint8_t *hdr, const void *args, size_t len, const void *bulk,
                    size_t bulk_len) {
  int n = 0;
  iov[n].iov_base = hdr;
  iov[n++].iov_len = GUEST_CALL_HDR_LEN;
  if (len) {
    iov[n].iov_base = (void *)args;
    iov[n++].iov_len = len;
  }
  if (bulk_len) {
    iov[n].iov_base = (void *)bulk;
    iov[n++].iov_len = bulk_len;
  }
  return n;
}

int guest__post(uint32_t op, const void *args, size_t len, const void *bulk, size_t bulk_len) {
  uint8_t hdr[GUEST_CALL_HDR_LEN];
  struct iovec iov[3];
  int n, rc;

  if (len + bulk_len > GUEST_CALL_MAX_LEN)
    return -EMSGSIZE;
  if (!conn || guest__g.lost)
    return -ENOTCONN;
  put_hdr(hdr, op, GUEST_CALL_ASYNC, (uint32_t)(len + bulk_len));
  n = fill_iov(iov, hdr, args, len, bulk, bulk_len);
  rc = wire_conn_post(conn, iov, n);
  return rc ? channel_lost(rc) : 0;
}

int guest__call(uint32_t op, uint32_t flags, const void *args, size_t len, const void *bulk,
                size_t bulk_len, CUresult *rc_out, void *out, size_t out_cap, size_t *out_len,
                void **out_alloc) {
  uint8_t hdr[GUEST_CALL_HDR_LEN], rep[GUEST_REPLY_HDR_LEN];
  struct iovec iov[3], riov[2];
  size_t got = 0;
  uint32_t res, rlen;
  void *abuf = NULL;
  int n, rc;

  if (len + bulk_len > GUEST_CALL_MAX_LEN)
    return -EMSGSIZE;
  if (!conn || guest__g.lost)
    return -ENOTCONN;
  put_hdr(hdr, op, flags & ~GUEST_CALL_ASYNC, (uint32_t)(len + bulk_len));
  n = fill_iov(iov, hdr, args, len, bulk, bulk_len);
  if (out_alloc) {
    rc = wire_conn_call_alloc(conn, iov, n, &abuf, &got);
    if (rc == 0 && got >= GUEST_REPLY_HDR_LEN)
      memcpy(rep, abuf, GUEST_REPLY_HDR_LEN);
  } else {
    riov[0].iov_base = rep;
    riov[0].iov_len = sizeof(rep);
    riov[1].iov_base = out;
    riov[1].iov_len = out_cap;
    rc = wire_conn_call(conn, iov, n, riov, out_cap ? 2 : 1, &got);
  }
  if (rc == -EMSGSIZE) /* the daemon answered more than the call allows */
    rc = -EPROTO;
  if (rc == 0 && got < GUEST_REPLY_HDR_LEN)
    rc = -EPROTO;
  if (rc == 0) {
    memcpy(&res, rep, 4);
    memcpy(&rlen, rep + 4, 4);
    if (rlen != got - GUEST_REPLY_HDR_LEN)
      rc = -EPROTO;
  }
  if (rc) {
    free(abuf);
    return channel_lost(rc);
  }
  if (out_alloc) {
    /* Results follow the reply header: move them to the buffer's start. */
    memmove(abuf, (uint8_t *)abuf + GUEST_REPLY_HDR_LEN, rlen);
    *out_alloc = abuf;
  }
  if (out_len)
    *out_len = rlen;
  *rc_out = (CUresult)res;
  return 0;
}

CUresult guest__rpc(uint32_t op, uint32_t flags, const void *args, size_t len, void *out,
                    size_t out_cap) {
  CUresult res = CUDA_SUCCESS;
  size_t got = 0;
  int rc = guest__call(op, flags, args, len, NULL, 0, &res, out, out_cap, &got, NULL);
  if (rc)
    return guest__cu_error(rc);
  if (res == CUDA_SUCCESS && got != out_cap)
    return guest__cu_error(-EPROTO);
  if (res != CUDA_SUCCESS && guest__debug())
    guest__log("request op %u answered %d", op, (int)res); /* op numbers: guestlib/call.h */
  return res;
}

int guest__blob_offer(const void *data, size_t len, uint64_t *id) {
  int rc;
  if (!conn || guest__g.lost)
    return -ENOTCONN;
  rc = wire_conn_blob_offer(conn, data, len, id);
  return rc ? channel_lost(rc) : 0;
}
