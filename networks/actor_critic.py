"""The actor-critic network of the on-policy agents (A2C, PPO): a policy head and a state-value
head over a torso, with an optional LSTM core.

* Discrete actions: the policy head gives logits `[..., A]`.
* Continuous actions: a diagonal Gaussian whose mean comes from the head and whose log-std is
  a state-independent parameter vector (CleanRL's `ppo_continuous_action`, the PPO paper's
  MuJoCo network).

Torsos: Nature CNN for frame stacks, MLP for vectors. With `shared_torso=False` (vector
observations, feed-forward only) the policy and the value have separate MLPs, as in the PPO
paper's MuJoCo network and CleanRL's classic-control and MuJoCo scripts; otherwise one torso
feeds both heads (Atari, recurrent). Initialisation follows the PPO implementations:
orthogonal √2 in the torso, 0.01 on the policy head, 1 on the value head.

Feed-forward: `apply(params, obs)` with obs `[..., *obs_shape]` returns `(dist, value)`:
`dist` the logits, or `(mean, log_std)` with log_std `[D]`; value `[...]`. Recurrent
(`lstm_size > 0`): `apply(params, obs, first, core)` with time-major obs `[T, B, ...]` and
`first` `[T, B]` (the core resets before x_t when `first_t`, `networks.cores`) returns
`((dist, value), core)`.

With `prev_action_reward` (recurrent only) the core is `networks.cores.ActionRewardLSTM`: the
LSTM is also fed the previous action (one-hot, or the raw vector of a continuous action) and
the previous reward, as R2D1's network and rlpyt's AtariLstmModel. The core state is then an
`ActionRewardState` that carries them for acting (`apply(params, obs[None], first[None],
core)`); learning passes them for every step: `apply(params, obs, first, core, prev_action,
prev_reward)` (`networks.cores.previous_inputs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from networks.cores import ActionRewardLSTM, ActionRewardState, ResetLSTM
from networks.torsos import _array_shape, check_obs, make_torso


class ActorCriticNetwork(nn.Module):
    """See the module docstring. `obs_spec`: the env's `EnvSpec.obs_spec` or an array
    observation's shape; a pytree observation (MiniGrid) gets a `DictEncoder` torso (one
    encoder per key; `text` adds the GRU over the mission's words)."""

    obs_spec: Any
    action_dim: int  # number of actions (discrete) or the action vector's size (continuous)
    discrete: bool = True
    hidden: Sequence[int] = (64, 64)
    activation: str = "tanh"
    shared_torso: bool = True
    lstm_size: int = 0
    log_std_init: float = 0.0
    text: bool = False
    prev_action_reward: bool = False  # recurrent only: feed the LSTM a_{t-1} and r_{t-1}
    plugged: Any = None  # a user's torso module (`--network`), cloned for each use, or None

    def setup(self):
        if self.plugged is not None:
            torso = self.plugged.clone
        else:
            torso = lambda: make_torso(  # noqa: E731
                self.obs_spec, self.hidden, text=self.text, activation=self.activation
            )
        self.torso = torso()
        shape = _array_shape(self.obs_spec)
        if not self.shared_torso and not self.lstm_size and shape is not None and len(shape) == 1:
            self.value_torso = torso()
        else:
            self.value_torso = None
        if self.prev_action_reward and not self.lstm_size:
            raise ValueError("prev_action_reward needs a recurrent core (lstm_size > 0)")
        if self.prev_action_reward:
            self.core = ActionRewardLSTM(self.lstm_size, self.action_dim, self.discrete)
        elif self.lstm_size:
            self.core = ResetLSTM(self.lstm_size)
        self.policy_head = nn.Dense(self.action_dim, kernel_init=nn.initializers.orthogonal(0.01))
        self.value_head = nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0))
        if not self.discrete:
            self.log_std = self.param(
                "log_std", nn.initializers.constant(self.log_std_init), (self.action_dim,)
            )

    def _heads(self, policy_features, value_features):
        out = self.policy_head(policy_features)
        dist = out if self.discrete else (out, self.log_std)
        return dist, self.value_head(value_features)[..., 0]

    def __call__(self, obs, first=None, core=None, prev_action=None, prev_reward=None):
        check_obs(obs, self.obs_spec)
        features = self.torso(obs)
        if not self.lstm_size:
            value_features = features if self.value_torso is None else self.value_torso(obs)
            return self._heads(features, value_features)
        if first is None or core is None:
            raise ValueError("a recurrent ActorCriticNetwork needs `first` [T, B] and a core state")
        if self.prev_action_reward:
            features, core = self.core(features, first, core, prev_action, prev_reward)
        else:
            features, core = self.core(features, first, core)
        return self._heads(features, features), core

    def initial_state(self, batch_size: int):
        if self.prev_action_reward:
            return ActionRewardState.zeros(
                batch_size, self.lstm_size, self.action_dim, self.discrete
            )
        zeros = jnp.zeros((batch_size, self.lstm_size), jnp.float32)
        return (zeros, zeros)
