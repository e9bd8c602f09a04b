"""The one replay-update schedule (agents.core.learning.updates_owed) as each agent uses it:
for every preset of DQN, R2D1, the Reactor, SAC and TD3, the updates its iterations owe are
those of the rate's exact rational arithmetic (Python fractions): DQN and R2D1 learn
replay_ratio transitions per env step (replay_ratio / (batch · learnt steps) updates), the
Reactor one update per env_steps_per_update env steps, SAC and TD3 update_to_data updates
per env step; none before start_train_at, none in the warm-up iterations."""

from __future__ import annotations

import math
import types
from fractions import Fraction

import numpy as np
import pytest

from agents.core.registry import get_agent


def _rate(name: str, cfg) -> Fraction:
    exact = lambda x: Fraction(x).limit_denominator(10**6)  # noqa: E731  (the decimal given)
    if name in ("dqn", "r2d1"):
        return exact(cfg.replay_ratio) / (cfg.batch_size * cfg.learn_len)
    if name == "reactor":
        return 1 / exact(cfg.env_steps_per_update)
    return exact(cfg.update_to_data)


CASES = [
    (name, preset)
    for name in ("dqn", "r2d1", "reactor", "sac", "td3")
    for preset in sorted(get_agent(name).presets)
]


@pytest.mark.parametrize("name, preset", CASES)
def test_every_presets_schedule_is_its_exact_rate(name, preset):
    spec = get_agent(name)
    cfg = spec.config_cls(**spec.split_preset(preset)[1])
    # the schedule is a part (`ReplayParts.updates_due`), built for an env of the agent's kind
    # (a stand-in spec: no env is made)
    if name in ("sac", "td3"):
        env_spec = types.SimpleNamespace(
            env_id="Pendulum-v1", obs_spec=(3,), obs_shape=(3,), discrete=False,
            action_shape=(1,), action_low=np.full(1, -2.0), action_high=np.full(1, 2.0),
            privileged_obs=(), visible_obs=None,
        )  # fmt: skip
    else:
        env_spec = types.SimpleNamespace(obs_spec=(4,), num_actions=2, discrete=True)
    due = spec.make(cfg, env_spec).replay.updates_due
    stub = types.SimpleNamespace(steps_per_iteration=cfg.num_envs * cfg.trace_len)
    warmup = 1 + (getattr(cfg, "lookback", 0) + getattr(cfg, "lookahead", 0)) // cfg.trace_len
    if name == "reactor":
        warmup = 1
    rate, spi, start = _rate(name, cfg), stub.steps_per_iteration, cfg.start_train_at
    owed = lambda e: math.floor(max(0, e - start) * rate)  # noqa: E731
    # from before learning starts to well past it, and far into a long run
    first = max(0, start // spi - 50)
    for it in [*range(10), *range(first, first + 3000), *range(10**6, 10**6 + 200)]:
        e = it * spi
        want = 0 if it < warmup else owed(e + spi) - owed(e)
        assert due(it, e, 0) == want, (preset, it)
