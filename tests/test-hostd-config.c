/* test-hostd-config.c: tallyd's flags parse, and bad ones are refused. */
#include "hostd/hostd.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static void config_parses_every_flag(void **state) {
  (void)state;
  hostd_config_t c;
  char *argv[] = {"tallyd",       "--listen-unix",
                  "/tmp/t.sock",  "--listen-tcp",
                  "0.0.0.0:7000", "--gpus",
                  "0,1",          "--state-dir",
                  "/tmp/st",      "--log-level",
                  "debug",        "--spin-us",
                  "30",           NULL};
  hostd_config_init(&c);
  assert_int_equal(hostd_config_parse_args(&c, 13, argv, stderr), 0);
  assert_int_equal(c.spin_us, 30);
  assert_string_equal(c.unix_path, "/tmp/t.sock");
  assert_string_equal(c.tcp_addr, "0.0.0.0:7000");
  assert_string_equal(c.gpus, "0,1");
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(config_parses_every_flag),
      cmocka_unit_test(config_rejects_unknown_flag_and_missing_value),
      cmocka_unit_test(config_refuses_overlong_path),
      cmocka_unit_test(worker_spin_defaults_to_auto_and_is_bounded),
  };
  return cmocka_run_group_tests_name("hostd-config", tests, NULL, NULL);
}
