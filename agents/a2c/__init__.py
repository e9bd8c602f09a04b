"""A2C (synchronous advantage actor-critic): config, presets and PPO's parts with A2C's
optimizer (agents/a2c/agent.py); registered as `--agent a2c`."""

from agents.a2c.agent import make
from agents.a2c.config import PRESETS, A2CConfig
from agents.core.registry import AgentSpec
from agents.ppo import TUNABLE

DESCRIPTION = "A2C: one RMSprop step per rollout, n-step/GAE advantages; A3C's synchronous form"
SPEC = AgentSpec(
    "a2c", A2CConfig, make, PRESETS, "a2c-classic", DESCRIPTION, dict_obs=True,
    tunable={k: v for k, v in TUNABLE.items() if k != "clip_eps"},  # no ratio clipping to vary
    discrete_only=False,
)  # fmt: skip

__all__ = ["SPEC", "A2CConfig"]
