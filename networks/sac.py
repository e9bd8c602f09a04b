"""Networks of the off-policy actor-critics with separate actor and critic (SAC, TD3, DDPG).

`PolicyMLP`: an MLP on vector observations with one of three heads: a tanh-Gaussian's
(mean, log σ) with log σ squashed into [log_std_min, log_std_max] (SAC, continuous), a
deterministic tanh action (TD3/DDPG), or categorical logits (discrete SAC).

`QEnsemble`: N critics as ONE module whose parameters are stacked on a leading axis `[N, ...]`
and run with `vmap` (flax `nn.vmap`), so an ensemble of 10 (REDQ) is one batched matmul per
layer, not 10 modules. Continuous critics take (obs, action) and return Q `[N, ...]`; discrete
ones take obs and return Q(x, ·) `[N, ..., A]`.

Recurrent mode (R2D2, Kapturowski et al. 2019, ICLR): `RecurrentPolicy` and `RecurrentQEnsemble`
put an LSTM between a one-layer ReLU torso over the observation and the feed-forward networks
above: torso → `networks.cores.ActionRewardLSTM` (fed the previous action and reward, reset at
episode starts) → `PolicyMLP` / `QEnsemble` on the LSTM's output. The actor and the critics
have separate cores (the seed shares one); the N critics share theirs, each keeping its own
MLP head. Their states travel together as `RecurrentSACState`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import flax.linen as nn
import jax.numpy as jnp

from networks.cores import ActionRewardLSTM, ActionRewardState
from networks.noisy import NOISE, StoredNoiseDense
from networks.torsos import _array_shape, make_torso


def _mlp(x, hidden: Sequence[int], noisy_std: float = 0.0):
    for width in hidden:
        x = nn.relu(_dense(width, noisy_std)(x))
    return x


def _dense(width: int, noisy_std: float, name: str | None = None) -> nn.Module:
    """A linear layer: `nn.Dense`, or with `noisy_std` > 0 NoisyNet's with its draw stored
    in the "noise" collection (`networks.noisy.StoredNoiseDense`, σ0 = noisy_std)."""
    if noisy_std > 0:
        return StoredNoiseDense(width, noisy_std, name=name)
    return nn.Dense(width, name=name)


def obs_torso(obs_spec, plugged=None, keep=None, width: int = 0) -> nn.Module | None:
    """The encoder before the MLPs of SAC's and TD3's networks: `plugged()` where the user
    gave one (`--network`, agents.core.hooks.plugged_torso); for vectors, none (the MLP takes
    them as they are), or a `VectorTorso` that keeps only the dimensions `keep` (the
    visible ones, `EnvSpec.visible_obs`) and with `width` > 0 adds a ReLU layer of that
    width (a representation for SAC's prediction model to read); else `networks.make_torso`'s
    for the observation (its CNN for an image of any size, one encoder per key of a dict
    observation, concatenated). Each network gets its own (the critics of an ensemble share
    theirs)."""
    if plugged is not None:
        return plugged()
    shape = _array_shape(obs_spec)
    if shape is not None and len(shape) == 1:
        if keep is None and not width:
            return None
        return VectorTorso(None if keep is None else tuple(keep), width)
    return make_torso(obs_spec, hidden=())


def visible(obs, keep):
    """`obs[..., keep]` as float32 (the dimensions a network reads), or `obs` as float32."""
    obs = obs.astype(jnp.float32)
    return obs if keep is None else jnp.take(obs, jnp.asarray(keep, jnp.int32), axis=-1)


class VectorTorso(nn.Module):
    """Vector observations `[..., D]` -> their dimensions `keep` (all when None), then with
    `width` > 0 one ReLU layer of that width."""

    keep: tuple[int, ...] | None = None
    width: int = 0

    @nn.compact
    def __call__(self, obs):
        x = visible(obs, self.keep)
        return nn.relu(nn.Dense(self.width, name="representation")(x)) if self.width else x


class PolicyMLP(nn.Module):
    """`head`: "gaussian" -> (mean, log_std) `[..., D]`; "deterministic" -> tanh(·) `[..., D]`
    in [−1, 1]; "categorical" -> logits `[..., A]`. `out_dim` is D or A. `torso`: an
    encoder of the observation before the MLP (`obs_torso`), or None for vectors."""

    out_dim: int
    hidden: Sequence[int] = (256, 256)
    head: str = "gaussian"
    log_std_min: float = -5.0
    log_std_max: float = 2.0
    torso: nn.Module | None = None
    noisy_std: float = 0.0  # > 0: NoisyNet layers after the torso (`_dense`)

    @nn.compact
    def __call__(self, obs):
        x = obs.astype(jnp.float32) if self.torso is None else self.torso(obs)
        x = _mlp(x, self.hidden, self.noisy_std)
        dense = functools.partial(_dense, self.out_dim, self.noisy_std)
        if self.head == "categorical":
            return dense("logits")(x)
        if self.head == "deterministic":
            return jnp.tanh(dense("action")(x))
        mean = dense("mean")(x)
        raw = jnp.tanh(dense("log_std")(x))
        # CleanRL's smooth squashing of log σ into its range (Spinning Up clips instead).
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (raw + 1.0)
        return mean, log_std


class QMLP(nn.Module):
    """One critic: Q(x, a) `[...]` (continuous: `action` given) or Q(x, ·) `[..., A]`."""

    hidden: Sequence[int] = (256, 256)
    num_actions: int = 0  # 0: continuous, the action is an input
    noisy_std: float = 0.0  # > 0: NoisyNet layers (`_dense`)

    @nn.compact
    def __call__(self, obs, action=None):
        x = obs.astype(jnp.float32)
        if self.num_actions == 0:
            x = jnp.concatenate([x, action.astype(jnp.float32)], axis=-1)
        x = _mlp(x, self.hidden, self.noisy_std)
        if self.num_actions == 0:
            return _dense(1, self.noisy_std)(x)[..., 0]
        return _dense(self.num_actions, self.noisy_std)(x)


class QEnsemble(nn.Module):
    """`num_critics` independent `QMLP`s, parameters stacked `[N, ...]`, run with vmap: returns
    `[N, ...]` (continuous) or `[N, ..., A]` (discrete). Every member gets its own init.
    `torso`: one encoder of the observation that every member's MLP reads (`obs_torso`: one
    CNN, not N vmapped ones, which XLA:CPU would run as a slower grouped convolution), or
    None for vectors. `method="represent"` runs only the torso (the representation: the
    observation itself without one) and `method="q"` only the members on such features."""

    num_critics: int = 2
    hidden: Sequence[int] = (256, 256)
    num_actions: int = 0
    torso: nn.Module | None = None
    noisy_std: float = 0.0  # > 0: NoisyNet layers in every member (their draws stacked too)

    def setup(self):
        axes = {"params": 0, **({NOISE: 0} if self.noisy_std > 0 else {})}
        ensemble = nn.vmap(
            QMLP,
            variable_axes=axes,
            split_rngs={"params": True},
            in_axes=None,
            out_axes=0,
            axis_size=self.num_critics,
        )
        self.members = ensemble(self.hidden, self.num_actions, self.noisy_std)

    def __call__(self, obs, action=None):
        return self.q(self.represent(obs), action)

    def represent(self, obs):
        return obs if self.torso is None else self.torso(obs)

    def q(self, features, action=None):
        return self.members(features, action)


class RecurrentSACState(NamedTuple):
    """The recurrent state of recurrent SAC before an observation: the actor's core and the
    critics' core (`networks.cores.ActionRewardState` each: the LSTM's (c, h) `[B, size]` and
    the previous action, in [−1, 1] for continuous actions, and reward)."""

    actor: ActionRewardState
    critic: ActionRewardState

    @classmethod
    def zeros(cls, batch_size: int, size: int, action_dim: int, discrete: bool):
        """The state of fresh episodes (`action_dim`: A actions, or the action vector's D)."""
        one = ActionRewardState.zeros(batch_size, size, action_dim, discrete)
        return cls(one, one)


def _torso_and_core(module, obs, first, state, prev_action, prev_reward):
    """The torso and the LSTM of a recurrent module: outputs `[T, B, lstm_size]`, state."""
    if obs.ndim != 3 or first.shape != obs.shape[:2]:
        raise ValueError(
            f"{type(module).__name__} takes time-major obs [T, B, D] and first [T, B]; got obs "
            f"{obs.shape} and first {first.shape}"
        )
    x = nn.relu(nn.Dense(module.hidden[0], name="torso")(visible(obs, module.keep)))
    core = ActionRewardLSTM(module.lstm_size, module.action_dim, module.discrete, name="core")
    return core(x, first, state, prev_action, prev_reward)


class RecurrentPolicy(nn.Module):
    """`PolicyMLP` after a torso and an LSTM (module docstring). `apply(params, obs, first,
    state, prev_action, prev_reward)`: time-major obs `[T, B, D]`, first `[T, B]`, state an
    `ActionRewardState`; `prev_action`/`prev_reward` of every step (`[T, B, ...]`,
    `networks.cores.previous_inputs`) or None for one step from the state's (acting). Returns
    (the head's outputs `[T, B, ...]`, the state after the last step)."""

    out_dim: int
    action_dim: int  # the core's previous-action input: A actions, or D
    discrete: bool
    hidden: Sequence[int] = (256, 256)
    lstm_size: int = 64
    head: str = "gaussian"
    log_std_min: float = -5.0
    log_std_max: float = 2.0
    keep: tuple[int, ...] | None = None  # the observation's visible dimensions (None: all)
    noisy_std: float = 0.0  # > 0: NoisyNet layers in the head (`PolicyMLP`'s)

    @nn.compact
    def __call__(self, obs, first, state, prev_action=None, prev_reward=None):
        y, state = _torso_and_core(self, obs, first, state, prev_action, prev_reward)
        policy = PolicyMLP(
            self.out_dim, self.hidden, self.head, self.log_std_min, self.log_std_max,
            noisy_std=self.noisy_std, name="head",
        )  # fmt: skip
        return policy(y), state


class RecurrentQEnsemble(nn.Module):
    """`QEnsemble` after a torso and an LSTM shared by the N critics (module docstring).

    `apply(params, obs, first, state, action, prev_action, prev_reward)` -> (Q `[N, T, B]`, or
    `[N, T, B, A]` when discrete, state); `method="unroll"` runs only the torso and the core
    -> (features `[T, B, size]`, state), and `method="q"` only the heads on such features
    (`q(features, action)`), so that a learner can reuse one unroll."""

    num_critics: int
    action_dim: int
    discrete: bool
    hidden: Sequence[int] = (256, 256)
    lstm_size: int = 64
    keep: tuple[int, ...] | None = None  # the observation's visible dimensions (None: all)
    noisy_std: float = 0.0  # > 0: NoisyNet layers in the heads (`QEnsemble`'s)

    def setup(self):
        self.heads = QEnsemble(
            self.num_critics, self.hidden, self.action_dim if self.discrete else 0,
            noisy_std=self.noisy_std, name="heads",
        )  # fmt: skip

    def __call__(self, obs, first, state, action=None, prev_action=None, prev_reward=None):
        y, state = self.unroll(obs, first, state, prev_action, prev_reward)
        return self.q(y, action), state

    @nn.compact
    def unroll(self, obs, first, state, prev_action=None, prev_reward=None):
        return _torso_and_core(self, obs, first, state, prev_action, prev_reward)

    def q(self, features, action=None):
        return self.heads(features, action)
