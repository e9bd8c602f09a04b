"""Running statistics of a stream and observation normalisation, shared by every agent that
normalises: PPO and A2C (--normalize-obs, --normalize-reward), SAC and TD3 (--normalize-obs,
and RND's input and intrinsic-reward scaling, agents/core/rnd.py).

`RunningStats` is pure state, a NamedTuple of arrays: it lives in the learner state, so it
is checkpointed with it and survives a resume. Under data parallelism `update` takes the
sums over the named mesh axis (`lax.psum`), so every device holds the same statistics, those
of the samples of all devices.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

Array = jax.Array

NORM_EPS = 1e-8  # added to the variance before its square root


class RunningStats(NamedTuple):
    """Running mean and (population) variance of a stream of samples, merged batch by
    batch (Chan et al.'s parallel algorithm, as gymnasium's RunningMeanStd)."""

    mean: Array
    var: Array
    count: Array  # float32; starts at 1e-4 as gymnasium's, so the first batch dominates

    @classmethod
    def zeros(cls, shape=()) -> RunningStats:
        return cls(jnp.zeros(shape, jnp.float32), jnp.ones(shape, jnp.float32), jnp.float32(1e-4))

    def update(self, x, num_axes: int, axis_name=None, weights=None) -> RunningStats:
        """Take in `x` whose first `num_axes` axes are samples (summed over `axis_name`);
        `weights`: optional 0/1 (or any non-negative) weights of the samples, of `x`'s first
        `num_axes` axes' shape (masked samples count for nothing; no samples, no change)."""
        axes = tuple(range(num_axes))
        x = x.astype(jnp.float32)

        def total(v):
            return v if axis_name is None else jax.lax.psum(v, axis_name)

        if weights is None:
            n = total(jnp.float32(jnp.prod(jnp.asarray(x.shape[:num_axes]))))
            mean = total(jnp.sum(x, axes)) / n
            var = total(jnp.sum(jnp.square(x - lead(mean, x.ndim)), axes)) / n
        else:
            w = weights.astype(jnp.float32).reshape(weights.shape + (1,) * (x.ndim - num_axes))
            n = total(jnp.sum(weights.astype(jnp.float32)))
            safe = jnp.maximum(n, 1e-8)
            mean = total(jnp.sum(w * x, axes)) / safe
            var = total(jnp.sum(w * jnp.square(x - lead(mean, x.ndim)), axes)) / safe
        delta, count = mean - self.mean, self.count + n
        new_mean = self.mean + delta * n / count
        m2 = self.var * self.count + var * n + jnp.square(delta) * self.count * n / count
        return RunningStats(new_mean, m2 / count, count)


def lead(x, ndim: int):
    """`x` with leading axes of size 1 up to rank `ndim` (explicit broadcasting)."""
    return x.reshape((1,) * (ndim - x.ndim) + x.shape)


def normalize(x, stats: RunningStats, clip: float):
    """clip((x − mean) / √(var + 1e-8), −clip, clip) as float32, for `x` `[..., *shape]` with
    statistics of `shape`."""
    n = x.ndim
    scale = jax.lax.rsqrt(stats.var + NORM_EPS)
    z = (x.astype(jnp.float32) - lead(stats.mean, n)) * lead(scale, n)
    return jnp.clip(z, -clip, clip)
