/* test-hostd-config.c: tallyd's flags and config file parse, and bad ones
 * are refused with a reason that names the flag or FILE:LINE. */
#include "hostd/hostd-int.h"
#include "hostd/hostd.h"

#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static cpu_set_t cpus(int lo, int hi) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c = lo; c <= hi; c++)
    CPU_SET(c, &set);
  return set;
}

/* --lc-poll-cpu auto: distinct CPUs from the top of the mask, GPU k starting k lower,
 * never more than a quarter of the allowed CPUs, nothing with fewer than 4. */
static void pin_pick_counts_down_and_stops_at_a_quarter(void **state) {
  cpu_set_t all = cpus(0, 15), none = cpus(1, 0), taken = cpus(1, 0), odd = cpus(1, 0);
  (void)state;
  assert_int_equal(hostd__pin_pick(&all, &none, NULL, 0), 15);
  assert_int_equal(hostd__pin_pick(&all, &none, NULL, 1), 14); /* tallyd of GPU 1 */
  assert_int_equal(hostd__pin_pick(&all, &none, NULL, 17), 14); /* more GPUs than CPUs: wraps */
  for (int want = 15; want >= 12; want--) { /* a quarter of 16: four workers */
    int c = hostd__pin_pick(&all, &taken, NULL, 0);
    assert_int_equal(c, want);
    CPU_SET(c, &taken);
  }
  assert_int_equal(hostd__pin_pick(&all, &taken, NULL, 0), -1);
  CPU_CLR(14, &taken); /* a worker left: its CPU is given again */
  assert_int_equal(hostd__pin_pick(&all, &taken, NULL, 0), 14);
  taken = cpus(1, 0);
  CPU_SET(10, &taken); /* below the start taken: the next free one below */
  assert_int_equal(hostd__pin_pick(&all, &taken, NULL, 5), 9);
  /* only CPUs in the mask, counted in the mask's order */
  for (int c = 1; c < 16; c += 2)
    CPU_SET(c, &odd);
  assert_int_equal(hostd__pin_pick(&odd, &none, NULL, 0), 15);
  assert_int_equal(hostd__pin_pick(&odd, &none, NULL, 2), 11);
  all = cpus(0, 2); /* three CPUs: never */
  assert_int_equal(hostd__pin_pick(&all, &none, NULL, 0), -1);
  all = cpus(0, 3); /* four: one */
  assert_int_equal(hostd__pin_pick(&all, &none, NULL, 3), 0);
  CPU_SET(0, &taken);
  assert_int_equal(hostd__pin_pick(&all, &taken, NULL, 0), -1);
}

/* Two hardware threads per core (0-1, 2-3, ...): a second worker goes to another core while
 * one is free (above the start too), and to a sibling only when every core has a worker. */
