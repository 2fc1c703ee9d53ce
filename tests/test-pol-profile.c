/* test-pol-profile.c: the profile table and its file format.
 *
 * Checks the encoder against the offset table in policy/profile-file.c byte
 * by byte, round trips through memory and through a file, reads a file of
 * the previous version (1), and feeds the decoder every kind of damage it
 * must refuse without changing the table.
 */
#include "policy/pol.h"
#include "wire/wire-le.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static pol_profile_t rec(uint64_t id) {
  pol_profile_t r;
  memset(&r, 0, sizeof(r));
  r.key.kernel_id = id;
  r.key.grid[0] = 100 + (uint32_t)id;
  r.key.grid[1] = 2;
  r.key.grid[2] = 1;
  r.key.block[0] = 128;
  r.key.block[1] = 2;
  r.key.block[2] = 1;
  r.key.shmem_bytes = 4096;
  r.wave_ns = 12345 + id;
  r.wave_samples = 3;
  r.ptb_block_ns = 777;
  r.ptb_samples = 2;
  r.drifted = 1;
  r.flush_drain_ns = 4242;
  r.flush_drain_samples = 5;
  return r;
}

static pol_profiles_t *table_of(int n) {
  pol_profiles_t *p;
  assert_int_equal(pol_profiles_new(&p), 0);
  for (int i = 1; i <= n; i++) {
    pol_profile_t r = rec((uint64_t)i);
    assert_int_equal(pol_profiles_put(p, &r), 0);
  }
  return p;
}

static void encode_follows_offset_table(void **state) {
  (void)state;
  pol_profiles_t *p = table_of(1);
  uint8_t buf[256];
  size_t len;
  assert_int_equal(pol_profiles_encode(p, buf, sizeof(buf), &len), 0);
  assert_int_equal(len, 24 + 80 + 8);
  assert_memory_equal(buf, "TALLYPRF", 8);
  /* every field against the offset table at the top of profile-file.c:
   * {offset from the file start, width in bytes, value} */
  static const struct {
    size_t off, width;
    uint64_t want;
  } fields[] = {
      {8, 4, 2},         {12, 4, 1},        {16, 4, 80},       {20, 4, 0},  /* header */
      {24 + 0, 8, 1},    {24 + 8, 4, 101},  {24 + 12, 4, 2},   {24 + 16, 4, 1},
      {24 + 20, 4, 128}, {24 + 24, 4, 2},   {24 + 28, 4, 1},   {24 + 32, 4, 4096},
      {24 + 36, 8, 12346}, {24 + 44, 4, 3}, {24 + 48, 8, 777}, {24 + 56, 4, 2},
      {24 + 60, 4, 1},   {24 + 64, 8, 4242}, {24 + 72, 4, 5},  {24 + 76, 4, 0},
  };
  for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
    uint64_t got = fields[i].width == 8 ? wire_le_rd64(buf + fields[i].off)
                                        : wire_le_rd32(buf + fields[i].off);
    assert_int_equal(got, fields[i].want);
  }
  pol_profiles_free(p);
}

static void encode_reports_needed_size(void **state) {
  (void)state;
  pol_profiles_t *p = table_of(3);
  uint8_t small[10];
  size_t len = 0;
  assert_int_equal(pol_profiles_encode(p, small, sizeof(small), &len), -ENOSPC);
  assert_int_equal(len, 24 + 3 * 80 + 8);
  pol_profiles_free(p);
}

static void decode_round_trips_every_record(void **state) {
  (void)state;
  pol_profiles_t *p = table_of(50), *q;
  size_t len;
  uint8_t *buf = malloc(24 + 50 * 80 + 8);
  assert_non_null(buf);
  assert_int_equal(pol_profiles_encode(p, buf, 24 + 50 * 80 + 8, &len), 0);
  assert_int_equal(pol_profiles_new(&q), 0);
  assert_int_equal(pol_profiles_decode(q, buf, len, NULL), 0);
  assert_int_equal(pol_profiles_count(q), 50);
  for (int i = 1; i <= 50; i++) {
    pol_profile_t r = rec((uint64_t)i);
    const pol_profile_t *g = pol_profiles_find(q, &r.key);
    assert_non_null(g);
    assert_memory_equal(g, &r, sizeof(r));
  }
  free(buf);
  pol_profiles_free(p);
  pol_profiles_free(q);
}

