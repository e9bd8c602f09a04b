"""A2C (synchronous advantage actor-critic): config, presets and PPO's parts with A2C's
optimizer (agents/a2c/agent.py); registered as `--agent a2c`."""

from agents.a2c.agent import make
from agents.a2c.config import PRESETS, A2CConfig
from agents.core.registry import AgentSpec
from agents.ppo import TUNABLE
from engine.driver import parts_agent

# A2C has no ratio clipping to vary.
A2CAgent = parts_agent(
    "a2c", make, tunable={k: v for k, v in TUNABLE.items() if k != "clip_eps"},
    discrete_only=False,
)  # fmt: skip
DESCRIPTION = "A2C: one RMSprop step per rollout, n-step/GAE advantages; A3C's synchronous form"
SPEC = AgentSpec(
    "a2c", A2CConfig, A2CAgent, PRESETS, "a2c-classic", DESCRIPTION, dict_obs=True,
)  # fmt: skip

__all__ = ["SPEC", "A2CAgent", "A2CConfig"]
