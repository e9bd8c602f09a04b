"""NoisyNet linear layers (Fortunato et al. 2018, "Noisy Networks for Exploration",
arXiv:1706.10295), with factorised Gaussian noise.

A noisy linear layer y = (μ_w + σ_w ⊙ ε_w) x + μ_b + σ_b ⊙ ε_b learns the means μ and the
noise scales σ by gradient descent; exploration comes from the noise instead of ε-greedy.
Factorised noise (§3, eq. 10–11) draws p + q unit Gaussians per layer (p inputs, q outputs)
instead of p·q + q:

    ε_w[i, j] = f(ε_i) f(ε_j),   ε_b[j] = f(ε_j),   f(x) = sgn(x) √|x|

Initialisation (§3.2, factorised): μ ~ U[−1/√p, 1/√p] and σ = σ0/√p with σ0 = 0.5.

The noise is explicit: `NoisyDense.__call__(x, key)` draws it from `key`, so under `jit` a
new key gives new noise and the same key the same noise (no flax RNG streams, nothing
mutable). `key=None` uses the means alone (the noise-free network, e.g. for greedy
evaluation). The weight noise is never materialised: x (σ_w ⊙ f(ε_in) f(ε_out)ᵀ) =
((x ⊙ f(ε_in)) σ_w) ⊙ f(ε_out).
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

SIGMA0 = 0.5  # the paper's σ0 for factorised noise


def scale_noise(x):
    """f(x) = sgn(x) √|x| (arXiv:1706.10295, §3)."""
    return jnp.sign(x) * jnp.sqrt(jnp.abs(x))


def factorised_noise(key, num_in: int, num_out: int):
    """(f(ε_in) `[p]`, f(ε_out) `[q]`) of one layer's draw: the weight noise is their outer
    product, the bias noise f(ε_out)."""
    k_in, k_out = jax.random.split(key)
    f_in = scale_noise(jax.random.normal(k_in, (num_in,), jnp.float32))
    f_out = scale_noise(jax.random.normal(k_out, (num_out,), jnp.float32))
    return f_in, f_out


def _uniform(bound: float):
    def init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


def _noisy_params(module: nn.Module, p: int, q: int, sigma0: float):
    """(μ_w, σ_w `[p, q]`, μ_b, σ_b `[q]`) of a noisy layer, initialised as §3.2 says."""
    bound = 1.0 / math.sqrt(p)
    sigma = nn.initializers.constant(sigma0 / math.sqrt(p))
    return (
        module.param("mu_kernel", _uniform(bound), (p, q)),
        module.param("sigma_kernel", sigma, (p, q)),
        module.param("mu_bias", _uniform(bound), (q,)),
        module.param("sigma_bias", sigma, (q,)),
    )


def _noisy_apply(x, weights, f_in, f_out):
    """y of a noisy layer with `weights` (`_noisy_params`) under the factorised noise
    (f(ε_in), f(ε_out)); (None, None): the means alone."""
    mu_w, sigma_w, mu_b, sigma_b = weights
    x = x.astype(jnp.float32)
    row = lambda v: v.reshape((1,) * (x.ndim - 1) + v.shape)  # noqa: E731  (no rank promotion)
    y = x @ mu_w + row(mu_b)
    if f_in is None:
        return y
    return y + ((x * row(f_in)) @ sigma_w) * row(f_out) + row(sigma_b * f_out)


class NoisyDense(nn.Module):
    """A linear layer with factorised Gaussian parameter noise (module docstring). Parameters:
    `mu_kernel`, `sigma_kernel` `[p, q]`, `mu_bias`, `sigma_bias` `[q]`."""

    features: int
    sigma0: float = SIGMA0

    @nn.compact
    def __call__(self, x, key=None):
        p = x.shape[-1]
        weights = _noisy_params(self, p, self.features, self.sigma0)
        if key is None:
            return _noisy_apply(x, weights, None, None)
        return _noisy_apply(x, weights, *factorised_noise(key, p, self.features))


NOISE = "noise"  # the variable collection of `StoredNoiseDense`'s draws


class StoredNoiseDense(nn.Module):
    """`NoisyDense` whose noise draw is a variable (collection "noise": `f_in` `[p]`, `f_out`
    `[q]`, zero at init: the means) rather than an argument, so that a network's call sites
    need not thread keys: `resample_noise(variables, key)` draws anew, `clear_noise`
    returns to the means. The draw is stop_gradient'ed: a gradient with respect to it is
    exactly 0, so an optimiser given one leaves it unchanged."""

    features: int
    sigma0: float = SIGMA0

    @nn.compact
    def __call__(self, x):
        p = x.shape[-1]
        weights = _noisy_params(self, p, self.features, self.sigma0)
        f_in = self.variable(NOISE, "f_in", jnp.zeros, (p,), jnp.float32).value
        f_out = self.variable(NOISE, "f_out", jnp.zeros, (self.features,), jnp.float32).value
        return _noisy_apply(x, weights, jax.lax.stop_gradient(f_in), jax.lax.stop_gradient(f_out))


def resample_noise(variables, key):
    """`variables` with every draw of its "noise" collection (`StoredNoiseDense`'s) replaced
    by a fresh f(ε), ε ~ N(0, 1), independent across layers (and across the members of a
    vmapped ensemble, whose draws are stacked); unchanged without one."""
    if NOISE not in variables:
        return variables
    leaves, tree = jax.tree.flatten(variables[NOISE])
    keys = jax.random.split(key, len(leaves))
    fresh = [
        scale_noise(jax.random.normal(k, x.shape, x.dtype))
        for k, x in zip(keys, leaves, strict=True)
    ]
    return {**variables, NOISE: jax.tree.unflatten(tree, fresh)}


def clear_noise(variables):
    """`variables` with every draw zero: the noise-free means (greedy evaluation)."""
    if NOISE not in variables:
        return variables
    return {**variables, NOISE: jax.tree.map(jnp.zeros_like, variables[NOISE])}


def noisy_weights(params, key):
    """The effective (kernel `[p, q]`, bias `[q]`) of a `NoisyDense` with `params` (its own
    parameter dict) under the noise drawn from `key` (for tests and inspection)."""
    p, q = params["mu_kernel"].shape
    f_in, f_out = factorised_noise(key, p, q)
    kernel = params["mu_kernel"] + params["sigma_kernel"] * jnp.outer(f_in, f_out)
    return kernel, params["mu_bias"] + params["sigma_bias"] * f_out
