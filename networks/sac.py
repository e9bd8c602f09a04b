"""Networks of the off-policy actor-critics with separate actor and critic (SAC, TD3, DDPG).

`PolicyMLP`: an MLP on vector observations with one of three heads: a tanh-Gaussian's
(mean, log σ) with log σ squashed into [log_std_min, log_std_max] (SAC, continuous), a
deterministic tanh action (TD3/DDPG), or categorical logits (discrete SAC).

`QEnsemble`: N critics as ONE module whose parameters are stacked on a leading axis `[N, ...]`
and run with `vmap` (flax `nn.vmap`), so an ensemble of 10 (REDQ) is one batched matmul per
layer, not 10 modules. Continuous critics take (obs, action) and return Q `[N, ...]`; discrete
ones take obs and return Q(x, ·) `[N, ..., A]`.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax.numpy as jnp


def _mlp(x, hidden: Sequence[int]):
    for width in hidden:
        x = nn.relu(nn.Dense(width)(x))
    return x


class PolicyMLP(nn.Module):
    """`head`: "gaussian" -> (mean, log_std) `[..., D]`; "deterministic" -> tanh(·) `[..., D]`
    in [−1, 1]; "categorical" -> logits `[..., A]`. `out_dim` is D or A."""

    out_dim: int
    hidden: Sequence[int] = (256, 256)
    head: str = "gaussian"
    log_std_min: float = -5.0
    log_std_max: float = 2.0

    @nn.compact
    def __call__(self, obs):
        x = _mlp(obs.astype(jnp.float32), self.hidden)
        if self.head == "categorical":
            return nn.Dense(self.out_dim, name="logits")(x)
        if self.head == "deterministic":
            return jnp.tanh(nn.Dense(self.out_dim, name="action")(x))
        mean = nn.Dense(self.out_dim, name="mean")(x)
        raw = jnp.tanh(nn.Dense(self.out_dim, name="log_std")(x))
        # CleanRL's smooth squashing of log σ into its range (Spinning Up clips instead).
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (raw + 1.0)
        return mean, log_std


class QMLP(nn.Module):
    """One critic: Q(x, a) `[...]` (continuous: `action` given) or Q(x, ·) `[..., A]`."""

    hidden: Sequence[int] = (256, 256)
    num_actions: int = 0  # 0: continuous, the action is an input

    @nn.compact
    def __call__(self, obs, action=None):
        x = obs.astype(jnp.float32)
        if self.num_actions == 0:
            x = jnp.concatenate([x, action.astype(jnp.float32)], axis=-1)
        x = _mlp(x, self.hidden)
        if self.num_actions == 0:
            return nn.Dense(1)(x)[..., 0]
        return nn.Dense(self.num_actions)(x)


class QEnsemble(nn.Module):
    """`num_critics` independent `QMLP`s, parameters stacked `[N, ...]`, run with vmap: returns
    `[N, ...]` (continuous) or `[N, ..., A]` (discrete). Every member gets its own init."""

    num_critics: int = 2
    hidden: Sequence[int] = (256, 256)
    num_actions: int = 0

    @nn.compact
    def __call__(self, obs, action=None):
        ensemble = nn.vmap(
            QMLP,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            in_axes=None,
            out_axes=0,
            axis_size=self.num_critics,
        )
        return ensemble(self.hidden, self.num_actions, name="members")(obs, action)