/* Decoding damaged bytes fails with -EPROTO and leaves the table as it was. */
static void expect_refused(const uint8_t *buf, size_t len, const char *why_part) {
  pol_profiles_t *q = table_of(2);
  const char *why = NULL;
  assert_int_equal(pol_profiles_decode(q, buf, len, &why), -EPROTO);
  assert_non_null(why);
  if (why_part && !strstr(why, why_part))
    fail_msg("reason '%s' lacks '%s'", why, why_part);
  assert_int_equal(pol_profiles_count(q), 2);
  pol_profiles_free(q);
}

/* Recomputes the trailing checksum so a test reaches the field checks. */
static void reseal(uint8_t *buf, size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len - 8; i++) {
    h ^= buf[i];
    h *= 1099511628211ull;
  }
  wire_le_wr64(buf + len - 8, h);
}

static void decode_rejects_damage(void **state) {
  (void)state;
  pol_profiles_t *p = table_of(2);
  uint8_t buf[24 + 2 * 80 + 8], bad[sizeof(buf) + 80];
  size_t len;
  assert_int_equal(pol_profiles_encode(p, buf, sizeof(buf), &len), 0);
  expect_refused(buf, 10, "shorter");
  memcpy(bad, buf, len);
  bad[0] = 'X';
  expect_refused(bad, len, "magic");
  memcpy(bad, buf, len);
  bad[8] = 3;
  expect_refused(bad, len, "version");
  memcpy(bad, buf, len);
  bad[16] = 81;
  expect_refused(bad, len, "record size");
  memcpy(bad, buf, len);
  bad[16] = 64; /* version 1's record size in a version 2 file */
  expect_refused(bad, len, "record size");
  memcpy(bad, buf, len);
  bad[12] = 3; /* count says 3, bytes hold 2 */
  expect_refused(bad, len, "length");
  memcpy(bad, buf, len);
  bad[15] = 0xff; /* count of ~4 billion: refused before any allocation */
  expect_refused(bad, len, "cap");
  expect_refused(buf, len - 1, "length");
  memcpy(bad, buf, len);
  bad[24 + 40] ^= 1; /* one bit of a record */
  expect_refused(bad, len, "checksum");
  memcpy(bad, buf, len);
  memset(bad + 24 + 8, 0, 4); /* grid x = 0 */
  reseal(bad, len);
  expect_refused(bad, len, "zero");
  memcpy(bad, buf, len);
  bad[24 + 20] = 0;
  bad[24 + 21] = 8; /* block x = 2048 */
  reseal(bad, len);
  expect_refused(bad, len, "1024");
  memcpy(bad, buf, len);
  memcpy(bad + 24 + 80, bad + 24, 80); /* the same key twice */
  reseal(bad, len);
  expect_refused(bad, len, "duplicate");
  memcpy(bad, buf, len);
  bad[24 + 63] = 0x7f; /* drift count */
  reseal(bad, len);
  expect_refused(bad, len, "drift");
  memcpy(bad, buf, len);
  bad[24 + 76] = 1; /* the record's reserved word */
  reseal(bad, len);
  expect_refused(bad, len, "reserved");
  memcpy(bad, buf, len);
  bad[24 + 71] = 0x7f; /* flush_drain_ns of years */
  reseal(bad, len);
  expect_refused(bad, len, "hour");
  pol_profiles_free(p);
}

/* A version 1 file (64-byte records, written before the FLUSH figures
 * existed), laid out by hand from the table: read, the FLUSH figures 0. */
