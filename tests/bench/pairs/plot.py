#!/usr/bin/env python3
"""plot.py: the pair benchmark's PNG plots, from its CSVs (scripts/bench-pairs calls it).

  cdf-PAIR.png   per pair: the LC's latency CDF in every mode, execution
                 (first launch -> sync returned) and end-to-end (arrival ->
                 completion), log-scale milliseconds
  tradeoff.png   per pair: LC execution p99 overhead against its alone run
                 versus the BE's normalised throughput, one point per mode
                 (lower right is better)
Input: the manifest (raw CSV paths, relative to its folder) and the summary
CSV that tally-pairs writes.  Without matplotlib it says so and exits 0.

  plot.py --manifest DIR/manifest.csv --summary DIR/summary.csv --outdir DIR/plots
"""
import argparse
import csv
import os
import sys


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def latencies(path):
    """(execution ms, end-to-end ms) lists from an LC CSV; None if unreadable."""
    try:
        ex, e2e = [], []
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                end = int(r["end_ns"])
                ex.append((end - int(r["start_ns"])) / 1e6)
                e2e.append((end - int(r["arrival_ns"])) / 1e6)
        return ex, e2e
    except (OSError, KeyError, ValueError):
        return None


def slug(name):
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in name)


def color_of(mode, modes):
    """One color per mode, the same in every figure."""
    return f"C{modes.index(mode) % 10}"


def cdf_plot(plt, ticker, pair, runs, out, modes):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    for ax, idx, title in ((axes[0], 0, "execution (first launch -> sync)"),
                           (axes[1], 1, "end-to-end (arrival -> completion)")):
        lo, hi = float("inf"), 0.0
        for mode, lat in runs:
            v = sorted(lat[idx])
            if not v:
                continue
            lo, hi = min(lo, v[0]), max(hi, v[-1])
            y = [(i + 1) / len(v) for i in range(len(v))]
            p99 = v[max(0, -(-99 * len(v) // 100) - 1)]  # nearest rank, as tally-pairs
            ax.step(v, y, where="post", label=f"{mode} (p99 {p99:.2f} ms)", color=color_of(mode, modes),
                    linewidth=2.2 if mode == "alone" else 1.4)
        # Log scale when the latencies span more than a decade; below that a
        # log axis would have no labelled tick at all.
        wide = lo > 0 and hi / lo > 10
        if wide:
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: f"{x:g}"))
            ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        else:
            ax.xaxis.set_major_locator(ticker.MaxNLocator(6))
        ax.legend(loc="lower right", fontsize=8)
        ax.set_xlabel("LC latency, ms" + (" (log scale)" if wide else ""))
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.axhline(0.99, color="grey", linestyle=":", linewidth=1)
    axes[0].set_ylabel("fraction of requests")
    fig.suptitle(f"{pair}: LC latency CDF per mode (dotted line: p99)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def tradeoff_plot(plt, by_pair, out, modes):
    n = len(by_pair)
    fig, axes = plt.subplots(1, n, figsize=(max(7.0, 5.5 * n), 4.8), squeeze=False)
    for ax, (pair, rows) in zip(axes[0], by_pair.items()):
        for r in rows:
            try:
                x = float(r["be_tput_norm"])
                y = (float(r["exec_p99_vs_alone"]) - 1) * 100
            except (KeyError, ValueError):
                continue
            ax.scatter([x], [y], s=40, color=color_of(r["mode"], modes))
            ax.annotate(r["mode"], (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
        ax.axhline(0, color="grey", linewidth=1)
        ax.set_xlim(0, 1.3)  # room for the labels of points near 1
        ax.set_xlabel("BE throughput, normalised to BE alone")
        ax.set_ylabel("LC execution p99 overhead vs alone, %")
        ax.set_title(pair, fontsize=10)
        ax.grid(True, alpha=0.3)
    fig.suptitle("Trade-off per mode: LC p99 overhead (lower is better)\n"
                 "vs BE throughput (right is better)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--summary", required=True)
    ap.add_argument("--outdir", required=True)
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker as ticker
    except ImportError:
        print("plot.py: matplotlib is not installed: plots skipped (pip install matplotlib)")
        return 0
    base = os.path.dirname(os.path.abspath(a.manifest))
    os.makedirs(a.outdir, exist_ok=True)
    runs, by_pair, modes = {}, {}, []
    for r in read_rows(a.manifest):
        if r["mode"] not in modes:
            modes.append(r["mode"])
        if r["status"] != "ok" or r["lc_csv"] in ("", "-"):
            continue
        lat = latencies(os.path.join(base, r["lc_csv"]))
        if lat:
            runs.setdefault(r["pair"], []).append((r["mode"], lat))
    for r in read_rows(a.summary):
        if r["status"] == "ok" and r["mode"] != "alone" and not r["mode"].startswith("tallyd-alone"):
            by_pair.setdefault(r["pair"], []).append(r)
    made = []
    for pair, rs in runs.items():
        out = os.path.join(a.outdir, f"cdf-{slug(pair)}.png")
        cdf_plot(plt, ticker, pair, rs, out, modes)
        made.append(out)
    if by_pair:
        out = os.path.join(a.outdir, "tradeoff.png")
        tradeoff_plot(plt, by_pair, out, modes)
        made.append(out)
    print(f"plot.py: wrote {len(made)} PNG(s) in {a.outdir}" if made else "plot.py: nothing to plot")
    return 0


if __name__ == "__main__":
    sys.exit(main())
