/* tally-ext.h: Tally's own private driver table, asked for by UUID.
 *
 * Tally's guest libcuda.so.1 answers cuGetExportTable for this UUID with the
 * table below; a real driver does not know the UUID and fails the call, so a
 * library that asks (the interposed cuBLAS, blas/) can tell whether it runs
 * under Tally and, if so, learn what the daemon advertised.  Plain C, no
 * CUDA types: include it anywhere.
 *
 * Table layout (an array of pointers, as the driver's own tables):
 *   SLOT  MEANING
 *   0     size of the table in bytes (TALLY_EXT_SLOTS * sizeof(void *))
 *   1     unsigned be_budget_us(void): the scheduler's best-effort kernel
 *         budget in microseconds for the current device, from the connect
 *         snapshot (0: no scheduler, or not connected yet)
 *   2     int priority(void): this tenant's class, 0 latency-critical,
 *         1 best-effort
 *   3     int lc_present(void): 0 when tallyd said that no latency-critical
 *         tenant is connected (best-effort work need not be cut), 1 when
 *         one is or tallyd did not say (an older daemon, no connection)
 * Slots are only ever appended; a caller checks slot 0 before reading one.
 *
 * Prefix tally_ext_.
 */
#ifndef TALLY_GUESTLIB_TALLY_EXT_H
#define TALLY_GUESTLIB_TALLY_EXT_H

/* 5f0c7ad3-91e4-4b6a-a2d8-3c6e0b9f17e5, chosen at random once. */
#define TALLY_EXT_UUID                                                                             \
  { 0x5f, 0x0c, 0x7a, 0xd3, 0x91, 0xe4, 0x4b, 0x6a, 0xa2, 0xd8, 0x3c, 0x6e, 0x0b, 0x9f, 0x17, 0xe5 }

#define TALLY_EXT_SLOTS          4
#define TALLY_EXT_SLOT_BUDGET    1
#define TALLY_EXT_SLOT_PRIORITY  2
#define TALLY_EXT_SLOT_LC        3

typedef unsigned (*tally_ext_be_budget_us_fn)(void);
typedef int (*tally_ext_priority_fn)(void);
typedef int (*tally_ext_lc_present_fn)(void);

#endif
