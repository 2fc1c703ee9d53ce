/* log.c: tallyd's log, one line per event on stderr.
 *
 * The level says whose fault it is: a tenant's bad input logs at info, our
 * own broken invariant at error.  Lines carry a UTC timestamp and the
 * level; they are written with one fprintf so lines of different tenant
 * threads do not interleave (stdio locks the stream per call).
 *
 * Peers choose some of the bytes we log (tenant names, tokens' absence,
 * wire's reasons with samples of bad input).  Invariant: one call writes
 * exactly one line, and no byte below 0x20, 0x7f or above reaches the
 * stream raw: every such byte of the formatted message becomes \xHH, so a
 * name with a newline cannot forge a line and escape bytes cannot drive an
 * operator's terminal.  Strings quoted in a message go through
 * hostd__escape first, which also escapes backslash and quote, so a quoted
 * field is unambiguous.
 *
 * Refusals before a handshake come in floods; hostd__log_refusal writes
 * one line per peer key per HOSTD_REFUSAL_LOG_S seconds and counts the
 * rest into the next line (a fixed table, least recently seen key
 * replaced), so an attacker cannot fill the disk through the log.
 */
#include "hostd/guard.h"
#include "hostd/hostd-int.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

hostd_log_level_t hostd__log_level = HOSTD_LOG_INFO;

char *hostd__escape(char *out, size_t cap, const char *s) {
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  if (cap == 0)
    return out;
  for (; s && *s && o + 1 < cap; s++) {
    unsigned char c = (unsigned char)*s;
    char e = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : c == '\\' ? '\\'
             : c == '"' ? '"' : 0;
    if (e || c < 0x20 || c >= 0x7f) {
      size_t need = e ? 2 : 4;
      if (o + need + 1 > cap)
        break;
      out[o++] = '\\';
      if (e) {
        out[o++] = e;
      } else {
        out[o++] = 'x';
        out[o++] = hex[c >> 4];
        out[o++] = hex[c & 15];
      }
    } else {
      out[o++] = (char)c;
    }
  }
  out[o] = 0;
  return out;
}

/* In place into out: control and high bytes of msg as \xHH. */
static void sanitize(char *out, size_t cap, const char *msg) {
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  for (; *msg && o + 1 < cap; msg++) {
    unsigned char c = (unsigned char)*msg;
    if (c >= 0x20 && c < 0x7f) {
      out[o++] = (char)c;
      continue;
    }
    if (o + 5 > cap)
      break;
    out[o++] = '\\';
    out[o++] = 'x';
    out[o++] = hex[c >> 4];
    out[o++] = hex[c & 15];
  }
  out[o] = 0;
}

void hostd__log(hostd_log_level_t level, const char *fmt, ...) {
  static const char *const names[] = {"error", "warn", "info", "debug"};
  char msg[1024], clean[2048], stamp[32];
  struct timespec ts;
  struct tm tm;
  va_list ap;

  if (level > hostd__log_level)
    return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  sanitize(clean, sizeof(clean), msg);
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
  fprintf(stderr, "%s.%03ldZ tallyd %s: %s\n", stamp, ts.tv_nsec / 1000000, names[level], clean);
}

/* ---- refusals, rate-limited per peer key ---- */
#define REFUSAL_KEYS 64

static struct refusal_key {
  char key[48];
  time_t last;          /* last line written (monotonic seconds) */
  unsigned long quiet;  /* refusals since, not written */
} keys[REFUSAL_KEYS];
static pthread_mutex_t keys_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long refusals;

unsigned long hostd__refusals(void) {
  return __atomic_load_n(&refusals, __ATOMIC_RELAXED);
}

/* The slot of key (lock held): its own, else the one seen least recently. */
static struct refusal_key *key_slot(const char *key) {
  struct refusal_key *old = &keys[0];
  for (int i = 0; i < REFUSAL_KEYS; i++) {
    if (strcmp(keys[i].key, key) == 0 && keys[i].last)
      return &keys[i];
    if (keys[i].last < old->last)
      old = &keys[i];
  }
  memset(old, 0, sizeof(*old));
  snprintf(old->key, sizeof(old->key), "%s", key);
  return old;
}

bool hostd__log_refusal(const char *key, const char *peer, long uid, const char *what,
                        const char *why) {
  char p[160], w[512], uidbuf[24], more[80] = "";
  struct timespec ts;
  struct refusal_key *k;
  unsigned long quiet;

  __atomic_fetch_add(&refusals, 1, __ATOMIC_RELAXED);
  clock_gettime(CLOCK_MONOTONIC, &ts);
  pthread_mutex_lock(&keys_mu);
  k = key_slot(key && key[0] ? key : peer ? peer : "?");
  if (k->last && ts.tv_sec - k->last < HOSTD_REFUSAL_LOG_S) {
    k->quiet++;
    pthread_mutex_unlock(&keys_mu);
    return false;
  }
  quiet = k->quiet;
  k->quiet = 0;
  k->last = ts.tv_sec ? ts.tv_sec : 1;
  pthread_mutex_unlock(&keys_mu);
  snprintf(uidbuf, sizeof(uidbuf), "%ld", uid);
  if (quiet)
    snprintf(more, sizeof(more), " (and %lu more from this peer not logged)", quiet);
  hostd__log(HOSTD_LOG_INFO, "refused peer \"%s\" uid %s: %s: %s%s",
             hostd__escape(p, sizeof(p), peer ? peer : "?"), uid < 0 ? "-" : uidbuf, what,
             hostd__escape(w, sizeof(w), why ? why : ""), more);
  return true;
}