static void pin_pick_prefers_a_core_of_its_own(void **state) {
  cpu_set_t all = cpus(0, 31), taken = cpus(1, 0);
  int16_t core_of[CPU_SETSIZE];
  (void)state;
  for (int c = 0; c < CPU_SETSIZE; c++)
    core_of[c] = (int16_t)(c & ~1);
  assert_int_equal(hostd__pin_pick(&all, &taken, core_of, 0), 31);
  CPU_SET(31, &taken);
  assert_int_equal(hostd__pin_pick(&all, &taken, core_of, 0), 29); /* not 30, 31's sibling */
  CPU_SET(29, &taken);
  assert_int_equal(hostd__pin_pick(&all, &taken, core_of, 0), 27);
  all = cpus(0, 7);
  taken = cpus(1, 0);
  CPU_SET(6, &taken);
  assert_int_equal(hostd__pin_pick(&all, &taken, core_of, 0), 5); /* not 7, 6's sibling */
  CPU_SET(5, &taken);
  assert_int_equal(hostd__pin_pick(&all, &taken, core_of, 0), -1); /* a quarter of 8 is 2 */
  /* GPU 12's tallyd starts at CPU 3: cores 2 and 0 taken there, a free core above it wins
   * over a sibling at the start */
  all = cpus(0, 15);
  taken = cpus(1, 0);
  CPU_SET(3, &taken);
  CPU_SET(1, &taken);
  assert_int_equal(hostd__pin_pick(&all, &taken, core_of, 12), 15);
  all = cpus(0, 15); /* cores 0, 4, 8, 12 taken on their odd CPUs: the quarter is given */
  taken = cpus(1, 0);
  for (int c = 0; c < 16; c += 4)
    CPU_SET(c + 1, &taken);
  assert_int_equal(hostd__pin_pick(&all, &taken, core_of, 0), -1);
  CPU_CLR(13, &taken);
  assert_int_equal(hostd__pin_pick(&all, &taken, core_of, 0), 15); /* core 14 has none now */
  /* eight threads a core, both cores with a worker: a sibling, from the start down */
  for (int c = 0; c < CPU_SETSIZE; c++)
    core_of[c] = (int16_t)(c & ~7);
  taken = cpus(1, 0);
  CPU_SET(15, &taken);
  assert_int_equal(hostd__pin_pick(&all, &taken, core_of, 0), 7); /* the other core first */
  CPU_SET(7, &taken);
  assert_int_equal(hostd__pin_pick(&all, &taken, core_of, 0), 14);
  assert_int_equal(hostd__pin_pick(&all, &taken, core_of, 2), 13);
  /* the sysfs reading names every allowed CPU's core, itself where it cannot tell */
  hostd__pin_cores(&all, core_of);
  for (int c = 0; c < 16; c++)
    assert_true(core_of[c] >= 0 && core_of[c] <= c);
  assert_int_equal(core_of[100], 100); /* not allowed: itself */
}

static void config_parses_every_flag(void **state) {
  (void)state;
  hostd_config_t c;
  char *argv[] = {"tallyd",
                  "--listen-unix",
                  "/tmp/t.sock",
                  "--listen-tcp",
                  "0.0.0.0:7000",
                  "--gpus",
                  "1",
                  "--state-dir",
                  "/tmp/st",
                  "--log-level",
                  "debug",
                  "--spin-us",
                  "30",
                  NULL};
  hostd_config_init(&c);
  assert_int_equal(hostd_config_parse_args(&c, 13, argv, stderr), 0);
  assert_int_equal(c.spin_us, 30);
  assert_string_equal(c.unix_path, "/tmp/t.sock");
  assert_string_equal(c.tcp_addr, "0.0.0.0:7000");
  assert_string_equal(c.gpus, "1");
  assert_string_equal(c.state_dir, "/tmp/st");
  assert_int_equal(c.log_level, HOSTD_LOG_DEBUG);
}

static void worker_spin_defaults_to_auto_and_is_bounded(void **state) {
  hostd_config_t c;
  char *ok[] = {"tallyd", "--worker-spin-us", "0", NULL};
  char *neg[] = {"tallyd", "--worker-spin-us", "-1", NULL};
  char *huge[] = {"tallyd", "--worker-spin-us", "10001", NULL};
  char *junk[] = {"tallyd", "--worker-spin-us", "5x", NULL};
  FILE *devnull = fopen("/dev/null", "w");
  (void)state;
  assert_non_null(devnull);
  hostd_config_init(&c);
  assert_int_equal(c.worker_spin_us, -1); /* auto: server.c decides by CPUs online */
  assert_int_equal(hostd_config_parse_args(&c, 3, ok, devnull), 0);
  assert_int_equal(c.worker_spin_us, 0);
  assert_int_equal(hostd_config_parse_args(&c, 3, neg, devnull), -EINVAL);
  assert_int_equal(hostd_config_parse_args(&c, 3, huge, devnull), -EINVAL);
  assert_int_equal(hostd_config_parse_args(&c, 3, junk, devnull), -EINVAL);
  assert_int_equal(c.worker_spin_us, 0);
  fclose(devnull);
}

