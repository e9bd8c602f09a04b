"""Heads and complete networks: ACER's policy and Q heads, the value networks of DQN and
its variants (dueling, categorical) and R2D2's recurrent one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from networks.cores import ActionRewardLSTM, ActionRewardState, ResetLSTM
from networks.noisy import SIGMA0, NoisyDense
from networks.torsos import check_obs, make_torso


class PolicyQHead(nn.Module):
    """ACER's head pair: policy logits and Q(x, ·) for every action, from shared features."""

    num_actions: int

    @nn.compact
    def __call__(self, features):
        logits = nn.Dense(
            self.num_actions, kernel_init=nn.initializers.orthogonal(0.01), name="policy"
        )(features)
        q = nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(1.0), name="q")(
            features
        )
        return logits, q


# The hidden width after data-efficient Rainbow's convolutions (van Hasselt et al. 2019,
# arXiv:1906.05243, Appendix: 256 units per stream), where a network shares one layer.
DATA_EFFICIENT_HIDDEN = 256


class ACERNetwork(nn.Module):
    """Shared torso → (optional LSTM) → policy logits and Q values.

    Feed-forward: `apply(params, obs)` with obs `[..., *obs_shape]` returns
    (logits, q) `[..., A]`. Recurrent (`lstm_size > 0`): `apply(params, obs, first, state)`
    with time-major obs `[T, B, ...]` and `first` `[T, B]` returns ((logits, q), state).
    `obs_spec` is the env's `EnvSpec.obs_spec` (or an array observation's shape); for a
    pytree observation `obs` is a pytree of leaves `[..., *leaf_shape]` and the torso is a
    `DictEncoder` (`networks.torsos.make_torso`). Frame stacks go through `cnn`'s torso: the
    Nature CNN, or data-efficient Rainbow's convolutions followed by a shared ReLU layer of
    `DATA_EFFICIENT_HIDDEN` units (DER's hidden width).
    """

    obs_spec: Any
    num_actions: int
    hidden: Sequence[int] = (64, 64)
    lstm_size: int = 0
    text: bool = False
    plugged: Any = None  # a user's torso module (`--network`), or None
    cnn: str = "nature"

    def setup(self):
        if self.plugged is not None:
            self.torso = self.plugged.clone()
        elif self.cnn == "data-efficient":
            dense = nn.Dense(DATA_EFFICIENT_HIDDEN, kernel_init=nn.initializers.orthogonal(2**0.5))
            convs = make_torso(self.obs_spec, self.hidden, cnn=self.cnn)
            self.torso = nn.Sequential([convs, dense, nn.relu])
        else:
            self.torso = make_torso(self.obs_spec, self.hidden, text=self.text, cnn=self.cnn)
        self.head = PolicyQHead(self.num_actions)
        if self.lstm_size:
            self.core = ResetLSTM(self.lstm_size)

    def __call__(self, obs, first=None, state=None):
        lead = check_obs(obs, self.obs_spec)
        if self.plugged is None:
            features = self.torso(obs)
        else:  # the observations of every leading axis as one batch, the plug-in's contract
            flat = jax.tree.map(lambda x: x.reshape((-1, *x.shape[len(lead) :])), obs)
            features = self.torso(flat).reshape((*lead, -1))
        if not self.lstm_size:
            return self.head(features)
        if first is None or state is None:
            raise ValueError("a recurrent ACERNetwork needs `first` [T, B] and a core state")
        features, state = self.core(features, first, state)
        return self.head(features), state

    def initial_state(self, batch_size: int):
        return (
            jnp.zeros((batch_size, self.lstm_size), jnp.float32),
            jnp.zeros((batch_size, self.lstm_size), jnp.float32),
        )


class QOutput(NamedTuple):
    """A value network's output: Q(x, ·) `[..., A]`, and for a distributional network the
    logits of Z(x, ·) over the atoms `[..., A, K]` (None otherwise)."""

    q_values: jax.Array
    q_logits: jax.Array | None


class QHead(nn.Module):
    """Q values from features: plain (one linear layer) or dueling (Wang et al. 2016,
    arXiv:1511.06581, eq. 9: Q = V + A − mean_a A), scalar or categorical over `num_atoms`
    atoms (C51, arXiv:1707.06887; dueling C51 as in Rainbow, arXiv:1710.02298 §3: the
    streams are combined on the logits). The dueling streams split after the torso's last
    hidden layer (for Atari the Nature CNN's 512 units); Wang et al. give each stream its own
    512-unit layer, which doubles the cost of that layer.

    `head_hidden` > 0 gives each stream (the advantage and value streams, or the one Q
    stream) its own hidden layer of that many units with a ReLU before its output layer, as
    Rainbow's and data-efficient Rainbow's networks (256 units in DER, on the convolutions'
    features: `networks.DataEfficientCNN`).

    `noisy`: the head's linear layers (output layers, and hidden ones with `head_hidden`) are
    `networks.noisy.NoisyDense` (NoisyNet) with σ0 = `noisy_std`, noise drawn from
    `noise_key` (None: their means). Only these: the torso stays deterministic (Fortunato
    et al. 2018 make every linear layer noisy; with `head_hidden` and the data-efficient CNN,
    whose other layers are convolutions, every linear layer is)."""

    num_actions: int
    dueling: bool = False
    num_atoms: int = 0  # 0: scalar Q values
    atoms: tuple[float, ...] = ()
    noisy: bool = False
    head_hidden: int = 0
    noisy_std: float = SIGMA0

    @nn.compact
    def __call__(self, features, noise_key=None) -> QOutput:
        k = max(self.num_atoms, 1)
        keys = (None, None) if noise_key is None else tuple(jax.random.split(noise_key))
        # the hidden layers' draws: a stream of their own, so that the output layers' draws
        # are those of a head without hidden layers
        hidden_keys = (None, None)
        if noise_key is not None and self.head_hidden:
            hidden_keys = tuple(jax.random.split(jax.random.fold_in(noise_key, 1)))

        def dense(n, name, key):
            if self.noisy:
                return lambda x: NoisyDense(n, self.noisy_std, name=name)(x, key)
            return nn.Dense(n, kernel_init=nn.initializers.orthogonal(1.0), name=name)

        def stream(x, n, name, i):  # stream i draws its noise from keys[i], hidden_keys[i]
            if self.head_hidden:
                width, hidden_name = self.head_hidden, f"{name}_hidden"
                if self.noisy:
                    x = NoisyDense(width, self.noisy_std, name=hidden_name)(x, hidden_keys[i])
                else:
                    init = nn.initializers.orthogonal(jnp.sqrt(2.0))
                    x = nn.Dense(width, kernel_init=init, name=hidden_name)(x)
                x = nn.relu(x)
            return dense(n, name, keys[i])(x)

        adv = stream(features, self.num_actions * k, "advantage" if self.dueling else "q", 0)
        adv = adv.reshape((*features.shape[:-1], self.num_actions, k))
        if self.dueling:
            value = stream(features, k, "value", 1)[..., None, :]
            out = value + adv - jnp.mean(adv, axis=-2, keepdims=True)
        else:
            out = adv
        if not self.num_atoms:
            return QOutput(out[..., 0], None)
        probs = jax.nn.softmax(out, axis=-1)
        return QOutput(jnp.einsum("...ak,k->...a", probs, jnp.asarray(self.atoms)), out)


