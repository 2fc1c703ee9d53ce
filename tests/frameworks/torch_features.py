"""torch_features.py: PyTorch features that need more than plain forwarding.

usage: python3 torch_features.py alloc|graph
  alloc  allocator traffic under whatever PYTORCH_CUDA_ALLOC_CONF the runner
         set (expandable_segments:True reaches cuMemCreate/cuMemMap;
         backend:cudaMallocAsync reaches the stream-ordered pools): tensors
         grown, freed, regrown, a small MLP's forward and backward
  graph  torch.cuda.graphs: capture of a small model's inference, replays
         with new inputs (the GPU-bound serving mode)
Prints deterministic results (rounded) and "done".
"""
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


if __name__ == "__main__":
    {"alloc": alloc, "graph": graph}[sys.argv[1]]()
    print("done")