static void hostfn_wake_defaults_to_off_and_is_bounded(void **state) {
  hostd_config_t c;
  char *ok[] = {"tallyd", "--hostfn-wake-us", "300", NULL};
  char *off[] = {"tallyd", "--hostfn-wake-us", "0", NULL};
  char *huge[] = {"tallyd", "--hostfn-wake-us", "10001", NULL};
  char *neg[] = {"tallyd", "--hostfn-wake-us", "-5", NULL};
  FILE *devnull = fopen("/dev/null", "w");
  (void)state;
  assert_non_null(devnull);
  hostd_config_init(&c);
  assert_int_equal(c.hostfn_wake_us, 0); /* off unless asked */
  assert_int_equal(hostd_config_parse_args(&c, 3, ok, devnull), 0);
  assert_int_equal(c.hostfn_wake_us, 300);
  assert_int_equal(hostd_config_parse_args(&c, 3, off, devnull), 0);
  assert_int_equal(c.hostfn_wake_us, 0);
  assert_int_equal(hostd_config_parse_args(&c, 3, huge, devnull), -EINVAL);
  assert_int_equal(hostd_config_parse_args(&c, 3, neg, devnull), -EINVAL);
  assert_int_equal(c.hostfn_wake_us, 0);
  fclose(devnull);
}

static void lc_poll_options_parse_and_are_bounded(void **state) {
  hostd_config_t c;
  char *yes[] = {"tallyd", "--lc-poll", "yes", "--lc-poll-cpu", "3", "--hops", "/tmp/h", NULL};
  char *no[] = {"tallyd", "--lc-poll", "no", "--lc-poll-cpu", "none", NULL};
  char *autom[] = {"tallyd", "--lc-poll", "auto", NULL};
  char *bad[] = {"tallyd", "--lc-poll", "always", NULL};
  char *cpu_neg[] = {"tallyd", "--lc-poll-cpu", "-1", NULL};
  char *cpu_junk[] = {"tallyd", "--lc-poll-cpu", "2x", NULL};
  char *cpu_auto[] = {"tallyd", "--lc-poll-cpu", "auto", NULL};
  char *cpu_big[] = {"tallyd", "--lc-poll-cpu", "1024", NULL};
  char *direct_no[] = {"tallyd", "--lc-direct", "no", NULL};
  char *direct_bad[] = {"tallyd", "--lc-direct", "maybe", NULL};
  char *direct_shm[] = {"tallyd", "--lc-direct", "shm", NULL};
  char path[] = "/tmp/tally-lc-poll-XXXXXX";
  FILE *devnull = fopen("/dev/null", "w"), *f;
  int fd = mkstemp(path);
  (void)state;
  assert_non_null(devnull);
  assert_true(fd >= 0);
  hostd_config_init(&c);
  assert_int_equal(c.lc_poll, -1); /* auto: server.c decides by CPUs online */
  assert_int_equal(c.lc_poll_cpu, HOSTD_CPU_AUTO); /* a CPU of its own (pin.c) */
  assert_int_equal(c.lc_direct, 1); /* the worker reads its ring (docs/decisions.md, D20) */
  assert_string_equal(c.hops, "");
  assert_int_equal(hostd_config_parse_args(&c, 7, yes, devnull), 0);
  assert_int_equal(c.lc_poll, 1);
  assert_int_equal(c.lc_poll_cpu, 3);
  assert_string_equal(c.hops, "/tmp/h");
  assert_int_equal(hostd_config_parse_args(&c, 5, no, devnull), 0);
  assert_int_equal(c.lc_poll, 0);
  assert_int_equal(c.lc_poll_cpu, -1);
  assert_int_equal(hostd_config_parse_args(&c, 3, autom, devnull), 0);
  assert_int_equal(c.lc_poll, -1);
  assert_int_equal(hostd_config_parse_args(&c, 3, bad, devnull), -EINVAL);
  assert_int_equal(hostd_config_parse_args(&c, 3, cpu_neg, devnull), -EINVAL);
  assert_int_equal(hostd_config_parse_args(&c, 3, cpu_junk, devnull), -EINVAL);
  assert_int_equal(hostd_config_parse_args(&c, 3, cpu_big, devnull), -EINVAL);
  assert_int_equal(hostd_config_parse_args(&c, 3, cpu_auto, devnull), 0);
  assert_int_equal(c.lc_poll_cpu, HOSTD_CPU_AUTO);
  assert_int_equal(hostd_config_parse_args(&c, 3, direct_no, devnull), 0);
  assert_int_equal(c.lc_direct, 0);
  assert_int_equal(hostd_config_parse_args(&c, 3, direct_bad, devnull), -EINVAL);
  assert_int_equal(hostd_config_parse_args(&c, 3, direct_shm, devnull), 0);
  assert_int_equal(c.lc_direct, HOSTD_LC_DIRECT_SHM);
  /* the same keys in a config file */
  f = fdopen(fd, "w");
  assert_non_null(f);
  fputs("lc-poll = yes\nlc-poll-cpu = 7\nlc-direct = no\n", f);
  fclose(f);
  hostd_config_init(&c);
  assert_int_equal(hostd_config_load_file(&c, path, devnull), 0);
  assert_int_equal(c.lc_poll, 1);
  assert_int_equal(c.lc_poll_cpu, 7);
  assert_int_equal(c.lc_direct, 0);
  unlink(path);
  fclose(devnull);
}

