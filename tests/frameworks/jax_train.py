"""jax_train.py: JAX jit, grad and a small training loop on the GPU.

usage: python3 jax_train.py
Prints the backend, the loss after training (rounded) and "done".  A second,
deeper MLP (4 layers of 2048) is trained for 20 steps as well: its jit step
is large enough for XLA to run it as a command buffer, captured into a CUDA
graph XLA made (cuStreamBeginCaptureToGraph); its loss is rounded to 2
decimals (the autotuner may pick another GEMM algorithm from run to run).
"""
import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402


def loss_fn(params, x, y):
    w1, b1, w2, b2 = params
    h = jnp.tanh(x @ w1 + b1)
    return jnp.mean((h @ w2 + b2 - y) ** 2)


@jax.jit
def step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return [p - 0.05 * g for p, g in zip(params, grads)], loss


def deep_loss(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = jnp.tanh(h @ w + b)
    w, b = params[-1]
    return jnp.mean((h @ w + b - y) ** 2)


@jax.jit
def deep_step(params, x, y):
    loss, grads = jax.value_and_grad(deep_loss)(params, x, y)
    return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, grads)], loss


def deep():
    k = jax.random.split(jax.random.PRNGKey(1), 6)
    x = jax.random.normal(k[0], (256, 2048))
    y = jnp.sin(x[:, :1])
    dims = [2048, 2048, 2048, 2048, 1]
    params = [(jax.random.normal(k[2 + i], (dims[i], dims[i + 1])) * (1 / dims[i]) ** 0.5,
               jnp.zeros(dims[i + 1])) for i in range(4)]
    first = None
    for _ in range(20):
        params, loss = deep_step(params, x, y)
        first = float(loss) if first is None else first
    print("deep loss fell", float(loss) < first)
    print("deep loss", round(float(loss), 2))


def main():
    print("backend", jax.default_backend())
    k = jax.random.split(jax.random.PRNGKey(0), 4)
    x = jax.random.normal(k[0], (128, 16))
    y = jnp.sin(x[:, :1])
    params = [jax.random.normal(k[1], (16, 32)) * 0.3, jnp.zeros(32),
              jax.random.normal(k[2], (32, 1)) * 0.3, jnp.zeros(1)]
    first = None
    for _ in range(200):
        params, loss = step(params, x, y)
        first = float(loss) if first is None else first
    print("loss fell", float(loss) < first)
    print("loss", round(float(loss), 3))
    deep()


if __name__ == "__main__":
    main()
    print("done")
