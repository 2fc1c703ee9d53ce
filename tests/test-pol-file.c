/* test-pol-file.c: pol_file_replace(), the durable atomic file write that
 * every file written as a whole goes through (policy/pol-file.h). */
#include "policy/pol-file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static char *tmpdir_new(void) {
  char *d = strdup("/tmp/tally-test-base-XXXXXX");
  assert_non_null(d);
  assert_non_null(mkdtemp(d));
  return d;
}

/* Number of directory entries other than . and .. */
static int entries(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

/* path holds exactly want[0..len) and is the only entry of dir (no
 * temporary file left behind); then both are removed. */
static void expect_only_file(char *dir, const char *path, const char *want, size_t len) {
  char buf[64];
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  size_t got = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  assert_int_equal(got, len);
  assert_memory_equal(buf, want, len);
  assert_int_equal(entries(dir), 1);
  unlink(path);
  rmdir(dir);
  free(dir);
}

static void replace_writes_the_parts_in_order_with_the_mode(void **state) {
  (void)state;
  char *dir = tmpdir_new(), path[512];
  snprintf(path, sizeof(path), "%s/f", dir);
  struct iovec parts[3] = {{"ab", 2}, {NULL, 0}, {"cde", 3}};
  assert_int_equal(pol_file_replace(path, parts, 3, 0640), 0);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0640);
  expect_only_file(dir, path, "abcde", 5);
}

static void replace_swaps_a_longer_old_file_for_the_new_contents(void **state) {
  (void)state;
  char *dir = tmpdir_new(), path[512];
  snprintf(path, sizeof(path), "%s/f", dir);
  struct iovec old = {"0123456789", 10}, new = {"xy", 2};
  assert_int_equal(pol_file_replace(path, &old, 1, 0644), 0);
  assert_int_equal(pol_file_replace(path, &new, 1, 0644), 0);
  expect_only_file(dir, path, "xy", 2);
}

static void replace_fails_with_errno_and_leaves_nothing_behind(void **state) {
  (void)state;
  char *dir = tmpdir_new(), path[512];
  struct iovec p = {"x", 1};
  snprintf(path, sizeof(path), "%s/missing/f", dir);
  assert_int_equal(pol_file_replace(path, &p, 1, 0644), -ENOENT);
  /* the target is a directory: the rename fails, the temporary goes */
  snprintf(path, sizeof(path), "%s/d", dir);
  assert_int_equal(mkdir(path, 0755), 0);
  int rc = pol_file_replace(path, &p, 1, 0644);
  assert_true(rc == -EISDIR || rc == -ENOTEMPTY || rc == -EEXIST);
  assert_int_equal(entries(dir), 1);
  rmdir(path);
  rmdir(dir);
  free(dir);
}

static void replace_refuses_bad_arguments(void **state) {
  (void)state;
  char longpath[5000];
  memset(longpath, 'a', sizeof(longpath) - 1);
  longpath[sizeof(longpath) - 1] = '\0';
  struct iovec p = {"x", 1};
  assert_int_equal(pol_file_replace(longpath, &p, 1, 0644), -ENAMETOOLONG);
  assert_int_equal(pol_file_replace("/tmp/x", NULL, 1, 0644), -EINVAL);
  assert_int_equal(pol_file_replace("/tmp/x", &p, -1, 0644), -EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(replace_writes_the_parts_in_order_with_the_mode),
      cmocka_unit_test(replace_swaps_a_longer_old_file_for_the_new_contents),
      cmocka_unit_test(replace_fails_with_errno_and_leaves_nothing_behind),
      cmocka_unit_test(replace_refuses_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
