/* log.c: tallyd's log, one line per event on stderr.
 *
 * The level says whose fault it is (STYLE.md): a tenant's bad input logs at
 * info, our own broken invariant at error.  Lines carry a UTC timestamp and
 * the level; they are written with one fprintf so lines of different tenant
 * threads do not interleave (stdio locks the stream per call).
 */
#include "hostd/hostd-int.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

hostd_log_level_t hostd__log_level = HOSTD_LOG_INFO;

void hostd__log(hostd_log_level_t level, const char *fmt, ...) {
  static const char *const names[] = {"error", "warn", "info", "debug"};
  char msg[1024], stamp[32];
  struct timespec ts;
  struct tm tm;
  va_list ap;

  if (level > hostd__log_level)
    return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
  fprintf(stderr, "%s.%03ldZ tallyd %s: %s\n", stamp, ts.tv_nsec / 1000000, names[level], msg);
}
