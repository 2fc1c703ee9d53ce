/* main.c: tally-sim, the command-line front end of the simulator.
 *
 * With no arguments it is Tally's main job on a machine without a GPU: it
 * runs the bundled workload pairs under every policy and prints the
 * comparison.  Until the simulator core lands it says so and exits non-zero,
 * rather than pretend.
 */
#include "sim/sim.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
  fprintf(f, "usage: tally-sim [--help]\n"
             "Runs the bundled synthetic workload pairs under every scheduling policy\n"
             "(ours, time-slicing, MPS, MPS-priority, TGS-like) and prints a comparison.\n");
}

int main(int argc, char **argv) {
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    usage(stdout);
    return 0;
  }
  fprintf(stderr, "tally-sim: the simulator core is not built yet (issue: policy/ + sim/).\n");
  return 2;
}
