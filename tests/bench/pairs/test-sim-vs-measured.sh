#!/bin/sh
# test-sim-vs-measured.sh: bench-pairs' simulator table on a whole-run trace.
#
# A synthetic run in the form tallyd --trace writes (20 LC requests of 4
# kernels, a BE loop of 3-kernel steps, in completion order) with the
# step's lc.csv and be.csv: bench-pairs' simulate() must run tally-sim
# --run-trace on it, say how many requests and steps it cut, and mark a
# mode whose measured numbers match the simulation "ok" and one that is 3x
# off "differs" with the model's limit as the reason.  Prints TAP.
B=${TALLY_BUILDDIR:-.}
S=${TALLY_SRCDIR:-..}
echo "1..1"
if ! command -v python3 >/dev/null 2>&1; then echo "ok 1 # SKIP python3 not found"; exit 0; fi
tmp=$(mktemp -d /tmp/tally-sim-vs-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if TMP=$tmp SIM=$B/sim/tally-sim TOPDIR=$S python3 - >"$tmp/log" 2>&1 <<'PY'
import importlib.machinery, importlib.util, os, subprocess, sys, types
tmp, top = os.environ["TMP"], os.environ["TOPDIR"]
d = os.path.join(tmp, "raw", "p", "tallyd-tally")
os.makedirs(d)
recs, lc, be, t0 = [], ["req,arrival_ns,start_ns,end_ns"], ["iter,start_ns,end_ns"], 10**9
for r in range(20):
    arr = t0 + r * 1000000 + (r % 3) * 100000
    s = end = arr + 5000
    for k in range(4):
        sub = s + 2000 * k
        st = max(sub + 6000, end)
        end = st + 30000
        recs.append((end, f"lc 0x{0x100 + k:x} 132 256 0 0 30000 0 osp # class=lc "
                          f"submit={sub} issue={sub} start={st} end={end}"))
    lc.append(f"{r},{arr},{s},{end + 4000}")
t = t0 - 2000000
for i in range(60):
    s = end = t
    for k in range(3):
        sub = s + 1000 * k
        st = max(sub + 5000, end)
        end = st + 400000
        recs.append((end, f"be 0x{0x200 + k:x} 264 128 0 0 400000 0 os # class=be "
                          f"submit={sub} issue={sub} start={st} end={end}"))
    be.append(f"{i},{s},{end + 3000}")
    t = end + 10000
trace = os.path.join(d, "tallyd-trace.ktr")
open(trace, "w").write("# tallyd kernel trace\n" + "\n".join(l for _, l in sorted(recs)) + "\n")
open(os.path.join(d, "lc.csv"), "w").write("\n".join(lc) + "\n")
open(os.path.join(d, "be.csv"), "w").write("\n".join(be) + "\n")
sim = subprocess.run([os.environ["SIM"], "--run-trace", trace, "--lc-csv", os.path.join(d, "lc.csv"),
                      "--be-csv", os.path.join(d, "be.csv"), "--policy", "timeslice,mps",
                      "--csv", "--quiet", "--launch-from-trace"], capture_output=True, text=True,
                     check=True)
rows = [l.split(",") for l in sim.stdout.split()]
got = {l[1]: dict(zip(rows[0], l)) for l in rows[1:]}
ratio = lambda p: 1 + float(got[p]["exec_p99_overhead_pct"]) / 100
summary = os.path.join(tmp, "summary.csv")
with open(summary, "w") as f:
    f.write("pair,mode,exec_p99_vs_alone,be_tput_norm\np,alone,1,\n")
    f.write(f"p,mps,{ratio('mps')},{got['mps']['be_tput']}\n")
    f.write(f"p,timeslice,{3 * ratio('timeslice')},{got['timeslice']['be_tput']}\n")
loader = importlib.machinery.SourceFileLoader("bench_pairs", os.path.join(top, "scripts", "bench-pairs"))
spec = importlib.util.spec_from_loader("bench_pairs", loader)
bp = importlib.util.module_from_spec(spec)
loader.exec_module(bp)
bench = types.SimpleNamespace(
    out=tmp, tally_sim=os.environ["SIM"], traces=[("p", "tallyd:tally", trace)],
    rows=[("p", "tallyd:tally", "ok", "raw/p/tallyd-tally/lc.csv", "raw/p/tallyd-tally/be.csv")],
    a=types.SimpleNamespace(modes=["alone", "timeslice", "mps", "tallyd:tally"], seed=1, load=0.5,
                            arrivals="bursty", mean_gap_ms=None))
md = open(bp.simulate(bench, [{"name": "p", "sim": ""}], summary)).read()
print(md)
assert "20 requests (80 kernels, 0 outside them)" in md, "requests"
assert "60 steps (180 kernels" in md, "steps"
assert "BUNDLED" not in md
assert "- p: tallyd's whole-run trace of `tallyd:tally` (what ran here)" in md, "source"
assert "launch latency" in md and "timed launches" in md, "launch source"
mps = [l for l in md.splitlines() if l.startswith("| p | mps |")][0]
ts = [l for l in md.splitlines() if l.startswith("| p | timeslice |")][0]
assert mps.endswith("| ok |"), mps
assert "differs (p99" in ts and "time-slicing is modelled" in ts, ts
# A pair whose tallyd step failed: the bundled traces, and the reason, on its line.
bench.traces = []
bench.rows = [("p", "tallyd:tally", "failed: BE exit -11: a tenant crashed", "-", "-")]
md = open(bp.simulate(bench, [{"name": "p", "sim": "bert-b8-graph.ktr gpt2-train.ktr"}],
                      summary)).read()
src = [l for l in md.splitlines() if l.startswith("- p: ")]
assert len(src) == 1 and "BUNDLED SYNTHETIC traces `bert-b8-graph.ktr`" in src[0], src
assert "its tallyd steps did not finish: `tallyd:tally` failed: BE exit -11" in src[0], src
PY
then echo "ok 1 - simulator table on a whole-run trace"; else
  echo "not ok 1 - simulator table on a whole-run trace"; sed 's/^/# /' "$tmp/log" | tail -40; fi
