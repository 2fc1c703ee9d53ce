#!/usr/bin/python3
"""gen-driver-api.py: generate guestlib's driver-API surface from cuda.h.

The guest library *is* libcuda.so.1, so it must export every symbol the real
driver exports, under the real (suffixed) names: cuMemAlloc_v2,
cuMemcpyHtoD_v2_ptds, cuEventRecord_ptsz...  This script parses the CUDA
headers with libclang (a real C parser, never regexes over the header) with
__CUDA_API_VERSION_INTERNAL defined, which is how the driver itself sees them:
every legacy and per-thread variant is then declared under its own name.

Inputs:  $CUDA_HOME/include/cuda.h, cudaProfiler.h (symbols and signatures),
         cudaTypedefs.h (PFN_<name>_v<version>[_ptds|_ptsz]: which real symbol
         cuGetProcAddress must return for a (name, version, flags) request),
         guestlib/driver-api.annot (which symbols guestlib implements by hand;
         everything else gets a stub that returns CUDA_ERROR_NOT_SUPPORTED).
Outputs: guestlib/driver-api.def  GUEST_API_IMPL/GUEST_API_STUB X-macro list
         guestlib/cuda-result.def GUEST_RESULT(name, value, text) list
         guestlib/driver-proc.def GUEST_PROC(name, version, ptds, symbol) list
         guestlib/driver-trace.def GUEST_TRACE(name, (params), (args)) list

usage: gen-driver-api.py [--cuda-include DIR] [--annot FILE] [--outdir DIR]
"""

import argparse
import os
import sys

LIBCLANG_CANDIDATES = [
    "/usr/lib/llvm-14/lib/libclang.so.1",
    "/usr/lib/llvm-15/lib/libclang.so.1",
    "/usr/lib/llvm-16/lib/libclang.so.1",
    "/usr/lib/x86_64-linux-gnu/libclang-14.so.1",
]


def load_clang():
    try:
        import clang.cindex as ci
    except ImportError:
        sys.exit(
            "gen-driver-api.py: the libclang Python bindings are missing.\n"
            "  On Debian/Ubuntu: apt-get install python3-clang-14 libclang1-14\n"
            "  and run this script with /usr/bin/python3 (the bindings are installed\n"
            "  for the system interpreter, not for pyenv/venv ones)."
        )
    for path in LIBCLANG_CANDIDATES:
        if os.path.exists(path):
            ci.Config.set_library_file(path)
            return ci
    sys.exit(
        "gen-driver-api.py: libclang.so not found (looked in %s).\n"
        "  On Debian/Ubuntu: apt-get install libclang1-14" % ", ".join(LIBCLANG_CANDIDATES)
    )


def parse_header(ci, include_dir, header):
    index = ci.Index.create()
    args = ["-x", "c", "-std=gnu11", "-I" + include_dir, "-D__CUDA_API_VERSION_INTERNAL"]
    tu = index.parse(os.path.join(include_dir, header), args=args)
    errors = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
    if errors:
        sys.exit("gen-driver-api.py: %s does not parse: %s" % (header, errors[0]))
    return tu


def read_annot(path):
    """Annotation lines: NAME KIND [comment].  KIND is one of
    local (answered in the guest), sync (one round trip), async
    (fire-and-forget, errors deferred to the next synchronizing call),
    special (hand-written protocol, e.g. module loads and launches)."""
    annot = {}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2 or parts[1] not in ("local", "sync", "async", "special"):
                sys.exit("%s:%d: expected 'NAME local|sync|async|special'" % (path, lineno))
            if parts[0] in annot:
                sys.exit("%s:%d: %s annotated twice" % (path, lineno, parts[0]))
            annot[parts[0]] = parts[1]
    return annot


def functions(ci, tu):
    out = {}
    for c in tu.cursor.get_children():
        if c.kind == ci.CursorKind.FUNCTION_DECL and c.spelling.startswith("cu"):
            params = [(p.type.spelling, p.spelling or "a%d" % i)
                      for i, p in enumerate(c.get_arguments())]
            out[c.spelling] = (c.result_type.spelling, params,
                               tuple(p.type.get_canonical().spelling
                                     for p in c.get_arguments()))
    return out


def results(ci, tu):
    """CUresult enumerators with their doc comment's first sentence."""
    out = []
    for c in tu.cursor.walk_preorder():
        if c.kind == ci.CursorKind.ENUM_DECL and c.spelling == "cudaError_enum":
            for e in c.get_children():
                text = (e.brief_comment or e.spelling).replace("\\", "").replace('"', "'")
                out.append((e.spelling, e.enum_value, " ".join(text.split())))
            break
    return out


def pfn_typedefs(ci, tu):
    """PFN_<name>_v<ver>[_ptds|_ptsz] -> (name, ver, ptds, canonical param types)."""
    out = []
    for c in tu.cursor.get_children():
        if c.kind != ci.CursorKind.TYPEDEF_DECL or not c.spelling.startswith("PFN_cu"):
            continue
        spelled = c.spelling[4:]
        ptds = 0
        for suf in ("_ptds", "_ptsz"):
            if spelled.endswith(suf):
                ptds = 1
                spelled = spelled[: -len(suf)]
        name, sep, ver = spelled.rpartition("_v")
        if not sep or not ver.isdigit():
            continue
        fn = c.underlying_typedef_type.get_canonical().get_pointee()
        sig = tuple(a.spelling for a in fn.argument_types())
        out.append((name, int(ver), ptds, sig))
    return out


