"""torch_common.py: what the PyTorch workloads of the pair benchmark share.

Models are built from their configurations with random weights (nothing is
downloaded): BERT-base (transformers BertConfig), GPT-2 small (GPT2Config),
ResNet-50 (torchvision, weights=None).  Times are CLOCK_MONOTONIC ns
(time.monotonic_ns on Linux), the clock every workload of the benchmark
writes, so the LC's and the BE's CSVs share one time axis.  The CSV formats
are the ones tally-pairs reads (tests/bench/README.md):
  LC: req,arrival_ns,start_ns,end_ns     BE: iter,start_ns,end_ns
A workload that cannot run a variant in a mode (a CUDA graph that does not
capture) prints "unsupported: <reason>" on stderr and exits 77.
"""
import os
import sys
import time

UNSUPPORTED = 77


def unsupported(prog, why):
    msg = " ".join(str(why).split())[:300]
    print(f"unsupported: {msg}", file=sys.stderr, flush=True)
    print(f"{prog}: unsupported: {msg}", file=sys.stderr, flush=True)
    sys.exit(UNSUPPORTED)


def dtype_of(torch, name):
    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def build(torch, model, batch, dtype, device, train):
    """(module, make_inputs(), step(inputs)) for a model name; step returns
    a tensor (inference) or a loss (training)."""
    if model in ("bert", "bert-large"):
        from transformers import BertConfig, BertForMaskedLM, BertModel
        cfg = BertConfig() if model == "bert" else BertConfig(
            hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
        seq = 128
        m = (BertForMaskedLM(cfg) if train else BertModel(cfg)).to(device=device, dtype=dtype)
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), device=device)
        if train:
            return m, ids, lambda x: m(input_ids=x, labels=x).loss
        return m, ids, lambda x: m(input_ids=x).last_hidden_state
    if model == "resnet50":
        import torchvision
        m = torchvision.models.resnet50(weights=None).to(device=device, dtype=dtype)
        if not train:
            m = m.to(memory_format=torch.channels_last)
        x = torch.randn(batch, 3, 224, 224, device=device, dtype=dtype)
        if not train:
            x = x.to(memory_format=torch.channels_last)
        if train:
            y = torch.randint(0, 1000, (batch,), device=device)
            loss = torch.nn.CrossEntropyLoss()
            return m, x, lambda x: loss(m(x).float(), y)
        return m, x, lambda x: m(x)
    if model == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config()
        m = GPT2LMHeadModel(cfg).to(device=device, dtype=dtype)
        seq = 512 if train else 32
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), device=device)
        if train:
            return m, ids, lambda x: m(input_ids=x, labels=x).loss
        return m, ids, lambda x: m(input_ids=x).logits
    raise SystemExit(f"unknown model {model}")


def syncer(torch, dev):
    """Waits for the work issued so far: the current CUDA stream, or nothing on the CPU."""
    if dev.type == "cuda":
        stream = torch.cuda.current_stream(dev)
        return stream.synchronize
    return lambda: None


def read_offsets(path):
    with open(path) as f:
        return [int(line) for line in f if line.strip()]


def now_ns():
    return time.monotonic_ns()


def sleep_until(t_ns):
    """Sleeps (never spins: the LC must not take CPU from the BE) until t_ns."""
    while True:
        d = t_ns - time.monotonic_ns()
        if d <= 0:
            return
        time.sleep(d / 1e9)


def ready_then_go(ready, go):
    """The LC's start handshake: creates `ready` (when given), then sleeps
    until the file `go` exists (when given; polled every millisecond)."""
    if ready:
        open(ready, "w").close()
    while go and not os.path.exists(go):
        time.sleep(0.001)


def write_csv(path, header, rows):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(header + "\n")
        for i, r in enumerate(rows):
            f.write(f"{i}," + ",".join(str(v) for v in r) + "\n")
    os.replace(tmp, path)
