#!/usr/bin/env python3
"""torch_lc.py: a PyTorch latency-critical (inference) tenant of the pair benchmark.

Open loop: the harness gives arrival offsets (ns from the start, one per
line); each request is one forward pass (bert, resnet50) or, for
gpt2-decode, a 32-token prompt then --decode-steps single-token steps with
the KV cache, ending with a stream synchronisation.  One server, FIFO: a
request starts when it is due and the previous one is done; between
requests the process sleeps.  Execution latency = start of issue -> the
synchronisation returned; end-to-end = arrival -> the same.
--graph captures the forward in a CUDA graph (torch.cuda.CUDAGraph) and
replays it; if capture fails here (e.g. under a runtime that does not
support graphs), the run says "unsupported: <error>" and exits 77.
--ready/--go: the harness's start handshake; after the warm-up the LC
creates the --ready file, then sleeps until the --go file exists and only
then starts its arrival clock (the harness creates it when both tenants
of a step are ready).

  torch_lc.py --model bert|resnet50|gpt2-decode --batch 8 [--graph]
              --arrivals FILE --out CSV [--dtype float16] [--warmup 20]
              [--deadline-s S] [--decode-steps 16] [--device cuda]
              [--ready FILE --go FILE]
(--device cpu runs the same code without a GPU, to test it; no --graph there.)
"""
import argparse
import sys

import torch_common as tc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, choices=["bert", "bert-large", "resnet50", "gpt2-decode"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--graph", action="store_true")
    ap.add_argument("--arrivals", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", default="float16", choices=["float32", "float16", "bfloat16"])
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--deadline-s", type=float, default=0)
    ap.add_argument("--decode-steps", type=int, default=16)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--ready")
    ap.add_argument("--go")
    a = ap.parse_args()
    offsets = tc.read_offsets(a.arrivals)

    import torch
    torch.backends.cudnn.benchmark = True
    dev = torch.device(a.device)
    dtype = tc.dtype_of(torch, a.dtype)
    with torch.inference_mode():
        request = make_request(torch, a, dev, dtype, tc.syncer(torch, dev))
        for _ in range(a.warmup):
            request()
        tc.ready_then_go(a.ready, a.go)
        rows = serve(a, offsets, request)
    tc.write_csv(a.out, "req,arrival_ns,start_ns,end_ns", rows)
    if rows:
        mean = sum(r[2] - r[1] for r in rows) / len(rows) / 1e3
        print(f"torch_lc: {a.model} b{a.batch} {'graph' if a.graph else 'eager'}: "
              f"{len(rows)} of {len(offsets)} requests, mean execution {mean:.1f} us", file=sys.stderr)


def make_request(torch, a, dev, dtype, sync):
    if a.model == "gpt2-decode":
        if a.graph:
            tc.unsupported("torch_lc", "gpt2-decode grows its KV cache each step; no CUDA-graph variant")
        return gpt2_decode(torch, a, dev, dtype, sync)
    m, x, fwd = tc.build(torch, a.model, a.batch, dtype, dev, train=False)
    m.eval()
    if not a.graph:
        def eager():
            fwd(x)
            sync()
        return eager
    if dev.type != "cuda":
        tc.unsupported("torch_lc", f"CUDA graphs need a CUDA device, not {dev}")
    stream = torch.cuda.current_stream()
    try:
        side = torch.cuda.Stream()
        side.wait_stream(stream)
        with torch.cuda.stream(side):
            for _ in range(3):
                fwd(x)
        stream.wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fwd(x)
        g.replay()
        stream.synchronize()
    except Exception as e:  # capture is refused in some runtimes: report it, do not guess
        tc.unsupported("torch_lc", f"CUDA graph capture failed: {type(e).__name__}: {e}")

    def replay():
        g.replay()
        stream.synchronize()
    return replay


def gpt2_decode(torch, a, dev, dtype, sync):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config()
    m = GPT2LMHeadModel(cfg).to(device=dev, dtype=dtype).eval()
    prompt = torch.randint(0, cfg.vocab_size, (a.batch, 32), device=dev)

    def request():
        out = m(input_ids=prompt, use_cache=True)
        past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
        for _ in range(a.decode_steps):
            out = m(input_ids=tok, past_key_values=past, use_cache=True)
            past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
        sync()
    return request


def serve(a, offsets, request):
    rows = []
    t0 = tc.now_ns() + 1_000_000
    stop = t0 + int(a.deadline_s * 1e9) if a.deadline_s > 0 else None
    for off in offsets:
        due = t0 + off
        if stop is not None and (due >= stop or tc.now_ns() >= stop):
            break
        tc.sleep_until(due)
        start = tc.now_ns()
        request()
        rows.append((due, start, tc.now_ns()))
    return rows


if __name__ == "__main__":
    main()