static void config_rejects_unknown_flag_and_missing_value(void **state) {
  (void)state;
  hostd_config_t c;
  char *bad[] = {"tallyd", "--frobnicate", "1", NULL};
  char *missing[] = {"tallyd", "--gpus", NULL};
  char *level[] = {"tallyd", "--log-level", "loud", NULL};
  char *spin[] = {"tallyd", "--spin-us", "-3", NULL};
  FILE *devnull = fopen("/dev/null", "w");
  hostd_config_init(&c);
  assert_int_equal(hostd_config_parse_args(&c, 3, bad, devnull), -EINVAL);
  assert_int_equal(hostd_config_parse_args(&c, 2, missing, devnull), -EINVAL);
  assert_int_equal(hostd_config_parse_args(&c, 3, level, devnull), -EINVAL);
  assert_int_equal(hostd_config_parse_args(&c, 3, spin, devnull), -EINVAL);
  fclose(devnull);
}

static void config_refuses_overlong_path(void **state) {
  (void)state;
  hostd_config_t c;
  char path[300];
  memset(path, 'a', sizeof(path) - 1);
  path[sizeof(path) - 1] = 0;
  char *argv[] = {"tallyd", "--listen-unix", path, NULL};
  FILE *devnull = fopen("/dev/null", "w");
  hostd_config_init(&c);
  assert_int_equal(hostd_config_parse_args(&c, 3, argv, devnull), -EINVAL);
  assert_string_equal(c.unix_path, HOSTD_DEFAULT_SOCKET);
  fclose(devnull);
}

/* Writes text to a fresh temporary file; returns its path (static). */
static const char *conf_file(const char *text) {
  static char path[64];
  int fd;
  strcpy(path, "/tmp/tally-conf-XXXXXX");
  fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  return path;
}

static void hostfn_word_defaults_to_on_and_parses(void **state) {
  hostd_config_t c;
  char *yes[] = {"tallyd", "--hostfn-word", "yes", NULL};
  char *no[] = {"tallyd", "--hostfn-word", "no", NULL};
  char *bad[] = {"tallyd", "--hostfn-word", "sometimes", NULL};
  const char *path;
  FILE *devnull = fopen("/dev/null", "w");
  (void)state;
  assert_non_null(devnull);
  hostd_config_init(&c);
  assert_int_equal(c.hostfn_word, 1); /* the GPU's word as well as the callback */
  assert_int_equal(hostd_config_parse_args(&c, 3, yes, devnull), 0);
  assert_int_equal(c.hostfn_word, 1);
  assert_int_equal(hostd_config_parse_args(&c, 3, no, devnull), 0);
  assert_int_equal(c.hostfn_word, 0);
  assert_int_equal(hostd_config_parse_args(&c, 3, bad, devnull), -EINVAL);
  path = conf_file("hostfn-word = no\n"); /* the same key in a config file */
  hostd_config_init(&c);
  assert_int_equal(hostd_config_load_file(&c, path, devnull), 0);
  assert_int_equal(c.hostfn_word, 0);
  unlink(path);
  fclose(devnull);
}

