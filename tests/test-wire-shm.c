/* test-wire-shm.c: the shared-memory data region's producer policy (shm.h).
 *
 * Drives wire__shm_tx_step directly on a sparse memfd region of the default
 * size (1 GiB per direction, virtual) and plays the consumer by hand: a
 * message larger than 64 MiB is one span (no chunks), a span starts over at
 * offset 0 once the consumer released everything, and pages above the warm
 * 64 MiB go back to the kernel only when the region is empty and unused
 * there for WIRE__SHM_TRIM_IDLE_NS (measured through the memfd's allocated
 * blocks).  Time is passed in, so nothing sleeps.
 */
#include "wire/shm.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

typedef struct region {
  int fd;
  uint8_t *mem;
  size_t size;
  wire__shm_dir g2d, d2g;
} region;

#define RING ((uint64_t)1 << 20)

static void region_open(region *r) {
  r->size = wire__shm_size(RING, WIRE__SHM_DATA_DEFAULT);
  r->fd = memfd_create("test-wire-shm", MFD_CLOEXEC);
  assert_true(r->fd >= 0);
  assert_int_equal(ftruncate(r->fd, (off_t)r->size), 0);
  r->mem = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
  assert_true(r->mem != MAP_FAILED);
  wire__shm_init(r->mem, RING, WIRE__SHM_DATA_DEFAULT);
  wire__shm_bind(r->mem, RING, WIRE__SHM_DATA_DEFAULT, &r->g2d, &r->d2g);
}

static void region_close(region *r) {
  munmap(r->mem, r->size);
  close(r->fd);
}

/* Bytes of the memfd backed by memory. */
static uint64_t resident(region *r) {
  struct stat st;
  assert_int_equal(fstat(r->fd, &st), 0);
  return (uint64_t)st.st_blocks * 512u;
}

/* Sends len bytes of src as one CALL; returns the data position of the last
 * descriptor written (read back from the ring). */
static uint64_t send_one(region *r, const void *src, size_t len) {
  struct iovec v = {(void *)src, len};
  wire__shm_tx tx = {1, WIRE__K_CALL, 1, 0, &v, 1, len, 0, false};
  bool pub;
  uint64_t pos;
  assert_int_equal(wire__shm_tx_step(&r->g2d, &tx, &pub), 0);
  assert_true(tx.done);
  memcpy(&pos, r->g2d.ring + ((r->g2d.head - WIRE__SHMDESC_LEN) & (RING - 1)), 8);
  return pos;
}

/* The consumer takes everything: ring tail = head, data_tail = data head. */
static void consume_all(region *r) {
  __atomic_store_n(wire__shm_u64(&r->g2d, WIRE__SHM_TAIL), r->g2d.head, __ATOMIC_RELEASE);
  __atomic_store_n(wire__shm_u64(&r->g2d, WIRE__SHM_DATA_TAIL), r->g2d.data_head, __ATOMIC_RELEASE);
}

static void large_message_is_one_span_and_next_span_restarts_at_zero(void **st) {
  region r;
  size_t big = (size_t)96 << 20; /* > 64 MiB: more than the data region's warm part */
  uint8_t *src = malloc(big), *small = calloc(1, 128 << 10);
  uint64_t pos, head_before;

  assert_non_null(src);
  memset(src, 0x5a, big);
  region_open(&r);
  pos = send_one(&r, small, 128 << 10);
  assert_int_equal(pos % WIRE__SHM_DATA_DEFAULT, 0);
  /* Not released: the next span follows it. */
  pos = send_one(&r, small, 128 << 10);
  assert_int_equal(pos % WIRE__SHM_DATA_DEFAULT, 128 << 10);
  consume_all(&r);
  head_before = r.g2d.head;
  pos = send_one(&r, src, big);
  /* One descriptor frame for the whole message, at offset 0 again. */
  assert_int_equal(r.g2d.head - head_before, WIRE__HDR_LEN + WIRE__SHMDESC_LEN);
  assert_int_equal(pos % WIRE__SHM_DATA_DEFAULT, 0);
  assert_memory_equal(r.g2d.data, src, 4096);
  assert_memory_equal(r.g2d.data + big - 4096, src + big - 4096, 4096);
  region_close(&r);
  free(src);
  free(small);
}

static void pages_above_warm_return_only_when_empty_and_idle(void **st) {
  region r;
  size_t big = (size_t)128 << 20;
  uint8_t *src = malloc(big);
  uint64_t t, before;

  assert_non_null(src);
  memset(src, 1, big);
  region_open(&r);
  send_one(&r, src, big);
  t = r.g2d.high_ns;
  before = resident(&r);
  assert_true(before >= big);
  /* Not released yet: the consumer may still be reading. */
  assert_int_equal(wire__shm_trim(&r.g2d, t + 2 * WIRE__SHM_TRIM_IDLE_NS), 0);
  consume_all(&r);
  /* Released, but used too recently. */
  assert_int_equal(wire__shm_trim(&r.g2d, t + WIRE__SHM_TRIM_IDLE_NS / 2), 0);
  assert_int_equal(resident(&r), before);
  /* Released and idle: everything above the warm 64 MiB goes. */
  assert_int_equal(wire__shm_trim(&r.g2d, t + WIRE__SHM_TRIM_IDLE_NS), 1);
  assert_true(resident(&r) <= before - (big - WIRE__SHM_DATA_WARM));
  assert_true(resident(&r) >= WIRE__SHM_DATA_WARM);
  /* Nothing left to trim; the region still works and reads what we wrote. */
  assert_int_equal(wire__shm_trim(&r.g2d, t + 2 * WIRE__SHM_TRIM_IDLE_NS), 0);
  send_one(&r, src, big);
  assert_memory_equal(r.g2d.data + big - 4096, src + big - 4096, 4096);
  region_close(&r);
  free(src);
}

static void small_traffic_never_reaches_above_warm(void **st) {
  region r;
  uint8_t *src = calloc(1, 1 << 20);
  int i;

  region_open(&r);
  /* 2000 request/reply rounds of 1 MiB: 2 GiB through a 1 GiB region. */
  for (i = 0; i < 2000; i++) {
    send_one(&r, src, 1 << 20);
    consume_all(&r);
  }
  assert_true(r.g2d.hiwater <= (1u << 20));
  assert_true(resident(&r) <= ((uint64_t)4 << 20));
  region_close(&r);
  free(src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(large_message_is_one_span_and_next_span_restarts_at_zero),
      cmocka_unit_test(pages_above_warm_return_only_when_empty_and_idle),
      cmocka_unit_test(small_traffic_never_reaches_above_warm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
