#!/usr/bin/env python3
"""jax_step.py: a JAX jit training step, timed step by step (scripts/fw-speed).

A 4-layer MLP (width --width, batch --batch) trained with plain SGD on random
data; each step ends with block_until_ready, so its time is real.  After
--warmup steps it runs until --max-seconds and writes `iter,start_ns,end_ns`
(the pair benchmark's BE CSV) to --out.

  jax_step.py --out CSV [--width 2048] [--batch 256] [--warmup 5]
              [--max-seconds 10]
"""
import argparse
import os
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402


def loss_fn(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = jnp.tanh(h @ w + b)
    w, b = params[-1]
    return jnp.mean((h @ w + b - y) ** 2)


@jax.jit
def step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, grads)], loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--max-seconds", type=float, default=10)
    a = ap.parse_args()
    k = jax.random.split(jax.random.PRNGKey(0), 6)
    x = jax.random.normal(k[0], (a.batch, a.width))
    y = jax.random.normal(k[1], (a.batch, 1))
    dims = [a.width, a.width, a.width, a.width, 1]
    params = [(jax.random.normal(k[2 + i], (dims[i], dims[i + 1])) * (1 / dims[i]) ** 0.5,
               jnp.zeros(dims[i + 1])) for i in range(4)]
    for _ in range(a.warmup):
        params, loss = step(params, x, y)
        loss.block_until_ready()
    rows, t_end = [], time.monotonic() + a.max_seconds
    while time.monotonic() < t_end:
        t0 = time.monotonic_ns()
        params, loss = step(params, x, y)
        loss.block_until_ready()
        rows.append((len(rows), t0, time.monotonic_ns()))
    with open(a.out, "w") as f:
        f.write("iter,start_ns,end_ns\n")
        f.writelines(f"{i},{s},{e}\n" for i, s, e in rows)
    print(f"jax_step: {len(rows)} steps in {a.max_seconds:g} s")


if __name__ == "__main__":
    main()
