"""A2C (synchronous advantage actor-critic): config, presets and a thin agent over PPO's
learner (agents/ppo/); registered as `--agent a2c`."""

from agents.a2c.agent import A2CAgent
from agents.a2c.config import PRESETS, A2CConfig
from agents.core.registry import AgentSpec

DESCRIPTION = "A2C: one RMSprop step per rollout, n-step/GAE advantages; A3C's synchronous form"
SPEC = AgentSpec(
    "a2c", A2CConfig, A2CAgent, PRESETS, "a2c-classic", DESCRIPTION, dict_obs=True,
)  # fmt: skip

__all__ = ["SPEC", "A2CAgent", "A2CConfig"]
