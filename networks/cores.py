"""Recurrent cores that reset at episode starts.

Reset convention (envpool's NEXT_STEP auto-reset, see `agents.losses`): `first_t` is True when
x_t is the first observation of an episode, i.e. on the step after any termination or
truncation. The core state is replaced by the initial (zero) state *before* x_t is
processed, so no memory crosses an episode boundary, in acting and in replayed sequences.

`ActionRewardLSTM` is the LSTM that is also fed the previous action and the previous reward
(R2D2's core, arXiv:1901.09021 §2.3; the optional inputs of rlpyt's AtariLstmModel). It is
shared by R2D1's `RecurrentQNetwork` and the recurrent `ActorCriticNetwork` of A2C/PPO:

* acting, one step at a time: the previous action and reward live in the recurrent state
  (`ActionRewardState`); after each env step the acting loop writes the action taken and
  the reward received into it (`feed_back`, the agents' `core_feedback`);
* learning, over recorded `[T, B]` sequences: `previous_inputs` shifts the recorded
  actions and rewards by one step, starting from those in the state stored before the
  sequence, and they are passed explicitly.

In both forms the previous action and reward are zeroed where `first_t` (nothing came before
the first step of an episode), as the LSTM state is.
"""

from __future__ import annotations

from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp


def _reset_unroll(cell, x, first, state):
    """`cell` over time-major `x` `[T, B, D]`, its state zeroed before every x_t with
    `first_t`: (final state, outputs `[T, B, size]`)."""

    def step(cell, carry, inputs):
        x_t, first_t = inputs
        keep = (~first_t)[:, None].astype(x_t.dtype)
        carry = jax.tree.map(lambda s: s * keep, carry)
        carry, y = cell(carry, x_t)
        return carry, y

    scan = nn.scan(step, variable_broadcast="params", split_rngs={"params": False})
    return scan(cell, state, (x, first))


class ResetLSTM(nn.Module):
    """An LSTM unrolled over time-major inputs `[T, B, D]` with per-step resets."""

    size: int = 256

    def initial_state(self, batch_size: int):
        zeros = jnp.zeros((batch_size, self.size), jnp.float32)
        return (zeros, zeros)

    @nn.compact
    def __call__(self, x, first, state):
        """x `[T, B, D]`, first `[T, B]` bool, state (c, h) each `[B, size]`.

        Returns outputs `[T, B, size]` and the final state.
        """
        cell = nn.OptimizedLSTMCell(self.size, name="cell")
        state, ys = _reset_unroll(cell, x, first, state)
        return ys, state


class ActionRewardState(NamedTuple):
    """The state of an `ActionRewardLSTM`: the LSTM's (c, h) `[B, size]` each, and the action
    and the reward of the step before the current observation: `prev_action` `[B]` int32 (a
    discrete action's index) or `[B, D]` float32 (a continuous action), `prev_reward` `[B]`."""

    lstm: tuple
    prev_action: jax.Array
    prev_reward: jax.Array

    @classmethod
    def zeros(cls, batch_size: int, size: int, num_actions: int, discrete: bool):
        """The state of fresh episodes (`ActionRewardLSTM.initial_state`)."""
        lstm = jnp.zeros((batch_size, size), jnp.float32)
        if discrete:
            action = jnp.zeros((batch_size,), jnp.int32)
        else:
            action = jnp.zeros((batch_size, num_actions), jnp.float32)
        return cls((lstm, lstm), action, jnp.zeros((batch_size,), jnp.float32))


def feed_back(state: ActionRewardState, action, reward) -> ActionRewardState:
    """The action just taken and the reward just received become the next step's inputs (an
    agent's `core_feedback(core, action, reward)`, called by the acting loops)."""
    return state._replace(
        prev_action=jnp.asarray(action, state.prev_action.dtype),
        prev_reward=jnp.asarray(reward, state.prev_reward.dtype),
    )


def previous_inputs(state0: ActionRewardState, action, reward):
    """The previous-action and -reward inputs of a recorded sequence of observations
    x_0..x_T: (prev_action, prev_reward) with leading axis T + 1, those of x_t being
    (a_{t−1}, r_{t−1}) and those of x_0 the ones in `state0`, the state stored before x_0.

    action `[T, B]` (indices) or `[T, B, D]`, reward `[T, B]`: the action taken at x_t and the
    reward received for it, as the acting loop fed them back. Not zeroed at episode starts
    yet (the core does that with `first`). A caller with only T observations drops the last
    entry."""
    prev_action = jnp.concatenate([state0.prev_action[None].astype(action.dtype), action], axis=0)
    prev_reward = jnp.concatenate([state0.prev_reward[None].astype(reward.dtype), reward], axis=0)
    return prev_action, prev_reward


def action_reward_features(x, first, prev_action, prev_reward, num_actions: int, discrete: bool):
    """`x` `[T, B, D]` with the previous action and reward appended: `[T, B, D + A + 1]`.

    Where `first_t` both are zeroed *before* encoding: a continuous action becomes the zero
    vector, a discrete one the index 0, hence the one-hot of action 0 (R2D1's encoding since it
    was written; kept so its numbers do not change: the zero reward and the zeroed LSTM state
    still mark the start)."""
    keep = ~first
    if discrete:
        a = jax.nn.one_hot(jnp.where(keep, prev_action, 0), num_actions, dtype=x.dtype)
    else:
        a = jnp.where(keep[..., None], prev_action, 0.0).astype(x.dtype)
    r = jnp.where(keep, prev_reward, 0.0)[..., None].astype(x.dtype)
    return jnp.concatenate([x, a, r], axis=-1)


class ActionRewardLSTM(nn.Module):
    """A `ResetLSTM` whose input is the features with the previous action (one-hot over
    `num_actions` when `discrete`, else the raw `num_actions`-vector) and the previous reward
    appended (module docstring). Its parameters are laid out as `ResetLSTM`'s (`cell`)."""

    size: int
    num_actions: int  # number of discrete actions, or the continuous action vector's size
    discrete: bool = True

    def initial_state(self, batch_size: int) -> ActionRewardState:
        return ActionRewardState.zeros(batch_size, self.size, self.num_actions, self.discrete)

    @nn.compact
    def __call__(self, x, first, state: ActionRewardState, prev_action=None, prev_reward=None):
        """x `[T, B, D]`, first `[T, B]` bool, state `ActionRewardState`. `prev_action`,
        `prev_reward`: the inputs of every step (`[T, B]` / `[T, B, A]`, `previous_inputs`),
        or None for one step (T = 1, acting): then the state's are used.

        Returns outputs `[T, B, size]` and the state after the last step: its LSTM part
        advanced, its previous action and reward left as given (the caller feeds back the
        action it takes next, `feed_back`). The LSTM's input is sown as
        `intermediates/inputs` (for tests)."""
        if prev_action is None or prev_reward is None:
            if x.shape[0] != 1:
                raise ValueError(
                    f"ActionRewardLSTM over {x.shape[0]} steps needs `prev_action` and "
                    "`prev_reward` for every step (only one step reads them from the state)"
                )
            prev_action, prev_reward = state.prev_action[None], state.prev_reward[None]
        x = action_reward_features(
            x, first, prev_action, prev_reward, self.num_actions, self.discrete
        )
        self.sow("intermediates", "inputs", x)
        cell = nn.OptimizedLSTMCell(self.size, name="cell")
        lstm, ys = _reset_unroll(cell, x, first, state.lstm)
        return ys, state._replace(lstm=lstm)
