"""Evaluation feeds a recurrent core the reward as training did (agents.evaluation)."""

from __future__ import annotations

from types import SimpleNamespace

import jax.numpy as jnp
import numpy as np
import pytest

from agents.evaluation import eval_feedback
from networks.cores import ActionRewardState, feed_back


def _agent(reward_clip: bool, feedback=feed_back):
    spec = SimpleNamespace(reward_clip=reward_clip)
    return SimpleNamespace(core_feedback=feedback, env=SimpleNamespace(spec=spec))


@pytest.mark.parametrize("reward_clip", [True, False])
def test_fed_back_reward_is_clipped_only_where_training_clipped(reward_clip):
    rewards = np.array([-7.0, -0.5, 0.0, 0.25, 3.0], np.float32)
    state = ActionRewardState(
        lstm=(), prev_action=jnp.zeros(5, jnp.int32), prev_reward=jnp.zeros(5, jnp.float32)
    )
    fb = eval_feedback(_agent(reward_clip))
    out = fb(state, jnp.arange(5), jnp.asarray(rewards))
    want = np.clip(rewards, -1, 1) if reward_clip else rewards
    np.testing.assert_array_equal(np.asarray(out.prev_reward), want)
    np.testing.assert_array_equal(np.asarray(out.prev_action), np.arange(5))


def test_agents_without_feedback_get_none():
    assert eval_feedback(_agent(True, feedback=None)) is None
    assert eval_feedback(SimpleNamespace()) is None