/* Runs the parser on argv with err captured; returns its status and the
 * message in msg. */
static int parse_capture(hostd_config_t *c, int argc, char **argv, char *msg, size_t cap) {
  FILE *f = tmpfile();
  int rc;
  assert_non_null(f);
  rc = hostd_config_parse_args(c, argc, argv, f);
  rewind(f);
  msg[0] = 0;
  if (!fgets(msg, (int)cap, f))
    msg[0] = 0;
  fclose(f);
  return rc;
}

static void config_file_sets_options_and_flags_win(void **state) {
  hostd_config_t c;
  char msg[512];
  const char *p = conf_file("# tallyd.conf\n"
                            "listen-unix = /tmp/from-file.sock\n"
                            "  listen-tcp 127.0.0.1:7001   # trailing comment\n"
                            "\n"
                            "log-level=debug\n"
                            "state-dir = /tmp/st-file\n"
                            "restart-grace-ms = 500\n");
  char path[64];
  strcpy(path, p);
  /* --config after the flag it conflicts with: the flag still wins. */
  char *argv[] = {"tallyd", "--state-dir", "/tmp/st-flag", "--config", path, NULL};
  (void)state;
  hostd_config_init(&c);
  assert_int_equal(parse_capture(&c, 5, argv, msg, sizeof(msg)), 0);
  assert_string_equal(c.unix_path, "/tmp/from-file.sock");
  assert_string_equal(c.tcp_addr, "127.0.0.1:7001");
  assert_int_equal(c.log_level, HOSTD_LOG_DEBUG);
  assert_int_equal(c.restart_grace_ms, 500);
  assert_string_equal(c.state_dir, "/tmp/st-flag");
  unlink(path);
}

/* An integer option of tallyd: its default, --NAME ok taken, each of the bad
 * values refused with the earlier value kept, and the config key NAME. */
static void int_option_parses_and_is_bounded(const char *name, size_t off, int dflt, const char *ok,
                                             const char *const bad[2], const char *file_value) {
  hostd_config_t c;
  int *field = (int *)((char *)&c + off);
  char msg[512], flag[32], text[64], path[64];
  FILE *devnull = fopen("/dev/null", "w");
  assert_non_null(devnull);
  snprintf(flag, sizeof(flag), "--%s", name);
  hostd_config_init(&c);
  assert_int_equal(*field, dflt);
  char *good[] = {"tallyd", flag, (char *)ok, NULL};
  assert_int_equal(hostd_config_parse_args(&c, 3, good, devnull), 0);
  assert_int_equal(*field, atoi(ok));
  for (int i = 0; i < 2; i++) {
    char *refused[] = {"tallyd", flag, (char *)bad[i], NULL};
    assert_int_equal(hostd_config_parse_args(&c, 3, refused, devnull), -EINVAL);
  }
  assert_int_equal(*field, atoi(ok));
  fclose(devnull);
  snprintf(text, sizeof(text), "%s = %s\n", name, file_value);
  strcpy(path, conf_file(text));
  char *argv[] = {"tallyd", "--config", path, NULL};
  hostd_config_init(&c);
  assert_int_equal(parse_capture(&c, 3, argv, msg, sizeof(msg)), 0);
  assert_int_equal(*field, atoi(file_value));
  unlink(path);
}

static void be_depth_flag_and_file_key_parse_and_are_bounded(void **state) {
  static const char *const bad[2] = {"33", "-1"};
  (void)state;
  int_option_parses_and_is_bounded("be-depth", offsetof(hostd_config_t, be_depth),
                                   HOSTD_DEFAULT_BE_DEPTH, "4", bad, "8");
}

