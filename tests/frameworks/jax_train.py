"""jax_train.py: JAX jit, grad and a small training loop on the GPU.

usage: python3 jax_train.py
Prints the backend, the loss after training (rounded) and "done".
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


if __name__ == "__main__":
    main()
    print("done")
