#!/bin/sh
# gemm-split: libtally-blas.so's split GEMMs against the real library's whole ones, natively on
# the GPU (no tallyd: no Tally table answers, so TALLY_GEMM_BUDGET_US=50 is the budget and every
# test shape, 100 us or more whole, is split).  tests/gpu/gemm-split.c says what is compared and
# the tolerance.  Prints one PASS/FAIL line per entry point and "gemm-split: N passed, M failed";
# exit 0 when all passed, 77 without a GPU.  make check-gpu runs it; TALLY_BUILDDIR as e2e-run.
set -u
self_dir=$(cd "$(dirname "$0")" && pwd)
: "${TALLY_BUILDDIR:=$(cd "$self_dir/../.." && pwd)}"
B=$TALLY_BUILDDIR
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "skipped: no GPU"
  exit 77
fi
for f in "$B/blas/libtally-blas.so" "$B/tests/gpu/gemm-split-bin"; do
  [ -e "$f" ] || { echo "gemm-split: $f is not built"; exit 1; }
done
log=$(mktemp /tmp/gemm-split-log.XXXXXX) || exit 1
trap 'rm -f "$log"' EXIT
LD_PRELOAD="$B/blas/libtally-blas.so" TALLY_GEMM_BUDGET_US=${TALLY_GEMM_BUDGET_US:-50} \
  TALLY_GEMM_SPLIT_LOG="$log" "$B/tests/gpu/gemm-split-bin" "$log"
rc=$?
echo "gemm-split: decisions logged:"
sed 's/^/  /' "$log"
exit $rc
