#!/bin/sh
# rw-diff-selftest.sh: the GPU-free half of the differential tests, for
# `make check` (TAP).
#
# Runs tests/gpu/rw-diff-stress against the libcuda stub with
# RW_DIFF_SELFTEST=1: at startup the harness's own cudart registers its
# fatbins through the hook, and the self-test follows each wrapper to its
# fatbin, extracts the PTX (rw_fatbin_*), transforms every entry
# (rw_transform_ptx), checks every registered kernel is an entry of that
# PTX, and assembles the transformed module with $PTXAS.  Without a GPU the
# program then exits 77 ("skip: no GPU"), which is the expected outcome here.
b=${TALLY_BUILDDIR:-.}
prog=$b/tests/gpu/rw-diff-stress
echo "1..2"
out=$(LD_LIBRARY_PATH="$b/tests/gpu/stub" RW_DIFF_SELFTEST=1 PTXAS="${PTXAS:-ptxas}" "$prog" 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
if echo "$out" | grep -q '^selftest: [1-9][0-9]* fatbins, 0 failures$' &&
   ! echo "$out" | grep -q 'is not an entry of the PTX\|ptxas failed\|transform failed\|unreadable'; then
  echo "ok 1 - registered fatbins extract, transform and assemble"
else
  echo "not ok 1 - registered fatbins extract, transform and assemble"
fi
n_asm=$(echo "$out" | grep -c 'transformed module assembles with ptxas')
n_fb=$(echo "$out" | grep -c '^selftest: fatbin [0-9]*: .* kernels (')
if [ "$rc" -eq 77 ] && [ "$n_fb" -ge 6 ] && [ "$n_asm" -eq "$n_fb" ]; then
  echo "ok 2 - all $n_fb kernel modules assembled; harness skips cleanly without a GPU"
else
  echo "not ok 2 - exit $rc, $n_fb kernel modules, $n_asm assembled"
fi
