"""The Reactor network (Gruslys et al. 2018, "The Reactor", §3.4 and the architecture appendix).

A shared torso (Nature CNN for frame stacks, MLP for vectors) feeds a linear layer with ReLU,
whose features go to two separate recurrent cores:

* the **policy LSTM**, whose input is `stop_gradient(features)`: policy-gradient updates train
  only the policy LSTM and the policy head, never the torso;
* the **Q LSTM**, which trains the torso.

The policy head gives logits over actions; the probabilities are a softmax mixed with a small
uniform component, `(1 - ε) softmax(logits) + ε / A`. The Q head is a dueling distributional
head on a fixed support of K atoms: a value stream V(x) ∈ R^K and an advantage stream
A(x, a) ∈ R^{A×K} combine into atom logits `V(x) + A(x, a) - mean_a A(x, a)`, and a softmax over
atoms gives the return distribution Z(x, a).

Everything is time-major and recurrent: `apply(params, obs [T, B, ...], first [T, B], state)`,
with the reset convention of `networks.cores` (state zeroed before x_t when `first_t`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from networks.cores import ResetLSTM
from networks.torsos import check_obs, make_torso


class ReactorState(NamedTuple):
    """The recurrent state: an (c, h) pair per LSTM, each `[B, lstm_size]`."""

    policy: tuple[jax.Array, jax.Array]
    q: tuple[jax.Array, jax.Array]


class ReactorOutput(NamedTuple):
    """What `ReactorNetwork` returns over a time-major sequence."""

    policy_logits: jax.Array  # [T, B, A]
    policy_probs: jax.Array  # [T, B, A], mixed with the uniform distribution
    q_logits: jax.Array  # [T, B, A, K] atom logits
    q_probs: jax.Array  # [T, B, A, K] softmax over atoms
    q_values: jax.Array  # [T, B, A] expected returns Σ_k p_k z_k


class DuelingDistributionalHead(nn.Module):
    """Atom logits `V(x) + A(x, a) - mean_a A(x, a)`, shape `[..., num_actions, num_atoms]`."""

    num_actions: int
    num_atoms: int

    @nn.compact
    def __call__(self, features):
        init = nn.initializers.orthogonal(1.0)
        value = nn.Dense(self.num_atoms, kernel_init=init, name="value")(features)
        advantage = nn.Dense(self.num_actions * self.num_atoms, kernel_init=init, name="advantage")(
            features
        )
        advantage = advantage.reshape((*features.shape[:-1], self.num_actions, self.num_atoms))
        self.sow("intermediates", "value_logits", value)
        self.sow("intermediates", "advantage_logits", advantage)
        centred = advantage - jnp.mean(advantage, axis=-2, keepdims=True)
        return value[..., None, :] + centred


class ReactorNetwork(nn.Module):
    """Torso → Dense(torso_out) + ReLU → policy LSTM (stop-gradient input) and Q LSTM → heads.

    `apply(params, obs, first, state)` with time-major obs `[T, B, *obs_shape]`, `first`
    `[T, B]` bool and a `ReactorState` returns `(ReactorOutput, ReactorState)`. `obs_spec`
    is the env's `EnvSpec.obs_spec` or an array observation's shape; for a pytree
    observation the torso is a `DictEncoder` (`networks.torsos.make_torso`).
    """

    obs_spec: Any
    num_actions: int
    num_atoms: int = 51
    v_min: float = -10.0
    v_max: float = 10.0
    hidden: Sequence[int] = (128,)
    torso_out: int = 128
    lstm_size: int = 128
    uniform_mix: float = 0.01
    cnn: str = "nature"  # the torso of frame stacks (`make_torso`'s `cnn`)
    plugged: Any = None  # a user's torso module (`--network`) for `[N, ...]` batches, or None

    @property
    def atoms(self) -> jax.Array:
        """The fixed return support `[num_atoms]`, from v_min to v_max."""
        return jnp.linspace(self.v_min, self.v_max, self.num_atoms)

    def initial_state(self, batch_size: int) -> ReactorState:
        zeros = jnp.zeros((batch_size, self.lstm_size), jnp.float32)
        return ReactorState(policy=(zeros, zeros), q=(zeros, zeros))

    def setup(self):
        if self.num_atoms < 2:
            raise ValueError(f"num_atoms must be at least 2, got {self.num_atoms}")
        if not self.v_min < self.v_max:
            raise ValueError(f"need v_min < v_max, got [{self.v_min}, {self.v_max}]")
        if not 0.0 <= self.uniform_mix <= 1.0:
            raise ValueError(f"uniform_mix must lie in [0, 1], got {self.uniform_mix}")
        if self.plugged is not None:
            self.torso = self.plugged.clone()
        else:
            self.torso = make_torso(self.obs_spec, self.hidden, cnn=self.cnn)
        self.linear = nn.Dense(
            self.torso_out, kernel_init=nn.initializers.orthogonal(jnp.sqrt(2.0))
        )
        self.policy_lstm = ResetLSTM(self.lstm_size)
        self.q_lstm = ResetLSTM(self.lstm_size)
        self.policy_head = nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(0.01))
        self.q_head = DuelingDistributionalHead(self.num_actions, self.num_atoms)

    def __call__(self, obs, first, state: ReactorState):
        lead = check_obs(obs, self.obs_spec, lead=2)  # time-major [T, B, *obs_shape]
        if tuple(first.shape) != lead:
            raise ValueError(f"`first` has shape {first.shape}, expected [T, B] = {lead}")
        first = first.astype(bool)

        if self.plugged is None:
            encoded = self.torso(obs)
        else:  # the T·B observations as one batch, as the plug-in's contract says
            flat = jax.tree.map(lambda x: x.reshape((-1, *x.shape[2:])), obs)
            encoded = self.torso(flat).reshape((*lead, -1))
        features = nn.relu(self.linear(encoded))

        policy_out, policy_state = self.policy_lstm(
            jax.lax.stop_gradient(features), first, state.policy
        )
        q_out, q_state = self.q_lstm(features, first, state.q)

        policy_logits = self.policy_head(policy_out)
        uniform = self.uniform_mix / self.num_actions
        policy_probs = (1.0 - self.uniform_mix) * jax.nn.softmax(policy_logits, axis=-1) + uniform

        q_logits = self.q_head(q_out)
        q_probs = jax.nn.softmax(q_logits, axis=-1)
        q_values = jnp.einsum("...k,k->...", q_probs, self.atoms)  # E[Z] = Σ_k p_k z_k

        output = ReactorOutput(policy_logits, policy_probs, q_logits, q_probs, q_values)
        return output, ReactorState(policy=policy_state, q=q_state)