static void share_block_flag_and_file_key_parse_and_are_bounded(void **state) {
  static const char *const bad[2] = {"1000001", "-1"};
  (void)state;
  int_option_parses_and_is_bounded("share-block-us", offsetof(hostd_config_t, share_block_us),
                                   0 /* off */, "20", bad, "10");
}

static void time_every_flag_and_file_key_parse_and_are_bounded(void **state) {
  static const char *const bad[2] = {"65537", "-1"};
  (void)state;
  int_option_parses_and_is_bounded("time-every", offsetof(hostd_config_t, time_every),
                                   0 /* the policy's */, "1", bad, "64");
}

static void flag_memset_flag_and_file_key_parse_and_are_bounded(void **state) {
  static const char *const bad[2] = {"2", "-1"};
  (void)state;
  int_option_parses_and_is_bounded("flag-memset", offsetof(hostd_config_t, flag_memset),
                                   0 /* the front end's write */, "1", bad, "1");
}

static void be_sms_hold_flag_and_file_key_parse_and_are_bounded(void **state) {
  static const char *const bad[2] = {"2", "-1"};
  (void)state;
  int_option_parses_and_is_bounded("be-sms-hold", offsetof(hostd_config_t, be_sms_hold),
                                   1 /* held */, "0", bad, "0");
}

/* --be-sms takes a count of SMs or a share of the device's: the one given
 * replaces the other; anything else is refused with the reason. */
static void be_sms_takes_a_count_or_a_share(void **state) {
  static const char *const bad[] = {"0%", "100%", "4097", "12x", "%", "-8", "50%%"};
  hostd_config_t c;
  char msg[512], path[64];
  FILE *devnull = fopen("/dev/null", "w");
  (void)state;
  assert_non_null(devnull);
  hostd_config_init(&c);
  assert_int_equal(c.be_sms, 0);
  assert_int_equal(c.be_sms_pct, 0);
  char *count[] = {"tallyd", "--be-sms", "96", NULL};
  assert_int_equal(hostd_config_parse_args(&c, 3, count, devnull), 0);
  assert_int_equal(c.be_sms, 96);
  assert_int_equal(c.be_sms_pct, 0);
  char *share[] = {"tallyd", "--be-sms", "73%", NULL};
  assert_int_equal(hostd_config_parse_args(&c, 3, share, devnull), 0);
  assert_int_equal(c.be_sms, 0);
  assert_int_equal(c.be_sms_pct, 73);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char *refused[] = {"tallyd", "--be-sms", (char *)bad[i], NULL};
    assert_int_equal(parse_capture(&c, 3, refused, msg, sizeof(msg)), -EINVAL);
    assert_non_null(strstr(msg, "--be-sms: expected a count of SMs 0..4096 or a share 1%..99%"));
  }
  assert_int_equal(c.be_sms_pct, 73); /* kept */
  fclose(devnull);
  strcpy(path, conf_file("be-sms = 50%\n"));
  char *argv[] = {"tallyd", "--config", path, NULL};
  hostd_config_init(&c);
  assert_int_equal(parse_capture(&c, 3, argv, msg, sizeof(msg)), 0);
  assert_int_equal(c.be_sms_pct, 50);
  unlink(path);
}

static void be_sms_block_us_flag_and_file_key_parse_and_are_bounded(void **state) {
  static const char *const bad[2] = {"1000001", "-1"};
  (void)state;
  int_option_parses_and_is_bounded("be-sms-block-us", offsetof(hostd_config_t, be_sms_block_us),
                                   0 /* none held */, "200", bad, "1000");
}

static void be_sms_inflight_us_flag_and_file_key_parse_and_are_bounded(void **state) {
  static const char *const bad[2] = {"1000001", "-1"};
  (void)state;
  int_option_parses_and_is_bounded("be-sms-inflight-us",
                                   offsetof(hostd_config_t, be_sms_inflight_us),
                                   -1 /* the policy's */, "500", bad, "0");
}

