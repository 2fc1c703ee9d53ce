#!/usr/bin/env python3
"""graph_replay.py: how long a captured CUDA graph takes on the GPU, and what it holds.

Replay (a GPU and PyTorch): captures one inference forward of a model
(torch_common's bert or resnet50; --batch, --dtype) in a CUDA graph, then
replays it --replays times after --warmup.  Each replay is bracketed by two
CUDA events and the second is synchronised; one line gives the GPU time
between the events and the wall time of record, replay, record and sync
(p50, p99, ms).  Run it natively and under tally-run to compare the two.
  --sleep-cycles N  a torch.cuda._sleep(N) kernel before the first event, so
                    the replay is queued behind it and the events time the
                    graph's execution alone, not the host's gap before it
  --high-priority   capture and replay on streams of the highest priority
  --pin-mb N        first map N MiB of pinned host memory into the context
                    (page-locked, device-mapped, kept to the end), as a daemon
                    holding its tenants' rings and pinned memory does
  --hold-mb N       first allocate N MiB of device memory in 2 MiB pieces,
                    kept to the end (more of the address space in use)
  --dot FILE        write the graph's cudaGraphDebugDotPrint (verbose)

Compare (no GPU): --compare A.dot B.dot says whether two dumps describe the
same graph: node types and counts, edges, and every node's text (a kernel's
name, grid, block, shared memory, parameters) with addresses (hexadecimal
numbers of 8 or more digits) and node priorities masked, since those differ
between any two processes.  Prints the counts and the first differing
lines; exit 0 same, 1 different, 2 unreadable.
"""
import argparse
import difflib
import re
import sys
import time

ADDR = re.compile(r"0x[0-9A-Fa-f]{8,}")
PRIO = re.compile(r"\{priority \| -?\d+\}")
NODE = re.compile(r'label="\{([A-Z_]+)')


def masked(text):
    return PRIO.sub("{priority | P}", ADDR.sub("ADDR", text)).splitlines()


def summary(text):
    kinds = {}
    for k in NODE.findall(text):
        kinds[k] = kinds.get(k, 0) + 1
    return kinds, text.count("->")


def compare(a_path, b_path):
    try:
        with open(a_path) as f:
            a = f.read()
        with open(b_path) as f:
            b = f.read()
    except OSError as e:
        print(f"graph_replay: {e}", file=sys.stderr)
        return 2
    for path, text in ((a_path, a), (b_path, b)):
        kinds, edges = summary(text)
        nodes = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "no nodes"
        print(f"{path}: {nodes}; {edges} edges")
    diff = list(difflib.unified_diff(masked(a), masked(b), a_path, b_path, lineterm="", n=0))
    if not diff:
        print("same graph (addresses and node priorities masked)")
        return 0
    print(f"different: {sum(1 for d in diff if d[:1] in '+-' and d[:3] not in ('+++', '---'))} "
          "lines differ; the first:")
    print("\n".join(diff[:40]))
    return 1


def quantile(v, p):
    s = sorted(v)
    return s[int(p * (len(s) - 1))]


def replay(a):
    import torch
    import torch_common as tc
    dev = torch.device("cuda")
    held = []  # --pin-mb / --hold-mb: kept alive until the replays are done
    if a.pin_mb:
        held.append(torch.empty(a.pin_mb << 20, dtype=torch.uint8, pin_memory=True))
    held += [torch.empty(2 << 20, dtype=torch.uint8, device=dev) for _ in range(a.hold_mb // 2)]
    m, x, fwd = tc.build(torch, a.model, a.batch, tc.dtype_of(torch, a.dtype), dev, train=False)
    m.eval()
    new_stream = (lambda: torch.cuda.Stream(priority=-100)) if a.high_priority else torch.cuda.Stream
    run_s = new_stream() if a.high_priority else torch.cuda.current_stream()
    with torch.cuda.stream(run_s), torch.no_grad():
        side = new_stream()
        side.wait_stream(run_s)
        with torch.cuda.stream(side):
            for _ in range(3):
                fwd(x)
        run_s.wait_stream(side)
        g = torch.cuda.CUDAGraph(keep_graph=True)
        if a.dot:
            g.enable_debug_mode()
        with torch.cuda.graph(g, stream=new_stream() if a.high_priority else None):
            fwd(x)
        g.instantiate()
        g.replay()
        run_s.synchronize()
        if a.dot:
            g.debug_dump(a.dot)
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(a.warmup + a.replays)]
        gpu, wall = [], []
        for i, (e0, e1) in enumerate(ev):
            t0 = time.perf_counter_ns()
            if a.sleep_cycles:
                torch.cuda._sleep(a.sleep_cycles)
            e0.record()
            g.replay()
            e1.record()
            e1.synchronize()
            t1 = time.perf_counter_ns()
            if i >= a.warmup:
                gpu.append(e0.elapsed_time(e1))
                wall.append((t1 - t0) / 1e6)
    print(f"graph_replay: {a.model} b{a.batch} {a.dtype}, stream priority {run_s.priority}, "
          f"sleep {a.sleep_cycles} cycles, pinned {a.pin_mb} MiB, held {a.hold_mb} "
          f"MiB, {len(gpu)} replays: GPU p50 {quantile(gpu, .5):.4f} "
          f"p99 {quantile(gpu, .99):.4f} ms; wall p50 {quantile(wall, .5):.4f} "
          f"p99 {quantile(wall, .99):.4f} ms")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--compare", nargs=2, metavar=("A.dot", "B.dot"))
    ap.add_argument("--model", default="bert", choices=["bert", "resnet50"])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--dtype", default="float16", choices=["float32", "float16", "bfloat16"])
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--replays", type=int, default=400)
    ap.add_argument("--sleep-cycles", type=int, default=0)
    ap.add_argument("--high-priority", action="store_true")
    ap.add_argument("--dot")
    ap.add_argument("--pin-mb", type=int, default=0)
    ap.add_argument("--hold-mb", type=int, default=0)
    a = ap.parse_args()
    if a.compare:
        return compare(*a.compare)
    if a.batch < 1 or a.replays < 1 or min(a.warmup, a.sleep_cycles, a.pin_mb, a.hold_mb) < 0:
        ap.error("--batch and --replays must be at least 1, --warmup, --sleep-cycles, --pin-mb "
                 "and --hold-mb at least 0")
    return replay(a)


if __name__ == "__main__":
    sys.exit(main())
