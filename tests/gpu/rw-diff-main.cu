/* rw-diff-main.cu: main() of the GPU differential harness programs.
 *
 * Runs every corpus case linked into the program (the tests/corpus/ sources register
 * themselves with CORPUS_CASE), optionally only those whose name contains
 * argv[1], then prints the hook's per-kernel summary and exits 0 (every
 * tested variant identical to native, no sanity failure), 1 (a mismatch, a
 * hang, a launch error or a sanity failure) or 77 (no GPU).
 * RW_DIFF_SEED=N reproduces a run (inputs and preemption moments);
 * RW_DIFF_SELFTEST=1 first runs the GPU-free checks (rwdiff_selftest).
 */
#include "corpus.cuh"

corpus_case *corpus_cases;
int corpus_failures;
uint64_t corpus_seed_state;

extern "C" int rwdiff_finish(int sanity_failures);
extern "C" uint64_t rwdiff_seed(void);
extern "C" int rwdiff_selftest(void);

int main(int argc, char **argv) {
  int n = 0;
  const char *filter = argc > 1 ? argv[1] : NULL;

  /* RW_DIFF_SELFTEST=1: the GPU-free half (fatbin -> PTX -> transform ->
   * ptxas) over exactly the kernels this program registered. */
  if (getenv("RW_DIFF_SELFTEST") && rwdiff_selftest() != 0)
    return 1;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("skip: no GPU\n");
    return 77;
  }
  corpus_seed_state = rwdiff_seed() | 1;
  printf("%s: seed %llu (RW_DIFF_SEED=%llu reproduces)\n", argv[0],
         (unsigned long long)corpus_seed_state, (unsigned long long)rwdiff_seed());
  for (corpus_case *c = corpus_cases; c != 0; c = c->next) {
    if (filter && !strstr(c->name, filter))
      continue;
    printf("case %s\n", c->name);
    fflush(stdout);
    c->fn();
  }
  return rwdiff_finish(corpus_failures);
}