static void config_file_errors_name_the_line(void **state) {
  static const struct {
    const char *text, *expect;
  } cases[] = {
      {"log-level = info\nfrobnicate = 1\n", ":2: unknown option frobnicate"},
      {"listen-tcp\n", ":1: listen-tcp: missing value"},
      {"\n\nspin-us = lots\n", ":3: spin-us: expected 0..10000, got 'lots'"},
      {"config = /etc/other.conf\n", ":1: config files do not include other files"},
  };
  hostd_config_t c;
  char msg[512], path[64];
  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    strcpy(path, conf_file(cases[i].text));
    char *argv[] = {"tallyd", "--config", path, NULL};
    hostd_config_init(&c);
    assert_int_equal(parse_capture(&c, 3, argv, msg, sizeof(msg)), -EINVAL);
    if (strstr(msg, path) == NULL || strstr(msg, cases[i].expect) == NULL)
      fail_msg("case %zu: got '%s', expected '%s' after the file name", i, msg, cases[i].expect);
    unlink(path);
  }
  char *missing[] = {"tallyd", "--config", "/nonexistent/tallyd.conf", NULL};
  hostd_config_init(&c);
  assert_int_equal(parse_capture(&c, 3, missing, msg, sizeof(msg)), -ENOENT);
  assert_non_null(strstr(msg, "/nonexistent/tallyd.conf: No such file or directory"));
}

static void gpus_takes_one_ordinal_and_says_what_to_do_with_more(void **state) {
  hostd_config_t c;
  char msg[512];
  char *list[] = {"tallyd", "--gpus", "0,1", NULL};
  char *junk[] = {"tallyd", "--gpus", "first", NULL};
  (void)state;
  hostd_config_init(&c);
  assert_int_equal(parse_capture(&c, 3, list, msg, sizeof(msg)), -EINVAL);
  assert_non_null(strstr(msg, "start one tallyd per GPU"));
  assert_int_equal(parse_capture(&c, 3, junk, msg, sizeof(msg)), -EINVAL);
  assert_non_null(strstr(msg, "expected a GPU ordinal"));
  assert_string_equal(c.gpus, "");
}

static void spin_defaults_to_auto(void **state) {
  hostd_config_t c;
  char *zero[] = {"tallyd", "--spin-us", "0", NULL};
  (void)state;
  hostd_config_init(&c);
  assert_int_equal(c.spin_us, -1); /* wire's auto default */
  assert_int_equal(hostd_config_parse_args(&c, 3, zero, stderr), 0);
  assert_int_equal(c.spin_us, 0); /* never */
}

/* --max-stack-bytes and --max-heap-bytes: sizes (suffixes, 0 = no bound),
 * defaults 64 KiB and 1 GiB, bad values refused naming the flag with the
 * earlier value kept, the same keys in a config file, both in --help. */
