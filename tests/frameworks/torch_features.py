"""torch_features.py: PyTorch features that need more than plain forwarding.

usage: python3 torch_features.py alloc|graph|train-adamw|amp-bf16|compile
  alloc  allocator traffic under whatever PYTORCH_CUDA_ALLOC_CONF the runner
         set (expandable_segments:True reaches cuMemCreate/cuMemMap;
         backend:cudaMallocAsync reaches the stream-ordered pools): tensors
         grown, freed, regrown, a small MLP's forward and backward
  graph  torch.cuda.graphs: capture of a small model's inference, replays
         with new inputs (the GPU-bound serving mode)
  train-adamw  a small transformer block, 20 AdamW steps in fp32 with
         deterministic algorithms on; losses rounded to 4 decimals (the same
         kernels in the same order give the same bits, so 4 decimals leave
         room only for nothing: any difference is Tally's)
  amp-bf16  autocast bf16 training steps of an MLP; losses rounded to 2
         decimals (bf16 keeps 8 bits of mantissa: about 2 decimal digits)
  compile  torch.compile of a small model (Triton kernels generated, loaded
         and launched through the driver API); outputs rounded to 4 decimals
         (TORCHINDUCTOR_CACHE_DIR is set by the runner so runs do not share
         compiled kernels)
Prints deterministic results (rounded) and "done".
"""
import os
import sys

import torch


def alloc():
    torch.manual_seed(0)
    dev = torch.device("cuda")
    keep = []
    for i in range(12):  # growing and shrinking segments
        keep.append(torch.full((1 << (14 + i % 6),), float(i), device=dev))
        if i % 3 == 2:
            keep.pop(0)
    print("sum", round(float(sum(t.sum().item() for t in keep)), 1))
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).to(dev)
    x = torch.randn(256, 64, device=dev)
    loss = model(x).square().mean()
    loss.backward()
    print("loss", round(loss.item(), 4))
    print("grad", round(float(model[0].weight.grad.abs().sum().item()), 3))
    del keep
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    print("backend", torch.cuda.get_allocator_backend())


def graph():
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 4)).to(dev).eval()
    static_in = torch.zeros(16, 32, device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):  # warm-up, as the documentation asks
            model(static_in)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g):
        static_out = model(static_in)
    total = 0.0
    for i in range(5):
        static_in.copy_(torch.full((16, 32), 0.1 * i, device=dev))
        g.replay()
        total += float(static_out.sum().item())
    with torch.no_grad():
        ref = sum(float(model(torch.full((16, 32), 0.1 * i, device=dev)).sum().item()) for i in range(5))
    print("replays", round(total, 3))
    print("graph matches eager", abs(total - ref) < 1e-3)


def train_adamw():
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before the first GEMM
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    block = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0,
                                             batch_first=True).to(dev)
    head = torch.nn.Linear(64, 10).to(dev)
    params = list(block.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)
    x = torch.randn(8, 16, 64, device=dev)
    y = torch.randint(0, 10, (8,), device=dev)
    for step in range(20):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(head(block(x).mean(dim=1)), y)
        loss.backward()
        opt.step()
        print("step", step, "loss", f"{loss.item():.4f}")


def amp_bf16():
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.GELU(), torch.nn.Linear(256, 16)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(64, 128, device=dev)
    y = torch.randn(64, 16, device=dev)
    for step in range(10):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        loss.backward()
        opt.step()
        print("step", step, "loss", f"{loss.item():.2f}")


def compiled():
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.SiLU(), torch.nn.LayerNorm(64),
                                torch.nn.Linear(64, 8)).to(dev).eval()

    def fused(a, b):
        return torch.sin(a) * torch.cos(b) + (a * b).relu()

    cmodel = torch.compile(model)
    cfused = torch.compile(fused)
    with torch.no_grad():
        x = torch.randn(128, 32, device=dev)
        out = cmodel(x)
        ref = model(x)
        a, b = torch.randn(4096, device=dev), torch.randn(4096, device=dev)
        f = cfused(a, b)
    print("model sum", f"{out.sum().item():.4f}")
    print("model matches eager", bool(torch.allclose(out, ref, atol=1e-4)))
    print("fused sum", f"{f.sum().item():.4f}")
    print("fused matches eager", bool(torch.allclose(f, fused(a, b), atol=1e-5)))


if __name__ == "__main__":
    {"alloc": alloc, "graph": graph, "train-adamw": train_adamw, "amp-bf16": amp_bf16,
     "compile": compiled}[sys.argv[1]]()
    print("done")
