#!/usr/bin/env python3
"""torch_be.py: a PyTorch best-effort (training) tenant of the pair benchmark.

Trains gpt2 (GPT2Config small, batch 8 x 512 tokens), resnet50 (batch 64,
224x224) or bert (BERT-base masked LM, batch 16 x 128) from random weights
on random data with AdamW; each step ends with a synchronisation so its
time is real.  After --warmup steps it creates the --ready file; it stops
at SIGTERM or SIGINT (between steps) or after --max-seconds, and writes the
BE CSV `iter,start_ns,end_ns`.  --amp runs the forward in bfloat16 autocast.

  torch_be.py --model gpt2|resnet50|bert --out CSV [--batch N] [--ready FILE]
              [--warmup 5] [--max-seconds 600] [--no-amp] [--device cuda]
(--device cpu runs the same code without a GPU, to test it.)
"""
import argparse
import signal
import sys

import torch_common as tc

DEFAULT_BATCH = {"gpt2": 8, "resnet50": 64, "bert": 16}
stop = False


def on_signal(sig, frame):
    global stop
    stop = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, choices=sorted(DEFAULT_BATCH))
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--ready")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--max-seconds", type=float, default=600)
    ap.add_argument("--no-amp", action="store_true")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    import torch
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = torch.device(a.device)
    m, x, loss_of = tc.build(torch, a.model, a.batch or DEFAULT_BATCH[a.model], torch.float32,
                             dev, train=True)
    m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    sync = tc.syncer(torch, dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=not a.no_amp):
            loss = loss_of(x)
        loss.backward()
        opt.step()
        sync()

    for _ in range(a.warmup):
        step()
    if a.ready:
        open(a.ready, "w").close()
    rows = []
    begin = tc.now_ns()
    limit = begin + int(a.max_seconds * 1e9)
    while not stop and tc.now_ns() < limit:
        s = tc.now_ns()
        step()
        rows.append((s, tc.now_ns()))
    tc.write_csv(a.out, "iter,start_ns,end_ns", rows)
    if rows:
        secs = (rows[-1][1] - rows[0][0]) / 1e9
        print(f"torch_be: {a.model}: {len(rows)} steps in {secs:.2f} s ({len(rows) / secs:.2f}/s)",
              file=sys.stderr)


if __name__ == "__main__":
    main()