static void context_limit_bounds_parse_as_sizes(void **state) {
  hostd_config_t c;
  char msg[512], path[64], *help = NULL;
  size_t help_len = 0;
  FILE *h;
  char *good[] = {"tallyd", "--max-stack-bytes", "128K", "--max-heap-bytes", "2G", NULL};
  char *none[] = {"tallyd", "--max-stack-bytes", "0", "--max-heap-bytes", "0", NULL};
  char *neg[] = {"tallyd", "--max-heap-bytes", "-5", NULL};
  char *junk[] = {"tallyd", "--max-stack-bytes", "12Q", NULL};
  char *missing[] = {"tallyd", "--max-heap-bytes", NULL};
  (void)state;
  hostd_config_init(&c);
  assert_int_equal(c.max_stack_bytes, 65536);
  assert_int_equal(c.max_heap_bytes, (uint64_t)1 << 30);
  assert_int_equal(c.max_stack_bytes, HOSTD_DEFAULT_MAX_STACK_BYTES);
  assert_int_equal(c.max_heap_bytes, HOSTD_DEFAULT_MAX_HEAP_BYTES);
  assert_int_equal(parse_capture(&c, 5, good, msg, sizeof(msg)), 0);
  assert_int_equal(c.max_stack_bytes, 128u << 10);
  assert_int_equal(c.max_heap_bytes, (uint64_t)2 << 30);
  assert_int_equal(parse_capture(&c, 3, neg, msg, sizeof(msg)), -EINVAL);
  assert_non_null(strstr(msg, "--max-heap-bytes: expected a size"));
  assert_int_equal(parse_capture(&c, 3, junk, msg, sizeof(msg)), -EINVAL);
  assert_non_null(strstr(msg, "--max-stack-bytes: expected a size"));
  assert_int_equal(parse_capture(&c, 2, missing, msg, sizeof(msg)), -EINVAL);
  assert_non_null(strstr(msg, "--max-heap-bytes: missing value"));
  assert_int_equal(c.max_stack_bytes, 128u << 10);
  assert_int_equal(c.max_heap_bytes, (uint64_t)2 << 30);
  assert_int_equal(parse_capture(&c, 5, none, msg, sizeof(msg)), 0);
  assert_int_equal(c.max_stack_bytes, 0);
  assert_int_equal(c.max_heap_bytes, 0);
  strcpy(path, conf_file("max-stack-bytes = 32K\nmax-heap-bytes 512M\n"));
  char *argv[] = {"tallyd", "--config", path, NULL};
  hostd_config_init(&c);
  assert_int_equal(parse_capture(&c, 3, argv, msg, sizeof(msg)), 0);
  assert_int_equal(c.max_stack_bytes, 32u << 10);
  assert_int_equal(c.max_heap_bytes, 512u << 20);
  unlink(path);
  h = open_memstream(&help, &help_len);
  assert_non_null(h);
  hostd_config_usage(h);
  assert_int_equal(fclose(h), 0);
  assert_non_null(strstr(help, "--max-stack-bytes SIZE"));
  assert_non_null(strstr(help, "--max-heap-bytes SIZE"));
  assert_non_null(strstr(help, "TALLYD_BLASLT_LAYOUT=0"));
  free(help);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(config_parses_every_flag),
      cmocka_unit_test(config_rejects_unknown_flag_and_missing_value),
      cmocka_unit_test(config_refuses_overlong_path),
      cmocka_unit_test(worker_spin_defaults_to_auto_and_is_bounded),
      cmocka_unit_test(hostfn_wake_defaults_to_off_and_is_bounded),
      cmocka_unit_test(hostfn_word_defaults_to_on_and_parses),
      cmocka_unit_test(lc_poll_options_parse_and_are_bounded),
      cmocka_unit_test(config_file_sets_options_and_flags_win),
      cmocka_unit_test(config_file_errors_name_the_line),
      cmocka_unit_test(gpus_takes_one_ordinal_and_says_what_to_do_with_more),
      cmocka_unit_test(spin_defaults_to_auto),
      cmocka_unit_test(be_depth_flag_and_file_key_parse_and_are_bounded),
      cmocka_unit_test(flag_memset_flag_and_file_key_parse_and_are_bounded),
      cmocka_unit_test(share_block_flag_and_file_key_parse_and_are_bounded),
      cmocka_unit_test(time_every_flag_and_file_key_parse_and_are_bounded),
      cmocka_unit_test(be_sms_hold_flag_and_file_key_parse_and_are_bounded),
      cmocka_unit_test(be_sms_block_us_flag_and_file_key_parse_and_are_bounded),
      cmocka_unit_test(be_sms_inflight_us_flag_and_file_key_parse_and_are_bounded),
      cmocka_unit_test(be_sms_takes_a_count_or_a_share),
      cmocka_unit_test(context_limit_bounds_parse_as_sizes),
      cmocka_unit_test(pin_pick_counts_down_and_stops_at_a_quarter),
      cmocka_unit_test(pin_pick_prefers_a_core_of_its_own),
  };
  return cmocka_run_group_tests_name("hostd-config", tests, NULL, NULL);
}