static void decode_reads_version_1(void **state) {
  (void)state;
  uint8_t buf[24 + 64 + 8];
  pol_profile_t r = rec(9);
  memset(buf, 0, sizeof(buf));
  memcpy(buf, "TALLYPRF", 8);
  wire_le_wr32(buf + 8, 1);
  wire_le_wr32(buf + 12, 1);
  wire_le_wr32(buf + 16, 64);
  uint8_t *q = buf + 24;
  wire_le_wr64(q, r.key.kernel_id);
  for (int i = 0; i < 3; i++) {
    wire_le_wr32(q + 8 + 4 * i, r.key.grid[i]);
    wire_le_wr32(q + 20 + 4 * i, r.key.block[i]);
  }
  wire_le_wr32(q + 32, r.key.shmem_bytes);
  wire_le_wr64(q + 36, r.wave_ns);
  wire_le_wr32(q + 44, r.wave_samples);
  wire_le_wr64(q + 48, r.ptb_block_ns);
  wire_le_wr32(q + 56, r.ptb_samples);
  wire_le_wr32(q + 60, r.drifted);
  reseal(buf, sizeof(buf));
  pol_profiles_t *p;
  assert_int_equal(pol_profiles_new(&p), 0);
  assert_int_equal(pol_profiles_decode(p, buf, sizeof(buf), NULL), 0);
  assert_int_equal(pol_profiles_count(p), 1);
  const pol_profile_t *g = pol_profiles_find(p, &r.key);
  assert_non_null(g);
  assert_int_equal(g->wave_ns, r.wave_ns);
  assert_int_equal(g->wave_samples, r.wave_samples);
  assert_int_equal(g->ptb_block_ns, r.ptb_block_ns);
  assert_int_equal(g->ptb_samples, r.ptb_samples);
  assert_int_equal(g->drifted, r.drifted);
  assert_int_equal(g->flush_drain_ns, 0);
  assert_int_equal(g->flush_drain_samples, 0);
  /* Version 1 with version 2's record size is refused, the table kept. */
  uint8_t bad[24 + 80 + 8];
  memset(bad, 0, sizeof(bad));
  memcpy(bad, buf, 24 + 64);
  wire_le_wr32(bad + 16, 80);
  reseal(bad, sizeof(bad));
  const char *why = NULL;
  assert_int_equal(pol_profiles_decode(p, bad, sizeof(bad), &why), -EPROTO);
  assert_non_null(strstr(why, "record size"));
  assert_int_equal(pol_profiles_find(p, &r.key)->wave_ns, r.wave_ns);
  /* Saved again, it is written as version 2 with the FLUSH figures. */
  size_t len;
  uint8_t out[24 + 80 + 8];
  assert_int_equal(pol_profiles_encode(p, out, sizeof(out), &len), 0);
  assert_int_equal(len, sizeof(out));
  assert_int_equal(wire_le_rd32(out + 8), 2);
  pol_profiles_free(p);
}

static void save_then_load_restores_profiles(void **state) {
  (void)state;
  char path[] = "/tmp/test-pol-profile-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  pol_profiles_t *p = table_of(7), *q;
  assert_int_equal(pol_profiles_save(p, path), 0);
  assert_int_equal(pol_profiles_new(&q), 0);
  assert_int_equal(pol_profiles_load(q, path, NULL), 0);
  assert_int_equal(pol_profiles_count(q), 7);
  pol_profile_t r = rec(4);
  assert_non_null(pol_profiles_find(q, &r.key));
  /* A truncated file is refused, the table kept. */
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  assert_int_equal(ftruncate(fileno(f), 50), 0);
  fclose(f);
  const char *why = NULL;
  assert_int_equal(pol_profiles_load(q, path, &why), -EPROTO);
  assert_int_equal(pol_profiles_count(q), 7);
  unlink(path);
  assert_int_equal(pol_profiles_load(q, path, NULL), -ENOENT);
  pol_profiles_free(p);
  pol_profiles_free(q);
}

static void table_grows_and_replaces(void **state) {
  (void)state;
  pol_profiles_t *p = table_of(1000);
  assert_int_equal(pol_profiles_count(p), 1000);
  pol_profile_t r = rec(500);
  r.wave_ns = 1;
  assert_int_equal(pol_profiles_put(p, &r), 0);
  assert_int_equal(pol_profiles_count(p), 1000);
  assert_int_equal(pol_profiles_find(p, &r.key)->wave_ns, 1);
  r.key.shmem_bytes = 1; /* another launch shape: another profile */
  assert_null(pol_profiles_find(p, &r.key));
  pol_profiles_free(p);
  pol_profiles_free(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(encode_follows_offset_table),
      cmocka_unit_test(decode_reads_version_1),
      cmocka_unit_test(encode_reports_needed_size),
      cmocka_unit_test(decode_round_trips_every_record),
      cmocka_unit_test(decode_rejects_damage),
      cmocka_unit_test(save_then_load_restores_profiles),
      cmocka_unit_test(table_grows_and_replaces),
  };
  return cmocka_run_group_tests_name("pol-profile", tests, NULL, NULL);
}