def proc_table(funcs, pfns):
    """Resolves every PFN version to the real symbol that implements it.

    Candidates for name N are N, N_v2, N_v3, N_v4 (and with _ptds/_ptsz for
    per-thread requests).  A version maps to the candidate whose canonical
    signature equals the PFN's; where several candidates share one signature
    (cuDevicePrimaryCtxRelease and _v2), the k-th oldest version with that
    signature maps to the k-th oldest candidate, the newest candidate taking
    any surplus."""
    by_name = {}
    for name, ver, ptds, sig in pfns:
        by_name.setdefault((name, ptds), []).append((ver, sig))
    rows = []
    for (name, ptds), versions in sorted(by_name.items()):
        cands = []
        for suffix in ("", "_v2", "_v3", "_v4"):
            base = name + suffix
            if ptds:
                for p in ("_ptds", "_ptsz"):
                    if base + p in funcs:
                        cands.append(base + p)
            elif base in funcs:
                cands.append(base)
        groups = {}
        for ver, sig in sorted(versions):
            groups.setdefault(sig, []).append(ver)
        for sig, vers in groups.items():
            match = [c for c in cands if funcs[c][2] == sig]
            if not match:
                continue  # a PFN with no exported implementation (none in 13.0)
            for k, ver in enumerate(vers):
                rows.append((name, ver, ptds, match[min(k, len(match) - 1)]))
    return sorted(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuda-include", default=os.path.join(
        os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include"))
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--annot", default=os.path.join(here, "..", "guestlib", "driver-api.annot"))
    ap.add_argument("--outdir", default=os.path.join(here, "..", "guestlib"))
    opt = ap.parse_args()

    ci = load_clang()
    tu = parse_header(ci, opt.cuda_include, "cudaTypedefs.h")  # includes cuda.h
    funcs = functions(ci, tu)
    funcs.update(functions(ci, parse_header(ci, opt.cuda_include, "cudaProfiler.h")))
    pfns = pfn_typedefs(ci, tu)
    annot = read_annot(opt.annot)
    for name in annot:
        if name not in funcs:
            sys.exit("gen-driver-api.py: %s is annotated but cuda.h declares no such symbol" % name)

    version = "?"
    with open(os.path.join(opt.cuda_include, "cuda.h")) as f:
        for line in f:
            if line.startswith("#define CUDA_VERSION "):
                version = line.split()[2]
    head = ("/* Generated by scripts/gen-driver-api.py from cuda.h, cudaProfiler.h and\n"
            " * cudaTypedefs.h (CUDA_VERSION %s) and guestlib/driver-api.annot; do not edit. */\n" % version)

    kinds = {"local": "LOCAL", "sync": "SYNC", "async": "ASYNC", "special": "SPECIAL"}
    with open(os.path.join(opt.outdir, "driver-api.def"), "w") as out:
        out.write(head)
        out.write(
            "/* Every driver symbol the header declares, as the driver itself names it.\n"
            " * GUEST_API_IMPL(name, kind, ret, (params)): hand-written in guestlib/ (kind:\n"
            " * LOCAL answered in the guest, SYNC one round trip, ASYNC fire-and-forget,\n"
            " * SPECIAL own protocol).  GUEST_API_STUB(name, ret, (params)): returns\n"
            " * CUDA_ERROR_NOT_SUPPORTED and logs its name once.  %d symbols, %d implemented. */\n"
            % (len(funcs), len(annot)))
        for name in sorted(funcs):
            ret, params, _ = funcs[name]
            plist = ", ".join("%s %s" % (t, n) if not t.endswith("*") else "%s%s" % (t, n)
                              for t, n in params) or "void"
            if name in annot:
                out.write("GUEST_API_IMPL(%s, %s, %s, (%s))\n" % (name, kinds[annot[name]], ret, plist))
            else:
                out.write("GUEST_API_STUB(%s, %s, (%s))\n" % (name, ret, plist))

    with open(os.path.join(opt.outdir, "driver-trace.def"), "w") as out:
        out.write(head)
        out.write(
            "/* GUEST_TRACE(name, (params), (args)): every implemented symbol that returns a\n"
            " * CUresult, with its parameter list and the names to call it with, for the\n"
            " * guest's failure trace (guestlib/trace.c). */\n")
        for name in sorted(funcs):
            ret, params, _ = funcs[name]
            if name not in annot or ret != "CUresult":
                continue
            plist = ", ".join("%s %s" % (t, n) if not t.endswith("*") else "%s%s" % (t, n)
                              for t, n in params) or "void"
            out.write("GUEST_TRACE(%s, (%s), (%s))\n" % (name, plist, ", ".join(n for _, n in params)))

    with open(os.path.join(opt.outdir, "cuda-result.def"), "w") as out:
        out.write(head)
        out.write("/* GUEST_RESULT(name, value, \"description\"): every CUresult, for\n"
                  " * cuGetErrorName and cuGetErrorString. */\n")
        for name, value, text in results(ci, tu):
            out.write("GUEST_RESULT(%s, %d, \"%s\")\n" % (name, value, text))

    rows = proc_table(funcs, pfns)
    with open(os.path.join(opt.outdir, "driver-proc.def"), "w") as out:
        out.write(head)
        out.write(
            "/* What cuGetProcAddress returns: GUEST_PROC(\"name\", version, per_thread, symbol),\n"
            " * sorted by name then version.  A request (name, v, flags) takes the row with\n"
            " * the highest version <= v, per_thread when flags ask for\n"
            " * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM and such a row exists. */\n")
        for name, ver, ptds, sym in rows:
            out.write("GUEST_PROC(\"%s\", %d, %d, %s)\n" % (name, ver, ptds, sym))


if __name__ == "__main__":
    main()
