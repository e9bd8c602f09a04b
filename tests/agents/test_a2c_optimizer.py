"""A2C's RMSprop against a NumPy reference of its update (Tieleman & Hinton 2012, lecture
6.5): ν_t = α ν_{t−1} + (1 − α) g_t², step −lr · g_t / (√ν̂_t + ε), with ν_0 = 0 (PyTorch),
ν_0 = 1 (TensorFlow 1) or ν̂_t = ν_t / (1 − α^t) (debiased), for --rmsprop-start."""

from __future__ import annotations

import re

import jax.numpy as jnp
import numpy as np
import pytest

from agents.a2c.agent import rmsprop
from agents.a2c.config import A2CConfig


def reference_steps(grads, lr, alpha, eps, start):
    nu = np.ones_like(grads[0]) if start == "one" else np.zeros_like(grads[0])
    steps = []
    for t, g in enumerate(grads, start=1):
        nu = alpha * nu + (1 - alpha) * g * g
        scale = nu / (1 - alpha**t) if start == "debiased" else nu
        steps.append(-lr * g / (np.sqrt(scale) + eps))
    return steps


@pytest.mark.parametrize("start", ["zero", "one", "debiased"])
def test_rmsprop_start(start):
    rng = np.random.default_rng(7)
    grads = [rng.normal(size=(5,)) * 10.0 ** rng.uniform(-3, 1, 5) for _ in range(6)]
    cfg = A2CConfig(rmsprop_start=start, rmsprop_alpha=0.9, rmsprop_eps=1e-6)
    opt = rmsprop(cfg, 0.01)
    state = opt.init(jnp.zeros(5))
    want = reference_steps(grads, 0.01, 0.9, 1e-6, start)
    for g, w in zip(grads, want, strict=True):
        step, state = opt.update(jnp.asarray(g, jnp.float32), state)
        np.testing.assert_allclose(np.asarray(step), w, rtol=2e-5, atol=1e-9)
    if start == "zero":  # the first step is lr / √(1 − α) per parameter, whatever |g|
        first = reference_steps(grads[:1], 0.01, 0.9, 0.0, start)[0]
        np.testing.assert_allclose(np.abs(first), 0.01 / np.sqrt(0.1))


def test_rmsprop_start_is_checked():
    message = "--rmsprop-start must be zero|one|debiased, got 'half'"
    with pytest.raises(ValueError, match=re.escape(message)):
        A2CConfig(rmsprop_start="half")
