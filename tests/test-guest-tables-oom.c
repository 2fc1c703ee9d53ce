/* test-guest-tables-oom.c: the guest library's tables under allocation
 * failure (guestlib/tables.c compiled into this program).
 *
 * malloc, calloc, realloc and free are wrapped at link time
 * (tests/oom-harness.h); allocation number N fails, N = 0, 1, 2, ... until
 * the scenario runs through.  The scenario records a module's functions
 * from FUNC records (encoded by the call table, as tallyd sends them) and a
 * few allocations, looks them up, and forgets them.  A failure must come
 * back as -ENOMEM and leave no function of that module behind (all or
 * nothing); emptied tables give their storage back, so nothing leaks.
 * Also: which kernel argument words name host memory tallyd's GPU cannot
 * reach (guest__mem_args_unreachable).
 */
#include "guestlib/guest.h"

#include <stdio.h>
#include <string.h>

#include "tests/oom-harness.h"

#define NFUNC 40

static wire_buf_t recs; /* NFUNC FUNC records, encoded before the countdown */

static int scenario(void) {
  const uint64_t module = 0x5000, base = 0x7f0000000000ull;
  char name[16];
  int rc;

  rc = guest__module_add(module, module, recs.data, recs.len, NFUNC);
  if (rc != 0) {
    assert_int_equal(rc, -ENOMEM);
    assert_int_equal(guest__module_funcs(module, NULL, 0), 0); /* all or nothing */
    return rc;
  }
  assert_int_equal(guest__module_funcs(module, NULL, 0), NFUNC);
  snprintf(name, sizeof(name), "k%d", NFUNC - 1);
  assert_non_null(guest__func_by_name(module, name));
  assert_int_equal(guest__func_find(0x100 + NFUNC - 1)->argbytes, 12);
  for (uint64_t i = 0; i < 100 && rc == 0; i++)
    rc = guest__mem_add(base + i * 4096, 4096, GUEST_MEM_DEVICE, 0);
  if (rc == 0)
    assert_true(guest__mem_find(base + 99 * 4096 + 5, NULL, NULL, NULL));
  else
    assert_int_equal(rc, -ENOMEM);
  for (uint64_t i = 0; i < 100; i++)
    (void)guest__mem_del(base + i * 4096, GUEST_MEM_DEVICE, NULL);
  guest__module_del(module);
  assert_null(guest__func_find(0x100));
  return rc;
}

static void every_allocation_of_the_tables_fails_cleanly(void **state) {
  (void)state;
  oom_every_failure(scenario, NFUNC);
}

static int setup(void **state) {
  uint8_t params[16];
  wire_buf_t p;
  (void)state;
  wire_buf_init(&recs);
  wire_buf_init(&p);
  for (int i = 0; i < 2; i++) { /* (u32 offset, u32 size) x 2: 8 bytes at 0, 4 at 8 */
    (void)wire_buf_put_u32(&p, i ? 8 : 0);
    (void)wire_buf_put_u32(&p, i ? 4 : 8);
  }
  memcpy(params, p.data, sizeof(params));
  wire_buf_close(&p);
  for (int i = 0; i < NFUNC; i++) {
    char name[16];
    call_func_t f;
    memset(&f, 0, sizeof(f));
    snprintf(name, sizeof(name), "k%d", i);
    f.handle = 0x100 + (uint64_t)i;
    f.nparams = 2;
    f.name_len = (uint32_t)strlen(name);
    f.name = (call_view_t){(const uint8_t *)name, f.name_len};
    f.params = (call_view_t){params, sizeof(params)};
    if (call_func_put(&f, &recs) != 0)
      return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  wire_buf_close(&recs);
  return 0;
}

/* Argument words naming unshared host memory are found; shared host
 * memory, device memory (also where it overlaps a host range: the two are
 * different processes' addresses), unaligned words and other values are
 * not; with no unshared range nothing is looked at. */
static void argument_words_naming_unreachable_host_memory(void **state) {
  const uint64_t host = 0x7f1000000000ull, shared = 0x7f2000000000ull, dev = 0x7f0ffffff000ull;
  uint64_t args[5], val = 0;
  size_t off = 99;
  (void)state;
  args[0] = 42, args[1] = shared + 8, args[2] = host + 16, args[3] = host + 20000, args[4] = 7;
  assert_int_equal(guest__mem_add(shared, 4096, GUEST_MEM_HOST, GUEST_HOST_SHARED), 0);
  assert_int_equal(guest__mem_add(dev, 8192, GUEST_MEM_DEVICE, 0), 0);       /* to host + 4096 */
  assert_false(guest__mem_args_unreachable(args, sizeof(args), &off, &val)); /* none yet */
  assert_int_equal(guest__mem_add(host, 65536, GUEST_MEM_HOST, 0), 0);       /* overlaps dev's */
  assert_true(guest__mem_args_unreachable(args, sizeof(args), &off, &val));
  assert_int_equal(off, 24);
  assert_int_equal(val, host + 20000);
  assert_false(guest__mem_args_unreachable(args, 24, &off, &val));                /* before it */
  assert_false(guest__mem_args_unreachable((uint8_t *)args + 4, 32, &off, &val)); /* shifted */
  assert_int_equal(guest__mem_del(host, GUEST_MEM_HOST, NULL), 0);
  assert_false(guest__mem_args_unreachable(args, sizeof(args), &off, &val));
  assert_int_equal(guest__mem_add(host, 65536, GUEST_MEM_HOST, GUEST_HOST_REGISTERED), 0);
  assert_true(guest__mem_args_unreachable(args, sizeof(args), &off, &val)); /* registered */
  assert_int_equal(guest__mem_del(host, GUEST_MEM_HOST, NULL), 0);
  assert_int_equal(guest__mem_del(dev, GUEST_MEM_DEVICE, NULL), 0);
  assert_int_equal(guest__mem_del(shared, GUEST_MEM_HOST, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_allocation_of_the_tables_fails_cleanly),
      cmocka_unit_test(argument_words_naming_unreachable_host_memory),
  };
  return cmocka_run_group_tests_name("guest-tables-oom", tests, setup, teardown);
}
