/* ptx-opcodes.c: the PTX instruction names this module knows.
 *
 * The parser accepts any opcode (so a newer PTX still round-trips), but a
 * transformation refuses an entry that uses one not in this table: an
 * instruction we have not read about might read %ctaid implicitly, sync the
 * grid, or otherwise break the worker loop.  Source: PTX ISA 9.0, chapter 9
 * ("Instruction Set"), the base names before the first '.'.
 */
#include "rewrite/rw.h"
#include "rewrite/rw-int.h"

#include <stdlib.h>
#include <string.h>

/* Sorted for bsearch (checked by test-rw-ptx-parse). */
static const char *const opcodes[] = {
    "abs",          "activemask",    "add",       "addc",       "alloca",
    "and",          "applypriority", "atom",      "bar",        "barrier",
    "bfe",          "bfi",           "bfind",     "bmsk",       "bra",
    "brev",         "brkpt",         "brx",       "call",       "clusterlaunchcontrol",
    "clz",          "cnot",          "copysign",  "cos",        "cp",
    "createpolicy", "cvt",           "cvta",      "discard",    "div",
    "dp2a",         "dp4a",          "elect",     "ex2",        "exit",
    "fence",        "fma",           "fns",       "getctarank", "griddepcontrol",
    "isspacep",     "istypep",       "ld",        "ldmatrix",   "ldu",
    "lg2",          "lop3",          "mad",       "mad24",      "madc",
    "mapa",         "match",         "max",       "mbarrier",   "membar",
    "min",          "mma",           "mov",       "movmatrix",  "mul",
    "mul24",        "multimem",      "nanosleep", "neg",        "not",
    "or",           "pmevent",       "popc",      "prefetch",   "prefetchu",
    "prmt",         "rcp",           "red",       "redux",      "rem",
    "ret",          "rsqrt",         "sad",       "selp",       "set",
    "setmaxnreg",   "setp",          "shf",       "shfl",       "shl",
    "shr",          "sin",           "slct",      "sqrt",       "st",
    "stackrestore", "stacksave",     "stmatrix",  "sub",        "subc",
    "suld",         "suq",           "sured",     "sust",       "szext",
    "tanh",         "tcgen05",       "tensormap", "testp",      "tex",
    "tld4",         "trap",          "txq",       "vabsdiff",   "vabsdiff2",
    "vabsdiff4",    "vadd",          "vadd2",     "vadd4",      "vavrg2",
    "vavrg4",       "vmad",          "vmax",      "vmax2",      "vmax4",
    "vmin",         "vmin2",         "vmin4",     "vote",       "vset",
    "vset2",        "vset4",         "vshl",      "vshr",       "vsub",
    "vsub2",        "vsub4",         "wgmma",     "wmma",       "xor",
};

static int cmp(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

bool rw__opcode_known(const char *op) {
  return bsearch(&op, opcodes, sizeof(opcodes) / sizeof(opcodes[0]), sizeof(opcodes[0]), cmp) !=
         NULL;
}

/* For the test that the table stays sorted. */
size_t rw__opcode_table(const char *const **out) {
  *out = opcodes;
  return sizeof(opcodes) / sizeof(opcodes[0]);
}
