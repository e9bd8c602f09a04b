"""Evaluation feeds a recurrent core the reward as training did (engine.evaluation)."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from engine.evaluation import eval_feedback
from networks.cores import ActionRewardState, feed_back


@pytest.mark.parametrize("reward_clip", [True, False])
def test_fed_back_reward_is_clipped_only_where_training_clipped(reward_clip):
    rewards = np.array([-7.0, -0.5, 0.0, 0.25, 3.0], np.float32)
    state = ActionRewardState(
        lstm=(), prev_action=jnp.zeros(5, jnp.int32), prev_reward=jnp.zeros(5, jnp.float32)
    )
    fb = eval_feedback(feed_back, reward_clip)
    out = fb(state, jnp.arange(5), jnp.asarray(rewards))
    want = np.clip(rewards, -1, 1) if reward_clip else rewards
    np.testing.assert_array_equal(np.asarray(out.prev_reward), want)
    np.testing.assert_array_equal(np.asarray(out.prev_action), np.arange(5))


def test_agents_without_feedback_get_none():
    assert eval_feedback(None, True) is None and eval_feedback(None, False) is None
    assert eval_feedback(feed_back, False) is feed_back


class _Env:
    """A vector env of `n` envs whose episodes last `length` steps (None: never end)."""

    def __init__(self, n: int, length: int | None):
        self.spec = SimpleNamespace(num_envs=n)
        self.n, self.length, self.t = n, length, 0

    def _ts(self, first: bool, over: bool):
        n = self.n
        return SimpleNamespace(
            obs=np.zeros((n, 1), np.float32), first=np.full(n, first), reward=np.ones(n),
            raw_reward=np.ones(n), game_over=np.full(n, over),
        )  # fmt: skip

    def reset(self):
        self.t = 0
        return self._ts(True, False)

    def step(self, action):
        if self.length is not None and self.t == self.length:  # the auto-reset step
            self.t = 0
            return self._ts(True, False)
        self.t += 1
        return self._ts(False, self.length is not None and self.t == self.length)


def _act(params, obs, first, core, key):
    return np.zeros(len(obs), np.int32), core


def test_an_episode_that_never_ends_is_one_evaluation_error_not_a_bound_on_all_episodes():
    """The step bound is per episode: many short episodes finish (more steps in all than the
    bound); an episode that never ends raises EvaluationError, one line."""
    from engine.evaluation import EvaluationError, evaluate

    key = jax.random.PRNGKey(0)
    returns, lengths = evaluate(_act, None, _Env(2, 3), 40, key, max_steps=10)
    assert len(returns) == 40 and set(lengths) == {3}  # 40 x 4 env steps > the bound of 10
    with pytest.raises(EvaluationError) as info:
        evaluate(_act, None, _Env(2, None), 1, key, max_steps=10)
    assert "an episode ran 10 steps without ending" in str(info.value)
    assert "\n" not in str(info.value)


class _RawEnv(_Env):
    """Episodes of `length` steps whose training reward is clipped to 1 while the raw reward
    of step t is 10·t + env index; the auto-reset step carries a raw reward of 1000, which is
    not part of any episode."""

    def _ts(self, first: bool, over: bool):
        ts = super()._ts(first, over)
        raw = 1000.0 if first and self.t == 0 else 10.0 * self.t
        ts.raw_reward = raw + np.arange(self.n, dtype=np.float64)
        return ts


def test_evaluation_returns_sum_the_raw_rewards_of_each_episode():
    """The return of an evaluation episode is the sum of its raw (unclipped) rewards over its
    steps, the reset step excluded: (10 + 20 + 30) + 3·i for env i, never 3 (the clipped
    sum) nor anything with the reset's 1000."""
    from engine.evaluation import evaluate

    returns, lengths = evaluate(_act, None, _RawEnv(2, 3), 6, jax.random.PRNGKey(0))
    assert sorted(lengths) == [3] * 6
    assert sorted(returns) == sorted([60.0] * 3 + [63.0] * 3), returns