class QNetwork(nn.Module):
    """The feed-forward value network of DQN and its variants: torso (Nature CNN for frames,
    MLP for vectors, one encoder per key for dict observations: `make_torso`) → `QHead`.
    `apply(params, obs, noise_key=None)` with obs leaves `[..., *leaf_shape]`; `noise_key`
    draws the noise of a `noisy` head (one draw for the whole batch). `layer_norm`: the
    torso's LayerNorms (`make_torso`; PQN's network). `cnn`: the torso of frame stacks
    (`make_torso`); `head_hidden`, `noisy_std`: `QHead`'s. Data-efficient Rainbow's network
    is `cnn="data-efficient", head_hidden=256, dueling=True, noisy=True, noisy_std=0.1` with
    51 atoms."""

    obs_spec: Any  # the env's EnvSpec.obs_spec (or an observation shape tuple)
    num_actions: int
    hidden: Sequence[int] = (64, 64)
    dueling: bool = False
    num_atoms: int = 0
    atoms: tuple[float, ...] = ()
    noisy: bool = False
    layer_norm: bool = False
    cnn: str = "nature"
    head_hidden: int = 0
    noisy_std: float = SIGMA0
    plugged: Any = None  # a user's torso module (`--network`), or None

    @nn.compact
    def __call__(self, obs, noise_key=None) -> QOutput:
        if self.plugged is not None:
            torso = self.plugged.clone(parent=self, name="torso")
        else:
            torso = make_torso(self.obs_spec, self.hidden, layer_norm=self.layer_norm, cnn=self.cnn)
        head = QHead(
            self.num_actions, self.dueling, self.num_atoms, self.atoms, self.noisy,
            self.head_hidden, self.noisy_std,
        )  # fmt: skip
        return head(torso(obs), noise_key)


class RecurrentQNetwork(nn.Module):
    """R2D2's value network (Kapturowski et al. 2019, §2.3): torso → LSTM → `QHead`, the LSTM
    also fed the previous action (one-hot) and the previous reward (`networks.cores`'s
    `ActionRewardLSTM`, shared with the recurrent actor-critic).

    `apply(params, obs, first, state)`: time-major obs `[T, B, ...]`, `first` `[T, B]`; the
    state is `RecurrentQState` (`networks.cores.ActionRewardState`): the LSTM's (c, h) and the
    previous action and reward of the step before obs[0] (zeroed with the LSTM at episode
    starts). `prev_action`/`prev_reward` `[T, B]` of every step are given
    (`networks.cores.previous_inputs`), or (None) taken from the state for T = 1 (acting).
    Returns (QOutput `[T, B, ...]`, state after the last step with the LSTM's state; the
    caller sets its previous action and reward)."""

    obs_spec: Any  # the env's EnvSpec.obs_spec (or an observation shape tuple)
    num_actions: int
    hidden: Sequence[int] = (64,)
    lstm_size: int = 64
    dueling: bool = False
    plugged: Any = None  # a user's torso module (`--network`) for `[N, ...]` batches, or None

    @nn.compact
    def __call__(self, obs, first, state, prev_action=None, prev_reward=None):
        if self.plugged is None:
            features = make_torso(self.obs_spec, self.hidden)(obs)
        else:  # the T·B observations as one batch, as the plug-in's contract says
            flat = jax.tree.map(lambda x: x.reshape((-1, *x.shape[2:])), obs)
            torso = self.plugged.clone(parent=self, name="torso")
            features = torso(flat).reshape((*first.shape, -1))
        core = ActionRewardLSTM(self.lstm_size, self.num_actions, discrete=True, name="core")
        y, state = core(features, first, state, prev_action, prev_reward)
        return QHead(self.num_actions, self.dueling, name="head")(y), state

    def initial_state(self, batch_size: int) -> RecurrentQState:
        return ActionRewardState.zeros(batch_size, self.lstm_size, self.num_actions, discrete=True)


# R2D1's name for the shared state (the LSTM's (c, h), the previous action and reward).
RecurrentQState = ActionRewardState
"""The recurrent state of `RecurrentQNetwork`: `networks.cores.ActionRewardState`."""
